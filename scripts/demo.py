"""`make demo`: an agent calls GitHub through credvault, offline, in five steps.

Starts a stand-in of GitHub's `/user` on 127.0.0.1 (tests/support/stand_ins.py, GitHubStandIn: it
accepts one demo key and echoes the token it was called with) and a throwaway credvault under
gunicorn (its own SQLite file and log in a temporary directory, a free loopback port), with the
catalog's GitHub pointed at the stand-in by CREDVAULT_PROVIDER_BASE_URLS. Then it walks,
printing each request as a curl line and each answer:

1. store a GitHub key (the account's token),
2. create an agent with the default, brokered grant on `github`,
3. issue the agent a token,
4. the agent calls `GET /user` through credvault's proxy: the stand-in's answer comes back with
   the key it echoed replaced by `[REDACTED]`,
5. the audit event of that call.

Tokens and the key are shown as shell variables, never their values. Exits non-zero, naming
the step, when an answer is not the expected one or when the key or a token was printed, with
the end of the server's log.

It leaves nothing behind: the temporary directory goes when the demo ends, however it ends
(an error, Ctrl-C). What earlier versions kept in var/demo is removed.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.harness import (
    BASE_DIR,
    Gunicorn,
    migrated_account,
    request,
    server_env,
)
from tests.support.stand_ins import GitHubStandIn

# Where earlier versions kept the demo's database and a log that grew with every run.
EARLIER_WORK = BASE_DIR / "var" / "demo"


class DemoFailed(Exception):
    pass


class Walk:
    """Prints each request as a curl line (tokens and the key as shell variables) and its
    answer, and keeps every value that must never be printed."""

    def __init__(self, url: str, hidden: dict[str, str]) -> None:
        self.url = url
        self.hidden = hidden  # value -> the shell variable shown in its place
        self.printed: list[str] = []

    def show(self, text: str) -> None:
        for value, name in self.hidden.items():
            text = text.replace(value, name)
        self.printed.append(text)
        print(text)

    def call(
        self,
        step: str,
        method: str,
        path: str,
        *,
        token: str,
        expect: int,
        body: Any = None,
        issues: str = "",
    ) -> Any:
        """One request and its answer, printed; `issues` names the shell variable shown in
        place of the token the answer holds."""
        shown = f"curl -s -X {method} '{self.url}{path}' -H 'Authorization: Bearer {token}'"
        if body is not None:
            shown += f" \\\n  -H 'Content-Type: application/json' -d '{json.dumps(body)}'"
        self.show(f"\n{step}\n$ {shown}")
        status, _, content = request(method, f"{self.url}{path}", token=token, body=body)
        answer = json.loads(content) if content else None
        if issues and status == expect:
            self.hidden[answer["token"]] = issues
        self.show(f"{status} {json.dumps(answer)}")
        if status != expect:
            raise DemoFailed(f"{step}: answered {status}, not {expect}")
        return answer


def walk(url: str, account_token: str, github_key: str) -> list[str]:
    w = Walk(url, {account_token: "$TOKEN", github_key: "$GITHUB_KEY"})
    credentials = [{"keyName": "api_key", "value": github_key}]
    w.call(
        "1. Store the account's GitHub key (a key the stand-in accepts):",
        "PUT",
        "/api/v1/services/credentials",
        token=account_token,
        expect=201,
        body={"service": "github", "credentials": credentials},
    )
    w.call(
        "2. Create an agent with the default grant on github: brokered calls, no plaintext:",
        "PUT",
        "/api/v1/agents/demo-agent",
        token=account_token,
        expect=201,
        body={"services": ["github"]},
    )
    issued = w.call(
        "3. Issue the agent its token (this answer is the only one that holds it):",
        "POST",
        "/api/v1/agents/demo-agent/tokens",
        token=account_token,
        expect=201,
        body={},
        issues="$AGENT_TOKEN",
    )
    user = w.call(
        "4. The agent calls GitHub's /user through credvault; credvault adds the key on the way "
        "out,\n   and the key GitHub echoed comes back redacted:",
        "GET",
        "/api/v1/agent/proxy/github/user",
        token=issued["token"],
        expect=200,
    )
    if user.get("seen_token") != "[REDACTED]":
        raise DemoFailed("4. the echoed key was not redacted")
    events = w.call(
        "5. The audit event of that call (the account's newest):",
        "GET",
        "/api/v1/audit-events?limit=1",
        token=account_token,
        expect=200,
    )
    [event] = events["events"]
    if event["action"] != "agent.proxy" or event["agent"] != "demo-agent":
        raise DemoFailed("5. the newest event is not the agent's brokered call")
    w.show(
        "\nThe agent called GitHub and never held the key. Next: docs/agents.md, 'Agents' and "
        "'Brokered access'."
    )
    for value in (account_token, github_key, issued["token"]):
        if any(value in line for line in w.printed):
            raise DemoFailed("a secret was printed")
    return w.printed


def remove_earlier_work() -> None:
    for path in [*EARLIER_WORK.glob("demo.sqlite3*"), EARLIER_WORK / "gunicorn.log"]:
        path.unlink(missing_ok=True)
    if EARLIER_WORK.is_dir() and not any(EARLIER_WORK.iterdir()):
        EARLIER_WORK.rmdir()


def main() -> int:
    remove_earlier_work()
    github_key = f"ghp_demo{secrets.token_hex(16)}"
    with tempfile.TemporaryDirectory(prefix="credvault-demo-") as work:
        log = Path(work) / "gunicorn.log"
        try:
            with GitHubStandIn({github_key}) as github:
                env = server_env(
                    f"sqlite:///{Path(work) / 'demo.sqlite3'}",
                    CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": github.url}),
                )
                account_token = migrated_account(env, "demo")
                print(
                    f"credvault: a throwaway server with the account 'demo'; GitHub: {github.url}"
                )
                with Gunicorn(env, workers=1, log=log) as server:
                    walk(server.url, account_token, github_key)
        except (DemoFailed, RuntimeError) as exc:  # a step, or the server's start
            print(f"make demo: {exc}", file=sys.stderr)
            if log.exists():
                # The log goes with the directory: its end, which says why, stays on screen.
                print("The server's log ended with:", file=sys.stderr)
                print("\n".join(log.read_text().splitlines()[-20:]), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
