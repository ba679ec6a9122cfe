"""credvault's pages for people: server-rendered HTML behind a session, for the members of an
account (sign-in, and the pages that need a signed-in member). Unlike the API, these pages
use Django's sessions, users and CSRF protection."""
