"""The account pages' routes, included at the site's root by credvault/urls.py."""

from django.urls import path

from services.pages import account_views

urlpatterns = [
    path("account/", account_views.home_page, name="account-home"),
    path("account/login", account_views.login_page, name="account-login"),
    path("account/logout", account_views.logout_page, name="account-logout"),
    path(
        "account/sign-in/<str:secret>",
        account_views.sign_in_link_page,
        name="account-sign-in",
    ),
]
