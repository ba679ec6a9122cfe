"""The README's curl lines, run in order with the real curl against a live server, as a
newcomer pastes them: from "Walk-through with curl" to the security model, each answers a 2xx
status unless its line ends with a comment naming the status it documents (`# 403`). The agent
token is the one the README's own `POST .../tokens` issued, so a walk that kills its agent
before using it fails here.

The catalog's providers all point at a stand-in of GitHub on 127.0.0.1 that accepts the
README's `ghp_example` (scripts/harness.py); no real provider is called."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from scripts.harness import (
    BASE_DIR,
    GitHubStandIn,
    Gunicorn,
    every_provider_at,
    migrated_account,
    server_env,
)

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

README = BASE_DIR / "README.md"
FIRST, LAST = "## Walk-through with curl", "## Security model"
DOCUMENTED_URL = "http://127.0.0.1:8000"
STATUS_COMMENT = re.compile(r"\s+#\s*([1-5][0-9][0-9])\s*$")


def walk_commands(text: str) -> list[tuple[str, int | None]]:
    """Each curl command of the walk's shell blocks, continuation lines joined, with the status
    its closing comment documents (None: any 2xx)."""
    part = text[text.index(FIRST) : text.index(LAST)]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", part, re.S):
        for command in re.sub(r"\\\n\s*", " ", block).splitlines():
            if not command.startswith("curl "):
                continue
            documented = STATUS_COMMENT.search(command)
            if documented:
                command = command[: documented.start()]
            commands.append((command, int(documented.group(1)) if documented else None))
    return commands


def test_the_walk_is_read_whole():
    commands = walk_commands(README.read_text(encoding="utf-8"))
    assert len(commands) >= 25
    assert sum(1 for _, status in commands if status is not None) >= 5
    assert any("/api/v1/agent/proxy/github/user" in command for command, _ in commands)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("readme-walk")
    with GitHubStandIn({"ghp_example"}) as github:
        env = server_env(
            f"sqlite:///{work / 'walk.sqlite3'}",
            CREDVAULT_PROVIDER_BASE_URLS=every_provider_at(github.url),
        )
        token = migrated_account(env, "demo")
        with Gunicorn(env, workers=1, log=work / "gunicorn.log") as live:
            yield live.url, token


def test_every_curl_line_answers_what_the_readme_says(server):
    url, token = server
    variables = {"TOKEN": token, "AGENT_TOKEN": ""}
    answers = []
    for command, documented in walk_commands(README.read_text(encoding="utf-8")):
        run = command.replace(DOCUMENTED_URL, url) + " -w '\\n%{http_code}'"
        result = subprocess.run(
            ["bash", "-c", run],
            env={"PATH": "/usr/bin:/bin", **variables},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        body, _, code = result.stdout.rpartition("\n")
        status = int(code)
        answers.append((command, status))
        if documented is None:
            assert 200 <= status < 300, (command, status, body[-500:])
        else:
            assert status == documented, (command, status, body[-500:])
        if command.startswith("curl -s -X POST") and command.split()[4].endswith("/tokens"):
            variables["AGENT_TOKEN"] = json.loads(body)["token"]
    # The agent's brokered calls reached the stand-in with the stored key (it answers 200 to
    # no other) before its access was taken away.
    brokered = [status for command, status in answers if "/agent/proxy/github/user" in command]
    assert brokered[:3] == [200, 200, 200]
    assert brokered[-2:] == [403, 401]
