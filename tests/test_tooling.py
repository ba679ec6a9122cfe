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


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1"
 failures="2" skipped="3" tests="20" time="1.0"></testsuite></testsuites>"""
FUZZ = (
    "Test cases:\n  658 generated, 658 passed\n...\n"
    "Test cases:\n  2104 generated, 2100 passed, 4 failed, 32 skipped\n"
)


def write_steps(directory, *lines: str) -> None:
    (directory / "steps").write_text("".join(f"{line}\n" for line in lines))


def test_ci_totals_add_every_steps_cases(tmp_path, capsys):
    from scripts import ci_totals

    (tmp_path / "sqlite.xml").write_text(JUNIT)
    (tmp_path / "fuzz.log").write_text(FUZZ)
    write_steps(
        tmp_path,
        "passed\tmake test (SQLite)\tsqlite.xml",
        "passed\tschemathesis\tfuzz.log",
        "passed\tmigrations\t-",
        "failed\tdeploy check\t-",
    )
    assert ci_totals.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "make test (SQLite): 14 passed, 3 failed, 3 skipped",
        "schemathesis: 2758 passed, 4 failed, 32 skipped",
    ]
    # 14 + 2758 + 1; 3 + 4 + 1: the totals alone on the last line.
    assert lines[-1] == "2773 passed, 8 failed"


def test_a_failed_step_whose_report_shows_no_failure_counts_one(tmp_path, capsys):
    """`make test` stopped by ruff before pytest ran, or pytest crashed after its report."""
    from scripts import ci_totals

    (tmp_path / "sqlite.xml").write_text(
        JUNIT.replace('errors="1"', 'errors="0"').replace('failures="2"', 'failures="0"')
    )
    write_steps(tmp_path, "failed\tmake test (SQLite)\tsqlite.xml", "failed\tlint\tmissing.xml")
    ci_totals.main([str(tmp_path)])
    assert capsys.readouterr().out.splitlines()[-1] == "17 passed, 2 failed"


def test_no_step_at_all_is_no_pass(tmp_path, capsys):
    from scripts import ci_totals

    ci_totals.main([str(tmp_path)])
    assert capsys.readouterr().out.splitlines()[-1] == "0 passed, 1 failed"


def test_ci_run_reports_every_pytest_run_and_ends_with_the_totals():
    from tests.support.harness import BASE_DIR

    script = (BASE_DIR / ".ci" / "run").read_text()
    assert 'make test-all PYTEST_ARGS="--junitxml=$CI_DIR/sqlite.xml"' in script
    assert '--junitxml="$CI_DIR/postgresql.xml"' in script
    assert 'make fuzz 2>&1 | tee "$CI_DIR/fuzz.log"' in script
    assert "trap finish EXIT" in script
    assert script.rstrip().endswith('echo "== CI passed"')
    # Every step but the last is closed before the next one begins.
    assert script.count('\nstep "') == script.count("\npassed\n")
