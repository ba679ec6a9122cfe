"""The curl lines of the README and of the documents it leads on to, run in order with the real
curl against a live server, as a newcomer pastes them: the README (its five steps to an agent
calling GitHub, then one curl per operation), then docs/api.md, docs/agents.md and
docs/oauth.md. Each answers a 2xx status unless its line ends with a comment naming the status
it documents (`# 403`).

A token is the one the walk's own `POST .../tokens` issued, given to the shell variable that
the next `export NAME=cva_...` line names, as a reader does; likewise `export NAME=wh_...`
takes the id of the latest `POST .../webhooks`, and `export NAME=evt_...` the event id of the
latest webhook test. The README's agent, report-bot,
goes on through docs/agents.md with a token issued there, so a walk that kills it before its
last brokered call fails here.

The catalog's providers all point at a stand-in of GitHub on 127.0.0.1 that accepts the
walk's `ghp_example` (tests/support/stand_ins.py); no real provider is called."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest
from django.test import Client

from tests.support.harness import (
    BASE_DIR,
    Gunicorn,
    every_provider_at,
    migrated_account,
    server_env,
)
from tests.support.stand_ins import GitHubStandIn

# slow: the documents' curl lines against a live server.
pytestmark = pytest.mark.slow

README = BASE_DIR / "README.md"
# The reading order: the README first, then the documents whose curl lines go on from it.
WALK = [README, *(BASE_DIR / "docs" / name for name in ("api.md", "agents.md", "oauth.md"))]
# The README's list of every operation, each once.
OPERATIONS_SECTION = "## The API, one curl per operation"
DOCUMENTED_URL = "http://127.0.0.1:8000"
STATUS_COMMENT = re.compile(r"\s+#\s*([1-5][0-9][0-9])\s*$")
EXPORT = re.compile(r"^export (\w+)=(cva|wh|evt)_\.\.\.")
ISSUE = re.compile(r"-X POST \S+/tokens(\s|$)")
# What an `export NAME=PREFIX_...` line takes: the member of the answer of the latest line
# that matches.
CREATED = {
    "wh": (re.compile(r"-X POST \S+/webhooks(\s|$)"), "id"),
    "evt": (re.compile(r"-X POST .*/webhooks/\S+/test(\s|$)"), "eventId"),
}


@dataclass(frozen=True)
class Step:
    document: str
    command: str  # a curl line, or the variable an `export NAME=cva_...` line names
    documented: int | None = None  # the status its closing comment names; None: any 2xx
    export: bool = False
    prefix: str = "cva"  # of what an export line takes: a token, a webhook's id, an event's


def shell_lines(markdown: str) -> list[str]:
    """Each line of the sh blocks, continuation lines joined."""
    return [
        line
        for block in re.findall(r"```sh\n(.*?)```", markdown, re.S)
        for line in re.sub(r" *\\\n\s*", " ", block).splitlines()
    ]


def walk_steps(markdown: str, document: str = "README.md") -> list[Step]:
    steps = []
    for line in shell_lines(markdown):
        if exported := EXPORT.match(line):
            steps.append(Step(document, exported.group(1), export=True, prefix=exported.group(2)))
        elif line.startswith("curl "):
            documented = STATUS_COMMENT.search(line)
            if documented:
                steps.append(Step(document, line[: documented.start()], int(documented.group(1))))
            else:
                steps.append(Step(document, line))
    return steps


# The lists whose samples show exactly what a reader who walked this far gets.
SAMPLED = re.compile(r"/api/v1/(audit-events\?limit=\d+|services)\"?$")
# What differs on each run: moments and request ids; of a token's prefix, its random part.
VOLATILE = {"time", "connectedAt", "requestId"}


def answer_samples(markdown: str) -> dict[str, object]:
    """Each sampled list's curl line that ends an sh block, and the JSON sample of the block
    right after it."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", markdown, re.S)
    samples = {}
    for (language, text), (next_language, sample) in itertools.pairwise(blocks):
        lines = shell_lines(f"```{language}\n{text}```") if language == "sh" else []
        if lines and SAMPLED.search(lines[-1]) and next_language == "json":
            samples[lines[-1]] = json.loads(sample)
    return samples


def assert_the_sample_is_the_answer(sample: object, answer: object, where: str) -> None:
    """The same members in the same order with the same values, but for what differs on each
    run."""
    if isinstance(sample, dict):
        assert isinstance(answer, dict), (where, sample)
        assert list(sample) == list(answer), (where, sample)
        for member, shown in sample.items():
            if member in VOLATILE:
                assert isinstance(shown, str), (where, member)
                assert answer[member], (where, member)
            elif member == "tokenPrefix":
                assert shown[:4] == answer[member][:4], (where, member)
            else:
                assert_the_sample_is_the_answer(shown, answer[member], where)
    elif isinstance(sample, list):
        assert isinstance(answer, list), (where, sample)
        assert len(sample) == len(answer), (where, sample)
        for shown, served in zip(sample, answer, strict=True):
            assert_the_sample_is_the_answer(shown, served, where)
    else:
        assert sample == answer, (where, sample, answer)


def the_walk() -> list[Step]:
    return [
        step
        for path in WALK
        for step in walk_steps(path.read_text(encoding="utf-8"), path.relative_to(BASE_DIR).name)
    ]


def curls(steps: list[Step]) -> list[Step]:
    return [step for step in steps if not step.export]


def test_the_walk_is_read_whole():
    steps = the_walk()
    for path in WALK:
        assert curls([s for s in steps if s.document == path.name]), f"no curl line in {path}"
    assert len(curls(steps)) >= 50
    assert sum(1 for step in steps if step.documented is not None) >= 6
    readme = [step.command for step in steps if step.document == "README.md"]
    assert any("/api/v1/agent/proxy/github/user" in command for command in readme)
    assert {"AGENT_TOKEN", "CI_TOKEN"} <= {step.command for step in steps if step.export}


def test_a_walk_is_read_from_continued_lines_exports_and_comments():
    markdown = (
        "```sh\nexport TOKEN=cvt_...   # the token printed by make run\n"
        'curl -s -X POST http://h/api/v1/agents/a/tokens \\\n  -H "A: b"\n'
        "export AGENT_TOKEN=cva_...   # the token above\n"
        "curl -s http://h/api/v1/agent/credentials/github   # 403\n```\n"
        "```json\ncurl -s http://h/not-a-shell-block\n```\n"
    )
    assert walk_steps(markdown) == [
        Step("README.md", 'curl -s -X POST http://h/api/v1/agents/a/tokens -H "A: b"'),
        Step("README.md", "AGENT_TOKEN", export=True),
        Step("README.md", "curl -s http://h/api/v1/agent/credentials/github", 403),
    ]


# --- the README's list of operations ----------------------------------------------------------


def operation_of(command: str, operations: dict[tuple[str, str], re.Pattern]) -> tuple[str, str]:
    """The (METHOD, path template) of the served document that a curl line calls."""
    method = re.search(r"-X ([A-Z]+)", command)
    url = re.search(re.escape(DOCUMENTED_URL) + r"""([^\s"'?]*)""", command)
    assert url, command
    found = [
        operation
        for operation, pattern in operations.items()
        if operation[0] == (method.group(1) if method else "GET")
        and pattern.fullmatch(url.group(1))
    ]
    assert len(found) == 1, (command, found)
    return found[0]


def served_operations() -> dict[tuple[str, str], tuple[re.Pattern, str]]:
    """Each operation of the served OpenAPI document: its (METHOD, path template), a pattern
    matching its paths, and the kind of token it takes."""
    schema = json.loads(Client().get("/api/v1/schema", {"format": "json"}).content)
    served = {}
    for template, operations in schema["paths"].items():
        pattern = re.escape(template).replace(r"\{path\}", r"[^\s]*")
        pattern = re.compile(re.sub(r"\\\{\w+\\\}", r"[^/\\s]+", pattern))
        for method, operation in operations.items():
            [scheme] = operation["security"][0]
            served[(method.upper(), template)] = (pattern, scheme)
    return served


def test_the_readme_lists_each_account_operation_once():
    served = served_operations()
    patterns = {operation: pattern for operation, (pattern, _) in served.items()}
    text = README.read_text(encoding="utf-8")
    section = text[text.index(OPERATIONS_SECTION) :].split("\n## ", 1)[0]
    called = [operation_of(step.command, patterns) for step in curls(walk_steps(section))]
    account = {operation for operation, (_, scheme) in served.items() if scheme == "accountToken"}
    agent = {operation for operation, (_, scheme) in served.items() if scheme == "agentToken"}
    # Every operation of the account API, each once, and nothing else.
    assert len(called) == len(set(called))
    assert account == set(called) - agent
    # The agent's own operations too: the read, and the proxy with any of its methods.
    assert {template for _, template in agent} == {template for _, template in set(called) & agent}


# --- the walk, against a live server -----------------------------------------------------------


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


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_every_curl_line_answers_what_the_documents_say(server):
    url, token = server
    variables = {"TOKEN": token}
    issued = None  # the token the latest POST .../tokens answered with
    created: dict[str, str] = {}  # by prefix: the id the latest line of CREATED answered with
    answers = []
    samples = {
        (path.name, command): sample
        for path in WALK
        for command, sample in answer_samples(path.read_text(encoding="utf-8")).items()
    }
    assert len(samples) >= 3
    for step in the_walk():
        if step.export and step.prefix in CREATED:
            assert step.prefix in created, f"{step.document}: {step.command} before its answer"
            variables[step.command] = created[step.prefix]
            continue
        if step.export:
            assert issued, f"{step.document}: {step.command} is exported before any token"
            variables[step.command] = issued
            continue
        run = step.command.replace(DOCUMENTED_URL, url) + " -w '\\n%{http_code}'"
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
        answers.append((step.command, status))
        where = (step.document, step.command, status, body[-500:])
        if step.documented is None:
            assert 200 <= status < 300, where
        else:
            assert status == step.documented, where
        if ISSUE.search(step.command):
            issued = json.loads(body)["token"]
        for prefix, (pattern, member) in CREATED.items():
            if pattern.search(step.command):
                created[prefix] = json.loads(body)[member]
        if (step.document, step.command) in samples:
            sample = samples.pop((step.document, step.command))
            assert_the_sample_is_the_answer(sample, json.loads(body), step.command)
    assert not samples, f"samples whose curl line the walk never ran: {list(samples)}"
    # The agent's brokered calls reached the stand-in with the stored key (it answers 200 to
    # no other), in the README and through docs/agents.md, before its access was taken away.
    brokered = [status for command, status in answers if "/agent/proxy/github/user" in command]
    assert len(brokered) >= 7
    assert brokered[:-2] == [200] * (len(brokered) - 2)
    assert brokered[-2:] == [403, 401]
