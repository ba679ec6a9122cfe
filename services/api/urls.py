from django.urls import path, re_path

from services.api import agent_views, audit_views, views

# The resolver tries these in order: the paths every agent and client calls come first.
urlpatterns = [
    path("services", views.ServiceListView.as_view(), name="service-list"),
    re_path(
        r"^agent/credentials/(?P<service>.*)$",
        agent_views.AgentCredentialsView.as_view(),
        name="agent-credentials",
    ),
    path("services/credentials", views.CredentialsView.as_view(), name="credentials"),
    path("services/test", views.ServiceTestView.as_view(), name="service-test"),
    # Any text after the slash, even empty or holding '/', reaches the view, so that an
    # identifier that cannot be normalized is a 400 naming `service`, not a 404.
    re_path(
        r"^services/credentials/(?P<service>.*)$",
        views.ServiceCredentialsView.as_view(),
        name="service-credentials",
    ),
    path("providers", views.ProviderListView.as_view(), name="provider-list"),
    path("agents", agent_views.AgentListView.as_view(), name="agent-list"),
    path("agents/<str:name>", agent_views.AgentView.as_view(), name="agent"),
    path("agents/<str:name>/tokens", agent_views.AgentTokenView.as_view(), name="agent-tokens"),
    path(
        "agents/<str:name>/tokens/<str:prefix>",
        agent_views.AgentTokenRevokeView.as_view(),
        name="agent-token",
    ),
    path("audit-events", audit_views.AuditEventListView.as_view(), name="audit-events"),
]
