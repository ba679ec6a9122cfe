"""What docs/api.md and `.env.example` promise about the API and the server, held to what the
server does: the list's members, the OpenAPI tags, the worker class."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from tests.support.harness import BASE_DIR
from tests.support.helpers import creds

API_DOC = (BASE_DIR / "docs" / "api.md").read_text(encoding="utf-8")


def documented_members(operation: str) -> set[str]:
    """The members of `[{a, b, ...}]` in docs/api.md's table row of `operation`."""
    row = next(line for line in API_DOC.splitlines() if line.startswith(f"| `{operation}` |"))
    members = re.search(r"`\[\{([^}]*)\}\]`", row)
    assert members, row
    return {member.strip() for member in members.group(1).split(",")}


@pytest.mark.django_db
def test_the_service_list_has_the_members_the_docs_name(alice_api):
    assert alice_api.store("custom", creds(api_key="v")).status_code == 201
    [entry] = alice_api.list().json()
    assert documented_members("GET /api/v1/services") == set(entry)


def test_the_docs_name_every_openapi_tag():
    schema = json.loads(Client().get("/api/v1/schema", {"format": "json"}).content)
    served = {
        tag for path in schema["paths"].values() for op in path.values() for tag in op["tags"]
    }
    listed = re.search(r"operations are tagged by resource\s*\(([^)]*)\)", API_DOC)
    assert listed
    assert set(re.findall(r"`([a-z-]+)`", listed.group(1))) == served


def test_env_example_names_the_worker_class_gunicorn_runs():
    config = (BASE_DIR / "gunicorn.conf.py").read_text(encoding="utf-8")
    worker_class = re.search(r'^worker_class = "(\w+)"', config, re.M).group(1)
    example = (BASE_DIR / ".env.example").read_text(encoding="utf-8")
    comment = example[: example.index("WEB_CONCURRENCY=")].rsplit("\n\n", 1)[-1]
    assert f"{worker_class} workers" in comment
    assert "sync workers" not in example


def test_every_inspector_command_in_the_docs_is_pinned_to_the_tested_major():
    """An unpinned `npx @modelcontextprotocol/inspector` runs whatever npx has cached (a cached
    0.15 fails against credvault); the docs pin the major that
    tests/services/mcp/test_mcp_clients.py installs and drives."""
    tested = (BASE_DIR / "tests" / "services" / "mcp" / "test_mcp_clients.py").read_text(
        encoding="utf-8"
    )
    major = re.search(r'"@modelcontextprotocol/inspector@\^(\d+)\.', tested).group(1)
    documents = [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").glob("*.md"))]
    commands = [
        (document.name, line)
        for document in documents
        for line in document.read_text(encoding="utf-8").splitlines()
        if re.search(r"\bnpx\b.*@modelcontextprotocol/inspector", line)
    ]
    assert commands
    for name, line in commands:
        assert re.search(rf"@modelcontextprotocol/inspector@{major}(\s|$)", line), (name, line)


def test_security_md_names_every_make_target_that_ci_runs_with_its_duration():
    """docs/security.md's account of `.ci/run` once said it ran four proofs, beside a CI that
    ran the suite twice, the slow clients and the deploy checks too."""
    ci = (BASE_DIR / ".ci" / "run").read_text(encoding="utf-8")
    security = (BASE_DIR / "docs" / "security.md").read_text(encoding="utf-8")
    account = re.search(r"^- `bash \.ci/run` (.*?)(?=^- |\Z)", security, re.M | re.S).group(1)
    account = " ".join(account.split())
    run = set(re.findall(r"^make ([\w-]+)", ci, re.M))
    assert run == set(re.findall(r"`make ([\w-]+)`", account)) - {"bench"}
    assert "not `make bench`" in account
    soak = re.search(r"^make soak SOAK_SECONDS=(\d+)$", ci, re.M).group(1)
    assert f"`make soak` for {soak} seconds" in account
    [slow] = set(re.findall(r"^make slow-clients SLOW_SECONDS=(\d+)", ci, re.M))
    assert f"`make slow-clients` for {slow} seconds each way" in account
    for step in ("pytest", "makemigrations --check", "check --deploy"):
        assert step in ci
    assert "makemigrations --check" in account
    assert "check --deploy" in account
