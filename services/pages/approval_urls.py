"""The approval page's route, included at the site's root by credvault/urls.py."""

from django.urls import path

from services.pages import approval_views

urlpatterns = [
    path("approvals/<str:approval_id>", approval_views.approval_page, name="approval-page"),
]
