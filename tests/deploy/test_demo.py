"""`make demo` walks an agent's brokered call to a stand-in GitHub in five steps, offline, and
`make run`'s set-up says where to go next."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.support.harness import BASE_DIR

# Other tests write under var/ too (screenshots, the MCP Inspector): one worker runs them and
# this one in turn, so that what appears there during the demo is the demo's.
pytestmark = pytest.mark.xdist_group("var")

TOKEN = re.compile(r"cv[ta]_[0-9A-Za-z]{46}")


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*")} if folder.exists() else set()


def test_the_demo_shows_the_call_redacted_and_audited(tmp_path):
    # What an earlier version left behind, which the demo removes.
    earlier = BASE_DIR / "var" / "demo"
    earlier.mkdir(parents=True, exist_ok=True)
    (earlier / "gunicorn.log").write_text("an earlier run's log\n")
    (earlier / "demo.sqlite3").write_bytes(b"")
    var_before = files_under(BASE_DIR / "var") - files_under(earlier) - {earlier}
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "scripts.demo"],
        cwd=BASE_DIR,
        env={**os.environ, "TMPDIR": str(temporary)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # It leaves nothing behind: not its temporary directory, nothing under var/.
    assert list(temporary.iterdir()) == []
    assert not earlier.exists()
    assert files_under(BASE_DIR / "var") == var_before
    out = result.stdout
    for step in range(1, 6):
        assert f"\n{step}. " in out
    assert "/api/v1/agent/proxy/github/user' -H 'Authorization: Bearer $AGENT_TOKEN'" in out
    assert '200 {"login": "octocat", "id": 1, "type": "User", "seen_token": "[REDACTED]"}' in out
    assert '"action": "agent.proxy"' in out
    assert '"upstreamStatus": 200' in out
    # Neither the key nor any token is printed: they are shown as shell variables.
    assert "ghp_demo" not in out + result.stderr
    assert not TOKEN.search(out + result.stderr)
    assert "$GITHUB_KEY" in out


@pytest.mark.django_db
@pytest.mark.parametrize("runs", [1, 2])
def test_make_runs_set_up_says_where_to_go_next(runs):
    for _ in range(runs):
        out = StringIO()
        call_command("bootstrap_demo", "--base-url", "http://127.0.0.1:8300", stdout=out)
    text = out.getvalue()
    assert text.rstrip().splitlines()[-3:] == [
        "  the API's interactive docs:  http://127.0.0.1:8300/api/docs",
        "  the walk-through:            README.md, 'From zero to an agent calling GitHub'",
        "  an agent calling a provider: make demo (offline, against a stand-in GitHub)",
    ]
