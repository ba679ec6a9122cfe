"""`create_agent`'s grants that expire and ask: `--expires-at` and `--approve`, stored as the
account API stores them, and a one-line error for each bad value."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from services.models import Grant


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
class TestCreateAgentOptions:
    def test_expiry_and_rules_are_stored_and_said(self, alice):
        out = run(
            "create_agent",
            "alice",
            "bot",
            "--service",
            "github",
            "--expires-at",
            "2999-01-01T10:00:00+02:00",
            "--approve",
            "DELETE,POST:/repos,/orgs",
            "--approve",
            "*:/user/keys",
            "--approve",
            "*",
        )
        assert out.strip() == (
            "created agent bot of alice: github (proxy, all methods, /, until "
            "2999-01-01T08:00:00.000000Z, approve POST,DELETE:/orgs,/repos *:/user/keys *)"
        )
        grant = Grant.objects.get()
        assert grant.expires_at.isoformat() == "2999-01-01T08:00:00+00:00"
        assert grant.approve == [
            {"methods": ["POST", "DELETE"], "paths": ["/orgs", "/repos"]},
            {"paths": ["/user/keys"]},
            {},
        ]

    def test_a_rule_of_methods_alone_covers_every_path(self, alice):
        run("create_agent", "alice", "bot", "--service", "github", "--approve", "POST")
        assert Grant.objects.get().approve == [{"methods": ["POST"]}]

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--expires-at", "tomorrow"], "argument --expires-at: 'tomorrow': An RFC 3339"),
            (["--expires-at", "2020-01-01T00:00:00Z"], "--expires-at 2020-01-01T00:00:00.000000Z:"),
            (["--approve", "FETCH:/x"], "argument --approve: 'FETCH:/x': One of the grant's"),
            (["--approve", "POST:repos"], "argument --approve: 'POST:repos': A path prefix"),
            (["--approve", "POST:"], "argument --approve: 'POST:': A path prefix"),
            (["--method", "GET", "--approve", "POST"], "--approve 'POST': One of the grant's"),
            (["--approve", "*"] * 11, "--approve: at most 10 rules"),
        ],
    )
    def test_each_bad_value_is_one_line(self, alice, args, message):
        with pytest.raises(CommandError) as refused:
            run("create_agent", "alice", "bot", "--service", "github", *args)
        assert message in str(refused.value)
        assert "\n" not in str(refused.value)
        assert not Grant.objects.exists()
