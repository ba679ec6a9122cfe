"""The fuzzer's own checks: a check that cannot fail would prove nothing."""

from __future__ import annotations

import importlib
import json
import sys
from types import SimpleNamespace

import pytest

from scripts.client_walk import same
from scripts.fuzz_api import generated_cases


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    seeded = {"values": {"github": ["GH-MARKED"], "slack": ["SL-MARKED"]}, "tokens": ["cvt_TOKEN"]}
    path = tmp_path / "secrets.json"
    path.write_text(json.dumps(seeded))
    monkeypatch.setenv("CREDVAULT_FUZZ_SECRETS", str(path))
    pytest.importorskip("schemathesis")
    sys.modules.pop("scripts.fuzz_hooks", None)
    return importlib.import_module("scripts.fuzz_hooks")


def response(body: object, status: int = 200, headers: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        content=json.dumps(body).encode(), status_code=status, headers=headers or {}
    )


def case(path: str) -> SimpleNamespace:
    return SimpleNamespace(path=path)


def test_a_marked_value_in_an_account_response_fails(hooks):
    with pytest.raises(AssertionError, match="1 marked secret"):
        hooks.no_marked_secret(None, response({"x": "GH-MARKED"}), case("/api/v1/services"))


def test_a_seeded_token_anywhere_fails(hooks):
    with pytest.raises(AssertionError):
        hooks.no_marked_secret(
            None, response({}, headers={"X": "cvt_TOKEN"}), case("/api/v1/services")
        )


def test_the_agent_read_may_return_its_own_service_only(hooks):
    path = "/api/v1/agent/credentials/{service}"
    own = {"service": "github", "credentials": [{"keyName": "api_key", "value": "GH-MARKED"}]}
    hooks.no_marked_secret(None, response(own), case(path))
    other = {"service": "github", "credentials": [{"keyName": "api_key", "value": "SL-MARKED"}]}
    with pytest.raises(AssertionError):
        hooks.no_marked_secret(None, response(other), case(path))


def test_clean_responses_pass(hooks):
    assert hooks.no_marked_secret(None, response({"ok": True}), case("/api/v1/services")) is None


def test_the_case_count_is_read_from_the_summary():
    assert generated_cases("Test cases:\n  1273 generated, 1273 passed, 20 skipped\n") == 1273
    assert generated_cases("no summary") == 0


def test_the_client_walk_sees_a_member_the_model_drops():
    sent = {"events": [{"seq": 2, "time": "2026-11-21T09:30:12.345678Z", "extra": 1}]}
    held = {"events": [{"seq": 2, "time": "2026-11-21T09:30:12.345678+00:00"}]}
    assert not same(sent, held)
    del sent["events"][0]["extra"]
    assert same(sent, held)
    assert not same({"time": "2026-11-21T09:30:12Z"}, {"time": "2026-11-21T09:30:13+00:00"})
    assert not same({"code": "a"}, {"code": "b"})
