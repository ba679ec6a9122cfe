"""Key rotation covers every kind of sealed value: `reencrypt` re-seals each under a new data key,
`/readyz` and `manage.py check` see each sealed before data keys by a dropped ring key, and
after the old data keys are shredded and the old ring key dropped every kind still opens."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import models
from django.test import Client
from django.utils import timezone

from services.keys import data_keys
from services.models import CredentialField, DataKey, KeyCanary, OAuthClient, WebhookEndpoint
from services.sealed import KINDS
from services.webhooks.endpoints import signing_secrets
from tests.conftest import KEY_A, KEY_B
from tests.support.helpers import (
    agent_token,
    assert_problem,
    callback,
    connect,
    consent,
    creds,
    marked,
    put_agent,
    put_client,
    reseal_before_data_keys,
)

OLD = f"old:{KEY_A}"
NEW = f"new:{KEY_B}"


def sealed_models() -> set[type[models.Model]]:
    """Every model of the project that stores a ciphertext beside the id of its key."""
    found = set()
    for model in apps.get_app_config("services").get_models():
        names = {field.name for field in model._meta.get_fields()}
        binary = any(isinstance(field, models.BinaryField) for field in model._meta.get_fields())
        if binary and "key_id" in names:
            found.add(model)
    return found


# Key storage, not an account's values: the wrapped data keys, and the canary that proves at
# start-up that they unwrap.
KEY_MODELS = {DataKey, KeyCanary}


def test_every_sealed_model_is_a_registered_kind():
    assert sealed_models() >= KEY_MODELS
    assert sealed_models() - KEY_MODELS == {kind.model for kind in KINDS}
    assert {CredentialField, OAuthClient} <= sealed_models()


def sealed_key_ids() -> dict[str, set[str]]:
    return {kind.name: set(kind.model.objects.values_list("key_id", flat=True)) for kind in KINDS}


def references(*versions: int) -> set[str]:
    return {
        key.reference for key in DataKey.objects.filter(account__isnull=False, version__in=versions)
    }


@pytest.mark.django_db
def test_every_kind_rotates_and_opens_without_the_old_keys(alice_api, stand_in, settings):
    settings.CREDVAULT_ENCRYPTION_KEYS = OLD
    value = marked("api-key")
    assert alice_api.store("custom", creds(api_key=value)).status_code == 201
    assert put_client(alice_api, "github", marked("client-secret")).status_code == 201
    put_agent(alice_api, "bot", [{"service": "custom", "access": "read"}])
    token = agent_token(alice_api, "bot")
    webhook = alice_api.raw("POST", "/api/v1/webhooks", '{"url": "https://hooks.example.com/"}')
    assert webhook.status_code == 201, webhook.content
    [first] = references(1)
    assert sealed_key_ids() == {kind.name: {first} for kind in KINDS}

    out = StringIO()
    call_command("reencrypt", "--batch-size", "1", stdout=out)
    assert "3 value(s) to seal under new data keys" in out.getvalue()
    assert "done: 3 re-sealed, 0 remaining" in out.getvalue()
    [second] = references(2)
    assert sealed_key_ids() == {kind.name: {second} for kind in KINDS}

    # The ring key rotates too: the data keys are wrapped again under the new one.
    settings.CREDVAULT_ENCRYPTION_KEYS = f"{NEW},{OLD}"
    call_command("rotate_keys", stdout=StringIO())
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {"local:new"}

    # The first data key shredded, the old ring key dropped: every kind opens.
    DataKey.objects.filter(version=1, account__isnull=False).delete()
    settings.CREDVAULT_ENCRYPTION_KEYS = NEW
    data_keys.cache.clear()
    assert Client().get("/readyz").status_code == 200
    # The credential field opens: the agent reads it.
    read = Client().get("/api/v1/agent/credentials/custom", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert read.status_code == 200, read.content
    assert read.json()["credentials"] == [{"keyName": "api_key", "value": value}]
    # The OAuth client secret opens: a whole connect exchanges a code with it.
    authorize_url = connect(alice_api).json()["authorizeUrl"]
    page = callback(**consent(stand_in, authorize_url))
    assert page.status_code == 200, page.content
    assert "GitHub is connected" in page.content.decode()
    # The webhook secret opens: it is the one that signs.
    endpoint = WebhookEndpoint.objects.get(pk=webhook.json()["id"])
    opened = signing_secrets(endpoint, now=timezone.now())
    assert [secret.reveal() for secret in opened] == [webhook.json()["secret"]]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", [kind.name for kind in KINDS])
def test_readiness_and_check_see_a_kind_sealed_with_a_dropped_key(
    kind, alice_api, stand_in, settings, caplog
):
    settings.CREDVAULT_ENCRYPTION_KEYS = f"{NEW},{OLD}"
    if kind == "credential field":
        assert alice_api.store("custom", creds(api_key="v1", other="v2")).status_code == 201
        count = 2
    elif kind == "webhook secret":
        body = '{"url": "https://hooks.example.com/"}'
        assert alice_api.raw("POST", "/api/v1/webhooks", body).status_code == 201
        count = 1
    else:
        assert put_client(alice_api, "github", "secret").status_code == 201
        count = 1
    # Sealed before data keys, directly by the ring key `old`.
    [sealed] = [one for one in KINDS if one.name == kind]
    for row in sealed.model.objects.select_related(*sealed.related):
        reseal_before_data_keys(sealed, row, key=KEY_A, key_id="old")

    from django.core.checks import run_checks

    def sealed_with_missing_keys() -> list[str]:
        found = run_checks(databases=["default"])
        return [error.msg for error in found if error.id == "credvault.E016"]

    # While the ring holds `old`, all is well.
    assert Client().get("/readyz").status_code == 200
    assert sealed_with_missing_keys() == []

    settings.CREDVAULT_ENCRYPTION_KEYS = NEW
    assert_problem(Client().get("/readyz"), 503, "service_unavailable")
    assert f"{count} {kind} value(s) sealed with key ids not in the key ring: old" in caplog.text
    assert sealed_with_missing_keys() == [
        f"{count} {kind} value(s) are sealed with key id(s) not in CREDVAULT_ENCRYPTION_KEYS: old."
    ]


@pytest.mark.django_db
def test_the_check_is_quiet_when_every_value_opens(alice_api, stand_in, settings):
    assert alice_api.store("custom", creds(api_key="v")).status_code == 201
    assert put_client(alice_api, "github", "secret").status_code == 201
    from django.core.checks import run_checks

    assert not [e for e in run_checks(databases=["default"]) if e.id == "credvault.E016"]
    assert json.loads(Client().get("/readyz").content) == {"status": "ready"}
