"""Marked secrets and tokens never leave: not in a response, a log record, an admin page, a
model's str() or repr(), nor any database table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from services import bearer_tokens
from services.credentials import credential_set
from services.masking import Secret
from services.models import (
    Account,
    Agent,
    AgentToken,
    ApiToken,
    AuditEvent,
    ConnectedService,
    CredentialField,
)
from services.sealed import OpenedSet
from services.storage.backends.sqlite.base import IDLE as sqlite_idle_connections
from tests.support.helpers import agent_token, creds, marked, put_agent, read


@pytest.fixture
def secrets_everywhere(alice_api, bob_api, provider_server, caplog):
    """Drive every operation with marked secrets, collecting every response and log record."""
    caplog.set_level(logging.DEBUG)
    values = [marked(f"v{i}") for i in range(8)]
    responses = [
        alice_api.store("github", creds(api_key=values[0])),
        alice_api.store("custom", creds(api_key=values[1], client_secret=values[2])),
        alice_api.store("custom", creds(api_key=values[3])),  # a replacement
        bob_api.store("slack", creds(access_token=values[4], refresh_token=values[5])),
        alice_api.test("github", creds(api_key=values[6])),
        alice_api.test("github", creds(api_key=values[6], extra=values[7])),  # 400
        alice_api.raw("PUT", "/api/v1/services/credentials", f'{{"x": "{values[7]}"'),  # 400
        alice_api.list(),
        bob_api.list(),
        alice_api.delete("custom"),
    ]
    provider_server.answer(401, {"echo": values[6]})
    responses.append(alice_api.test("github", creds(api_key=values[6])))
    return {"values": values, "responses": responses, "caplog": caplog}


@pytest.mark.django_db
def test_no_secret_in_any_response(secrets_everywhere, alice_api, bob_api):
    tokens_used = [alice_api.token, bob_api.token]
    for response in secrets_everywhere["responses"]:
        text = response.content.decode("utf-8", "replace") + str(response.headers)
        for value in secrets_everywhere["values"] + tokens_used:
            assert value not in text


@pytest.mark.django_db
def test_no_secret_in_any_log_record(secrets_everywhere, alice_api, bob_api):
    caplog = secrets_everywhere["caplog"]
    records = caplog.get_records("setup") + caplog.get_records("call")
    assert len(records) >= len(secrets_everywhere["responses"]), "expected an access line each"
    formatter = logging.getLogger().handlers[0].formatter or logging.Formatter()
    text = "\n".join(formatter.format(record) for record in records)
    for value in secrets_everywhere["values"] + [alice_api.token, bob_api.token]:
        assert value not in text
    assert "Authorization" not in text


@pytest.mark.django_db
def test_no_secret_or_token_in_any_table(secrets_everywhere, alice_api, bob_api):
    needles = secrets_everywhere["values"] + [alice_api.token, bob_api.token]
    rows_seen = 0
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            for row in cursor.fetchall():
                rows_seen += 1
                for cell in row:
                    raw = (
                        bytes(cell) if isinstance(cell, (bytes, memoryview)) else str(cell).encode()
                    )
                    for needle in needles:
                        assert needle.encode() not in raw, table
    assert rows_seen > 0
    assert CredentialField.objects.count() >= 3


@pytest.mark.django_db(transaction=True)
def test_no_secret_in_the_sqlite_files(alice_api):
    if connection.vendor != "sqlite":
        pytest.skip("the file check applies to SQLite; the table dump covers PostgreSQL")
    value = marked("file")
    alice_api.store("custom", creds(api_key=value))
    base = Path(connection.settings_dict["NAME"])
    # Opening and closing the file outside SQLite lets go of every POSIX lock this process's
    # SQLite connections hold on it (SQLite's documented caveat), after which another process
    # may reset the WAL under them: every connection of this process is closed first.
    connection.close()
    sqlite_idle_connections.close_all()
    files = [p for p in (base, Path(f"{base}-wal")) if p.exists()]
    assert files
    for path in files:
        assert value.encode() not in path.read_bytes()
        assert alice_api.token.encode() not in path.read_bytes()


@pytest.mark.django_db
def test_str_and_repr_of_models_hold_no_secret(secrets_everywhere, alice_api):
    objects = [
        *Account.objects.all(),
        *ApiToken.objects.all(),
        *ConnectedService.objects.all(),
        *CredentialField.objects.all(),
        *AuditEvent.objects.all(),
    ]
    assert len(objects) >= 8
    for obj in objects:
        shown = f"{obj} {obj!r}"
        for value in secrets_everywhere["values"] + [alice_api.token]:
            assert value not in shown
        if isinstance(obj, ApiToken):
            assert obj.digest not in shown
    credential = credential_set(service="custom", fields=OpenedSet([("api_key", Secret(marked()))]))
    value = credential.fields.by_name["api_key"].reveal()
    assert value not in repr(credential)
    assert repr(credential.fields) == "OpenedSet(key_names=['api_key'])"


@pytest.mark.django_db
def test_admin_pages_show_no_value_ciphertext_or_digest(secrets_everywhere, alice_api):
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(staff)
    needles = secrets_everywhere["values"] + [alice_api.token]
    needles += list(ApiToken.objects.values_list("digest", flat=True))
    for blob in CredentialField.objects.values_list("ciphertext", flat=True):
        needles += [bytes(blob).hex(), bytes(blob)[:16].hex()]
    # An agent with a grant and a token, and a read of a secret by it, so that the agent,
    # agent-token and audit pages have rows to show.
    put_agent(alice_api, "bot", ["github"])
    token = agent_token(alice_api, "bot")
    assert read(token, "github").status_code == 200
    needles += [token, *AgentToken.objects.values_list("digest", flat=True)]
    pages = []
    for model, url in (
        (Account, "services/account"),
        (ApiToken, "services/apitoken"),
        (ConnectedService, "services/connectedservice"),
        (Agent, "services/agent"),
        (AgentToken, "services/agenttoken"),
        (AuditEvent, "services/auditevent"),
    ):
        pages.append(f"/admin/{url}/")
        pages += [f"/admin/{url}/{pk}/change/" for pk in model.objects.values_list("pk", flat=True)]
    seen = 0
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        text = response.content.decode()
        seen += 1
        for needle in needles:
            assert needle not in text, page
    assert seen >= 8
    # The connected-service pages name the fields by keyName.
    service = ConnectedService.objects.get(service="github")
    page = client.get(f"/admin/services/connectedservice/{service.pk}/change/").content.decode()
    assert "api_key" in page


@pytest.mark.django_db
def test_admin_has_no_credential_field_page(db):
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/services/credentialfield/").status_code == 404


@pytest.mark.django_db
def test_admin_can_revoke_a_token(alice_api):
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(staff)
    token = ApiToken.objects.get(digest=bearer_tokens.digest(alice_api.token))
    response = client.post(
        "/admin/services/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert alice_api.list().status_code == 401
    # Audited to the account, with the staff user as the actor.
    event = AuditEvent.objects.get(action="tokens.revoke")
    assert (event.token_prefix, event.request_id, event.target) == (
        "admin",
        "admin:staff",
        token.prefix,
    )


@pytest.mark.django_db
def test_admin_deactivation_is_audited(alice_api, alice):
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(staff)
    response = client.post(
        "/admin/services/account/", {"action": "deactivate", "_selected_action": [alice.pk]}
    )
    assert response.status_code == 302
    assert alice_api.list().status_code == 401
    event = AuditEvent.objects.get(action="accounts.deactivate")
    assert (event.account_id, event.token_prefix, event.request_id) == (
        alice.pk,
        "admin",
        "admin:staff",
    )
