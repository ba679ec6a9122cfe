"""The doors of identifiers (`services/identifiers.py`): service identifiers, agent names and
account names are normalized there by the one rule, each refused with its own error."""

from __future__ import annotations

import pytest

from providers.identifiers import SERVICE_RULE
from services import accounts, identifiers
from services.exceptions import AccountError, InvalidAgentName, InvalidService
from services.models import Account


def test_the_three_names_follow_the_one_rule():
    for door in (identifiers.service_identifier, identifiers.agent_name, identifiers.account_name):
        assert door("  Acme_Corp ") == "acme-corp"


def test_each_name_is_refused_with_its_own_error():
    with pytest.raises(InvalidService):
        identifiers.service_identifier("../etc")
    with pytest.raises(InvalidAgentName):
        identifiers.agent_name("../etc")
    with pytest.raises(AccountError) as refused:
        identifiers.account_name("../etc")
    assert str(refused.value) == f"an account name is {SERVICE_RULE}"
    assert accounts.AccountError is AccountError


@pytest.mark.django_db
def test_the_account_functions_take_their_names_through_the_door(monkeypatch):
    seen = []
    account_name = identifiers.account_name
    monkeypatch.setattr(accounts, "account_name", lambda raw: seen.append(raw) or account_name(raw))
    assert accounts.create_account(name=" Acme_Corp ").name == "acme-corp"
    assert accounts.get_account(name="ACME corp") == Account.objects.get(name="acme-corp")
    assert seen == [" Acme_Corp ", "ACME corp"]
    with pytest.raises(AccountError, match="an account name is"):
        accounts.create_account(name="")
