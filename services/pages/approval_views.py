"""The approval page, `/approvals/{id}`: a signed-in member of the approval's account sees what
an agent asks and decides it (a call: Allow once, Allow for 30 minutes, Deny; an access
request: Approve, as asked or narrower, or Deny). The decision is a POST with its CSRF token,
answered by a redirect to the page, which then shows who decided and when.

Who gets what, looking nothing up before it is known who asks: a request with an
`Authorization` header (an agent's or the account's token) is 403; a visitor who is not a
member (signed out, or a user such as staff who is no member) gets the sign-in page, 200 (403
to a POST), the same for every id; a member gets the page of an approval of their account,
and for an unknown id or another account's the same "nothing here" page, 404. A decided or
expired approval shows its state and no buttons; a decision on it is 409 with that page.
Every answer: no-store, no script, nothing loaded, framed nowhere.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from services.consent.access import approve_access, grants_of
from services.consent.decisions import Decider, approval_of, approve_call, deny
from services.exceptions import (
    ApprovalDecided,
    ApprovalNotFound,
    FieldErrorCode,
    InvalidRequest,
    field_error,
)
from services.grants import Given
from services.members import login_url, signed_in_member
from services.models import Approval, ApprovalKind, ApprovalStatus, GrantAccess, Member
from services.pages.paths import APPROVALS_PREFIX

# The page's "Allow for N minutes".
ALLOW_MINUTES = 30
# No script, no frame, nothing loaded; the one style inline; the forms post to credvault only.
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# The decisions a form may post, by the kind of request they decide.
CALL_DECISIONS = frozenset({"once", "minutes", "deny"})
ACCESS_DECISIONS = frozenset({"approve", "deny"})


@require_http_methods(["GET", "HEAD", "POST"])
def approval_page(request: HttpRequest, approval_id: str) -> HttpResponse:
    if "HTTP_AUTHORIZATION" in request.META:
        return _page(request, "approvals/token_refused.html", {}, status=403)
    member = signed_in_member(request)
    if member is None:
        login = login_url(next_path=APPROVALS_PREFIX + approval_id)
        status = 403 if request.method == "POST" else 200
        return _page(request, "approvals/sign_in.html", {"login_url": login}, status=status)
    decider = Decider(
        account_id=member.account_id,
        request_id=getattr(getattr(request, "context", None), "request_id", ""),
        member=member.user.email,
    )
    try:
        approval = approval_of(account_id=member.account_id, approval_id=approval_id)
        if request.method == "POST":
            decide(decider=decider, approval=approval, form=request.POST)
            response = HttpResponse(status=303)
            response["Location"] = APPROVALS_PREFIX + approval_id
            return _guarded(response)
    except ApprovalNotFound:
        return _page(request, "approvals/nothing.html", {"member": member}, status=404)
    except ApprovalDecided:
        return _approval_page(request, member, approval_id, status=409, decided_already=True)
    except InvalidRequest as refused:
        messages = [error["message"] for error in refused.errors or []]
        return _approval_page(request, member, approval_id, status=400, errors=messages)
    return _approval_page(request, member, approval_id, status=200, approval=approval)


def decide(*, decider: Decider, approval: Approval, form: QueryDict) -> None:
    """The form's decision on `approval`: `decision` (once, minutes or deny for a call; approve
    or deny for an access request), and for an access request approved narrower the services
    kept (`service`, each checked one) and `valid_for_minutes` (blank: as asked)."""
    decision = form.get("decision", "")
    allowed = CALL_DECISIONS if approval.kind == ApprovalKind.CALL else ACCESS_DECISIONS
    if decision not in allowed:
        message = "Choose one of the buttons."
        raise InvalidRequest(errors=[field_error("decision", FieldErrorCode.INVALID, message)])
    if decision == "deny":
        deny(decider=decider, approval_id=approval.id)
    elif decision == "once":
        approve_call(decider=decider, approval_id=approval.id)
    elif decision == "minutes":
        approve_call(decider=decider, approval_id=approval.id, allow_for_minutes=ALLOW_MINUTES)
    else:
        services = _kept_services(approval.services, form.getlist("service"))
        approve_access(
            decider=decider,
            approval_id=approval.id,
            services=services,
            valid_for_minutes=_minutes(form.get("valid_for_minutes", "")),
        )


def _kept_services(asked: Sequence[Mapping[str, Any]], kept: list[str]) -> list[Given] | None:
    """The asked grants whose service is kept, or None when every one is (as asked)."""
    chosen = [entry for entry in asked if entry.get("service") in kept]
    if not chosen:
        message = "Keep at least one service, or deny the request."
        raise InvalidRequest(errors=[field_error("service", FieldErrorCode.INVALID, message)])
    if len(chosen) == len(asked):
        return None
    return [Given(grant, f"services[{index}]") for index, grant in enumerate(grants_of(chosen))]


def _minutes(given: str) -> int | None:
    if not given.strip():
        return None
    try:
        return int(given)
    except ValueError:
        message = "The minutes are a whole number, or blank for as long as asked."
        raise InvalidRequest(
            errors=[field_error("validForMinutes", FieldErrorCode.INVALID, message)]
        ) from None


def _approval_page(
    request: HttpRequest,
    member: Member,
    approval_id: str,
    *,
    status: int,
    approval: Approval | None = None,
    decided_already: bool = False,
    errors: Sequence[str] = (),
) -> HttpResponse:
    if approval is None:  # after a refused decision: as it is now
        approval = approval_of(account_id=member.account_id, approval_id=approval_id)
    context = {
        "member": member,
        "shown": shown(approval, now=timezone.now()),
        "decided_already": decided_already,
        "errors": errors,
        "allow_minutes": ALLOW_MINUTES,
        "public_host": urlsplit(settings.CREDVAULT_PUBLIC_URL).netloc,
    }
    return _page(request, "approvals/approval.html", context, status=status)


def _page(
    request: HttpRequest, template: str, context: Mapping[str, Any], *, status: int
) -> HttpResponse:
    body = render_to_string(template, dict(context), request=request)
    return _guarded(HttpResponse(body, status=status))


def _guarded(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    response["Content-Security-Policy"] = PAGE_POLICY
    response["X-Frame-Options"] = "DENY"
    # Same-origin, not no-referrer: a form's POST then carries its Origin, which the CSRF check
    # compares (no-referrer makes it "null", and the decision would be refused).
    response["Referrer-Policy"] = "same-origin"
    return response


# --- what the page shows ---------------------------------------------------------------------


@dataclass(frozen=True)
class ShownGrant:
    service: str
    access: str
    methods: str
    paths: str
    base: str
    graphql: str


@dataclass(frozen=True)
class Shown:
    """An approval as the page shows it: every text of the request made visible (control and
    invisible characters spelled out), every moment in UTC."""

    id: str
    kind: str
    agent: str
    state: str
    asked_at: str
    waits_until: str
    waits_for: str
    decidable: bool
    outcome: list[str]
    # A call.
    service: str = ""
    method: str = ""
    path: str = ""
    query: str = ""
    body: str = ""
    body_cut: bool = False
    rule: str = ""
    # An access request.
    grants: tuple[ShownGrant, ...] = ()
    reason: str = ""
    valid_for: str = ""
    max_minutes: int | None = None


def shown(approval: Approval, *, now: datetime) -> Shown:
    state = approval.status
    if state == ApprovalStatus.PENDING and approval.expires_at <= now:
        state = ApprovalStatus.EXPIRED
    common: dict[str, Any] = {
        "id": approval.id,
        "kind": approval.kind,
        "agent": approval.agent.name,
        "state": state,
        "asked_at": moment(approval.created_at),
        "waits_until": moment(approval.expires_at),
        "waits_for": _until(approval.expires_at, now),
        "decidable": state == ApprovalStatus.PENDING,
        "outcome": _outcome(approval, state=state, now=now),
    }
    if approval.kind == ApprovalKind.CALL:
        return Shown(
            **common,
            service=approval.service,
            method=approval.method,
            path=visible(approval.path),
            query=visible(approval.query),
            body=visible(approval.body_shown),
            body_cut=approval.body_cut,
            rule=rule_text(approval.rule),
        )
    minutes = approval.valid_for_minutes
    return Shown(
        **common,
        grants=tuple(_shown_grant(entry) for entry in approval.services),
        reason=visible(approval.reason),
        valid_for=f"for {_minutes_text(minutes)} from the approval" if minutes else "for good",
        max_minutes=minutes,
    )


def _shown_grant(entry: Mapping[str, Any]) -> ShownGrant:
    read = entry.get("access") == GrantAccess.READ
    return ShownGrant(
        service=entry.get("service", ""),
        access="brokered calls and reading the credential itself" if read else "brokered calls",
        methods=", ".join(entry.get("methods", ())) or "none",
        paths=", ".join(visible(path) for path in entry.get("paths", ())) or "none",
        base=entry.get("base") or "every base",
        graphql=", ".join(entry.get("graphql", ())),
    )


def _outcome(approval: Approval, *, state: str, now: datetime) -> list[str]:
    """What became of the request, in sentences."""
    who = decided_by(approval.decided_by)
    when = moment(approval.decided_at) if approval.decided_at else ""
    if state == ApprovalStatus.PENDING:
        return []
    if state == ApprovalStatus.EXPIRED:
        return [f"Nobody decided before {moment(approval.expires_at)}: the request expired."]
    if state == ApprovalStatus.DENIED:
        return [f"Denied by {who} at {when}."]
    if approval.kind == ApprovalKind.ACCESS:
        granted = ", ".join(entry.get("service", "") for entry in approval.granted)
        sentences = [f"Approved by {who} at {when}: granted {granted}."]
        if approval.allowed_until:
            sentences.append(f"The access ends at {moment(approval.allowed_until)}.")
        return sentences
    if approval.allowed_until is not None:
        minutes = round((approval.allowed_until - (approval.decided_at or now)).total_seconds())
        span = _minutes_text(minutes // 60)
        ends = "go through until" if approval.allowed_until > now else "went through until"
        return [
            f"Allowed for {span} by {who} at {when}.",
            f"The agent's calls that match the same rule ({rule_text(approval.rule)}) "
            f"{ends} {moment(approval.allowed_until)}.",
        ]
    sentences = [f"Allowed once by {who} at {when}."]
    if approval.used_at is not None:
        sentences.append(f"The agent's call went through at {moment(approval.used_at)}.")
    elif approval.expires_at > now:
        sentences.append(
            f"The agent's repeat of this exact call goes through once, until "
            f"{moment(approval.expires_at)}."
        )
    else:
        sentences.append(f"The agent did not repeat the call before {moment(approval.expires_at)}.")
    return sentences


def decided_by(stored: str) -> str:
    """`decided_by` as a person reads it: a member's email, or the account API's token."""
    if stored.startswith("cvt_"):
        return f"the account API (token {stored}…)"
    return stored or "nobody"


def rule_text(rule: Mapping[str, Any]) -> str:
    """An `approve` rule in words: `POST under /repos`."""
    methods = " or ".join(rule.get("methods") or ()) or "any method"
    paths = ", ".join(rule.get("paths") or ()) or "the whole API"
    return f"{methods} under {paths}"


def moment(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _until(value: datetime, now: datetime) -> str:
    seconds = (value - now).total_seconds()
    if seconds <= 0:
        return "no longer"
    if seconds < 60:
        return "less than a minute"
    return _minutes_text(int(seconds // 60))


def _minutes_text(minutes: int) -> str:
    """`45 minutes`, `2 hours`, `23 hours 59 minutes`."""
    hours, rest = divmod(minutes, 60)
    parts = [f"{hours} hour{'s' if hours != 1 else ''}"] if hours else []
    if rest or not hours:
        parts.append(f"{rest} minute{'s' if rest != 1 else ''}")
    return " ".join(parts)


# Characters a person cannot see or that reorder what they see (controls, bidirectional
# overrides, zero-width ones, line separators): spelled out, so that no text of an agent's
# request can hide or disguise part of itself on the page.
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
_SHOWN_AS_IS = frozenset("\n\t")


def visible(text: str) -> str:
    return "".join(
        f"⟨U+{ord(char):04X}⟩"
        if char not in _SHOWN_AS_IS and unicodedata.category(char) in _HIDDEN
        else char
        for char in text
    )
