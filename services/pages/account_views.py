"""A member's pages: sign in, sign out, set a password through a sign-in link, and where a
signed-in member lands. Thin views: read the form, call one function of services.members,
render."""

from __future__ import annotations

from django.contrib.auth import login, logout
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from services.members import (
    LOGIN_PATH,
    LinkRefused,
    PasswordRefused,
    SignInLocked,
    SignInRefused,
    link_member,
    login_url,
    set_password_with_link,
    sign_in,
    signed_in_member,
)
from services.pages.paths import ACCOUNT_PREFIX
from services.pages.responses import client_address, local_path, page, redirect, request_id

HOME_PATH = ACCOUNT_PREFIX


@require_http_methods(["GET", "HEAD", "POST"])
def login_page(request: HttpRequest) -> HttpResponse:
    """Email and password; after 10 failures for an email or 30 from an address, 429 for 15
    minutes. `?next=` (a local path only) is where a signed-in member goes."""
    next_path = local_path(request.POST.get("next") or request.GET.get("next", ""))
    # The email typed is not shown again: an unknown email and a wrong password get the same
    # page, byte for byte but the CSRF token.
    context = {"next": next_path, "error": ""}
    if request.method != "POST":
        if signed_in_member(request) is not None:
            return redirect(next_path or HOME_PATH)
        return page(request, "account/login.html", context)
    try:
        member = sign_in(
            email=request.POST.get("email", ""),
            password=request.POST.get("password", ""),
            client_address=client_address(request),
            request_id=request_id(request),
        )
    except SignInLocked as locked:
        context.update(error=str(locked))
        retry = {"Retry-After": str(locked.wait_seconds)}
        return page(request, "account/login.html", context, status=429, headers=retry)
    except SignInRefused as refused:
        context.update(error=str(refused))
        return page(request, "account/login.html", context, status=400)
    login(request, member.user)
    return redirect(next_path or HOME_PATH)


@require_POST
def logout_page(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect(f"{LOGIN_PATH}?signed_out=1")


@require_http_methods(["GET", "HEAD", "POST"])
def sign_in_link_page(request: HttpRequest, secret: str) -> HttpResponse:
    """A one-time link: the member sets a password (twice), and is signed in."""
    try:
        if request.method != "POST":
            member = link_member(secret=secret)
            return page(request, "account/set_password.html", {"email": member.user.username})
        member = set_password_with_link(
            secret=secret,
            password=request.POST.get("password", ""),
            password_again=request.POST.get("password_again", ""),
            request_id=request_id(request),
        )
    except LinkRefused as refused:
        reason = {"reason": str(refused)}
        return page(request, "account/link_refused.html", reason, status=refused.status)
    except PasswordRefused as refused:
        shown = {"email": refused.email, "errors": refused.messages}
        return page(request, "account/set_password.html", shown, status=400)
    login(request, member.user)
    return redirect(HOME_PATH)


@require_http_methods(["GET", "HEAD"])
def home_page(request: HttpRequest) -> HttpResponse:
    """Who is signed in, for which account, and the way out."""
    member = signed_in_member(request)
    if member is None:
        return redirect(login_url(next_path=HOME_PATH))
    return page(request, "account/home.html", {"member": member})


def csrf_refused(request: HttpRequest) -> HttpResponse:
    """A page's form posted without its CSRF token (or with a stale one): 403, say so."""
    return page(request, "account/csrf_refused.html", status=403)
