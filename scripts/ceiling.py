"""The benchmark's hand-built ceiling on PostgreSQL: `python -m scripts.bench --ceiling`.

Three hand-built versions of the list of services, served beside credvault's own paths by
this URLconf, which only the benchmark's server has (`scripts.ceiling_settings`). Each
is a plain Django view under the same middleware as `/healthz`, with no REST framework, no
Django cursor and none of the request path's checks beyond a well-formed, known, unrevoked
token of an active account: no expiry, no rate limit, no `last_used_at`, no error handling.
Each does less than credvault's list, so credvault's list cannot beat it; what each reaches
is the ceiling for a request that writes what it writes:

- `ceiling/read`: the token, then the list. No audit event.
- `ceiling/insert`: the token, then one statement that inserts an event of the request,
  committed before the answer, and reads the list; the event is not chained (it goes to a
  scratch table, `ceiling_event`, with no head to lock).
- `ceiling/chained`: the token, then one statement that appends the event to the account's
  chain as credvault does (the same text, `sql.append_audit_event_parts`), and reads the list.

Every request is two statements on psycopg's own cursor, each one round trip. Never part of
`make run` or of production: the paths exist only in this module's URLconf.
"""

from __future__ import annotations

import json
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, HttpResponse
from django.urls import path

from credvault.urls import urlpatterns as credvault_urlpatterns
from services import audit, sql, tokens
from services.models import (
    Account,
    ApiToken,
    AuditAction,
    AuditEvent,
    AuditOutcome,
    ConnectedService,
)
from services.times import rfc3339

SCRATCH_TABLE = "ceiling_event"
SCRATCH_SEQUENCE = "ceiling_event_seq"


def create_scratch_table(cursor) -> None:
    """The unchained events of `ceiling/insert`: the events table's columns, indexes and
    constraints, and a sequence for their seq (run once, on the benchmark's database)."""
    events = AuditEvent._meta.db_table
    cursor.execute(f'CREATE TABLE {SCRATCH_TABLE} (LIKE "{events}" INCLUDING ALL)')
    cursor.execute(f"CREATE SEQUENCE {SCRATCH_SEQUENCE}")


@cache
def _statements(alias: str) -> dict[str, str]:
    db = connections[alias]
    tokens_table, accounts = sql.table(db, ApiToken), sql.table(db, Account)
    services = sql.table(db, ConnectedService)
    read = (
        f"SELECT service, key_type, connected_at FROM {services} "
        "WHERE account_id = %(account_id)s ORDER BY service"
    )
    queries, insert = sql.append_audit_event_parts(db)
    return {
        "token": (
            f"SELECT t.account_id, t.prefix FROM {tokens_table} t "
            f"JOIN {accounts} a ON a.id = t.account_id "
            "WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND a.is_active"
        ),
        "read": read,
        "insert": (
            f"WITH inserted AS (INSERT INTO {SCRATCH_TABLE} "
            f"({sql.AUDIT_GIVEN_COLUMNS}, seq, prev_digest, digest) "
            f"SELECT {sql.AUDIT_GIVEN_PLACEHOLDERS}, nextval('{SCRATCH_SEQUENCE}'), '', '') "
            f"{read}"
        ),
        "chained": f"WITH {queries}, appended AS ({insert}) {read}",
    }


def _event_params(db, request: HttpRequest, account_id: int, prefix: str) -> dict:
    """The event of a list request, bound as `sql.append_audit_event` binds it."""
    context = audit.AuditContext(
        account_id=account_id, token_prefix=prefix, request_id=request.credvault_request_id
    )
    event = audit.new_event(
        context,
        action=AuditAction.SERVICES_LIST,
        outcome=AuditOutcome.SUCCESS,
        status=200,
        service="",
        target="",
    )
    given = {column: getattr(event, column) for column in sql.AUDIT_GIVEN}
    return sql.append_audit_event_params(db, given, *audit.canonical_around_seq(event))


def _view(kind: str):
    def view(request: HttpRequest) -> HttpResponse:
        db = connections[DEFAULT_DB_ALIAS]
        db.ensure_connection()
        statements = _statements(DEFAULT_DB_ALIAS)
        raw = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ")
        if not tokens.is_well_formed(raw, tokens.ACCOUNT_KIND):
            return HttpResponse(status=401)
        with db.connection.cursor() as cursor:
            cursor.execute(statements["token"], {"digest": tokens.digest(raw)})
            found = cursor.fetchone()
            if found is None:
                return HttpResponse(status=401)
            account_id, prefix = found
            params = {"account_id": account_id}
            if kind != "read":
                params.update(_event_params(db, request, account_id, prefix))
            cursor.execute(statements[kind], params)
            rows = cursor.fetchall()
        body = [
            {"service": service, "connectedAt": rfc3339(connected_at), "keyType": key_type}
            for service, key_type, connected_at in rows
        ]
        return HttpResponse(json.dumps(body), content_type="application/json")

    return view


urlpatterns = [
    *(path(f"ceiling/{kind}", _view(kind)) for kind in ("read", "insert", "chained")),
    *credvault_urlpatterns,
]
