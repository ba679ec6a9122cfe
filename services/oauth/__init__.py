"""OAuth connections: an account's clients, the connect flow, and refresh.

- `clients`: one client per account and provider; the secret sealed like a credential value.
- `connect`: the link a connect answers is credvault's own start page (`/oauth/start/{id}`),
  which names the provider and the account; continuing from it (a form of that page only)
  binds the connect to the browser with an HttpOnly, SameSite=Lax cookie and sends it to the
  provider. The state, derived from the id and SECRET_KEY, is single-use (its row is deleted
  as it is used), bound to the account, the provider, the service and that browser, expiring
  in STATE_SECONDS. Only SHA-256 digests are stored; the PKCE verifier is derived from the
  state and SECRET_KEY, so it is stored nowhere, and it is sent only to providers whose
  catalog entry takes PKCE. The callback checks the state and the browser's cookie before
  anything is sent, then exchanges the code and stores the set as one store.
- `token_sets`: the credential set of a token answer, and when a set expires. A connection's
  own API host (Salesforce's `instance_url`), where the catalog names the field that holds it,
  is kept with the set when it matches the catalog's host patterns.
- `refresh`: a set whose `expires_at` is within CREDVAULT_REFRESH_AHEAD seconds is refreshed
  before it is used. One refresh per service at a time across workers and hosts: a worker
  claims the service row in the database (`refreshing_until`, set only where the row is still
  at the generation it read, connected, not paused and unclaimed), asks the token URL with no
  database connection held and its own deadline (CREDVAULT_OAUTH_TIMEOUT), and stores the
  answer as the next generation in one transaction, the rotated refresh token with it (a
  provider that sends none: the old one is kept; an `expires_in` that says nothing usable: no
  expiry known). The others wait for the new generation and use it. A refusal of the grant
  marks `reauthorization_required` (the set stays for inspection); a refusal of the client
  itself (`invalid_client` and the like: the account's configuration, which no consent
  repairs) changes nothing; an unavailable token URL pauses the service's refreshes for
  CREDVAULT_REFRESH_RETRY_SECONDS (its uses answer 503 at once). A refresh a 401 asks for runs
  at most once a minute per service.
- `expiring`: `manage.py refresh_tokens`, every set that expires within a window.
"""
