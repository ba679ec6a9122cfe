"""The token kinds are defined once (`bearer_tokens.KINDS`): the patterns that find a token in a
request's text and withhold one from a log line are built from them."""

from __future__ import annotations

import pytest

from services import bearer_tokens


def test_the_kinds_are_the_account_and_the_agent_kind():
    assert bearer_tokens.KINDS == (bearer_tokens.ACCOUNT_KIND, bearer_tokens.AGENT_KIND)


@pytest.mark.parametrize("kind", bearer_tokens.KINDS)
def test_every_kind_is_found_and_withheld(kind: str):
    token = bearer_tokens.generate(kind).plaintext
    assert bearer_tokens.carries_token(f"x={token}&y=1")
    assert bearer_tokens.carries_token(f"x={token.replace('_', '%255F')}")
    assert (
        bearer_tokens.withheld(f"sent {token} twice: {token}")
        == f"sent {kind}_... twice: {kind}_..."
    )


def test_a_token_of_another_kind_is_neither_found_nor_withheld():
    body = bearer_tokens.generate().plaintext.partition("_")[2]
    other = f"cvx_{body}"
    assert not bearer_tokens.carries_token(other)
    assert bearer_tokens.withheld(other) == other
