from django.urls import path, re_path

from services.api import (
    agent_views,
    approval_views,
    audit_views,
    oauth_views,
    proxy_views,
    service_views,
    webhook_views,
)

# Any text at all, control characters included, to the very end (`\Z`: `$` also matches
# before a final newline). The path's text is normalized exactly as the body's, so
# `line%0Abreak` names the `line-break` that a body's `line\nbreak` stores: `.*`, which stops
# at a newline, would make it a 404.
ANY_TEXT = r"[\s\S]*"

# The resolver tries these in order: the paths every agent and client calls come first.
urlpatterns = [
    path("services", service_views.ServiceListView.as_view(), name="service-list"),
    re_path(
        rf"^agent/credentials/(?P<service>{ANY_TEXT})\Z",
        agent_views.AgentCredentialsView.as_view(),
        name="agent-credentials",
    ),
    # The service is one segment (any text but '/'); the provider's path is the rest, which
    # may be empty (`.../proxy/github/` calls the API's base).
    re_path(
        r"^agent/proxy/(?P<service>[^/]*)/(?P<path>[\s\S]*)\Z",
        proxy_views.ProxyView.as_view(),
        name="agent-proxy",
    ),
    path("services/credentials", service_views.CredentialsView.as_view(), name="credentials"),
    path("services/test", service_views.ServiceTestView.as_view(), name="service-test"),
    # Any text after the slash, even empty or holding '/', reaches the view, so that an
    # identifier that cannot be normalized is a 400 naming `service`, not a 404.
    re_path(
        rf"^services/credentials/(?P<service>{ANY_TEXT})\Z",
        service_views.ServiceCredentialsView.as_view(),
        name="service-credentials",
    ),
    path("providers", service_views.ProviderListView.as_view(), name="provider-list"),
    path("oauth-clients", oauth_views.OAuthClientListView.as_view(), name="oauth-client-list"),
    path(
        "oauth-clients/<str:provider>", oauth_views.OAuthClientView.as_view(), name="oauth-client"
    ),
    path("connect/<str:provider>", oauth_views.ConnectView.as_view(), name="connect"),
    path("agents", agent_views.AgentListView.as_view(), name="agent-list"),
    path("agents/<str:name>", agent_views.AgentView.as_view(), name="agent"),
    path("agents/<str:name>/tokens", agent_views.AgentTokenView.as_view(), name="agent-tokens"),
    path(
        "agents/<str:name>/tokens/<str:prefix>",
        agent_views.AgentTokenRevokeView.as_view(),
        name="agent-token",
    ),
    path(
        "agent/access-requests",
        approval_views.AccessRequestListView.as_view(),
        name="agent-access-requests",
    ),
    path(
        "agent/access-requests/<str:approval_id>",
        approval_views.AccessRequestView.as_view(),
        name="agent-access-request",
    ),
    path("approvals", approval_views.ApprovalListView.as_view(), name="approvals"),
    path(
        "approvals/<str:approval_id>/approve",
        approval_views.ApproveView.as_view(),
        name="approval-approve",
    ),
    path(
        "approvals/<str:approval_id>/deny",
        approval_views.DenyView.as_view(),
        name="approval-deny",
    ),
    path("audit-events", audit_views.AuditEventListView.as_view(), name="audit-events"),
    path("webhooks", webhook_views.WebhookListView.as_view(), name="webhook-list"),
    path("webhooks/<str:webhook_id>", webhook_views.WebhookView.as_view(), name="webhook"),
    path(
        "webhooks/<str:webhook_id>/rotate-secret",
        webhook_views.WebhookRotateView.as_view(),
        name="webhook-rotate-secret",
    ),
    path(
        "webhooks/<str:webhook_id>/test",
        webhook_views.WebhookTestView.as_view(),
        name="webhook-test",
    ),
    path(
        "webhooks/<str:webhook_id>/deliveries",
        webhook_views.WebhookDeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    path(
        "webhook-deliveries/<str:event_id>/redeliver",
        webhook_views.WebhookRedeliverView.as_view(),
        name="webhook-redeliver",
    ),
]
