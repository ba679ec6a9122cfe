"""URL wiring. Every path, unknown ones included, answers with problem details on error."""

from django.contrib import admin
from django.urls import include, path, reverse_lazy

from services.api import docs, errors, health, mcp_views, oauth_views
from services.api.wsgi import ADMIN_PATH_PREFIX

# The admin's "View site" link: credvault serves no pages at `/` (a 404), so it leads to the
# interactive API docs.
# (The stubs say str; Django renders a lazy one the same.)
admin.site.site_url = reverse_lazy("api-docs")  # type: ignore[assignment]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/v1/schema", docs.SchemaView.as_view(), name="schema"),
    path("api/docs", docs.DocsView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("services.api.urls")),
    path("mcp", mcp_views.McpView.as_view(), name="mcp"),
    path(
        ".well-known/oauth-protected-resource/mcp",
        mcp_views.protected_resource,
        name="mcp-resource-metadata",
    ),
    path("oauth/start/<str:start_id>", oauth_views.start, name="oauth-start"),
    path("oauth/callback", oauth_views.callback, name="oauth-callback"),
    path("", include("services.pages.approval_urls")),
    path("", include("services.pages.urls")),
    path(ADMIN_PATH_PREFIX.removeprefix("/"), admin.site.urls),
]

handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.page_not_found
handler500 = errors.server_error
