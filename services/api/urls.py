from django.urls import path, re_path

from services.api import views

urlpatterns = [
    path("providers", views.ProviderListView.as_view(), name="provider-list"),
    path("services", views.ServiceListView.as_view(), name="service-list"),
    path("services/test", views.ServiceTestView.as_view(), name="service-test"),
    path("services/credentials", views.CredentialsView.as_view(), name="credentials"),
    # Any text after the slash, even empty or holding '/', reaches the view, so that an
    # identifier that cannot be normalized is a 400 naming `service`, not a 404.
    re_path(
        r"^services/credentials/(?P<service>.*)$",
        views.ServiceCredentialsView.as_view(),
        name="service-credentials",
    ),
]
