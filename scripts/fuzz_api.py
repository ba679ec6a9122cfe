"""Fuzz the live API with schemathesis: `python -m scripts.fuzz_api [--max-examples N]`.

Starts a throwaway credvault (its own SQLite file, gunicorn on a free loopback port, a fake
provider on 127.0.0.1 that every catalog entry points to), seeds an account whose stored
values, OAuth client secret and tokens are marked, and runs schemathesis over every operation
of the OpenAPI document with `schemathesis.toml`: each operation with the token of its security
scheme (the account operations with an account token, the agent read with an agent token), in
the examples, coverage, fuzzing and stateful phases, every check on (no server error; status
codes, content types, headers and bodies as the schema says; valid data accepted and invalid
data refused; no request accepted without its token; no marked secret in any response,
`fuzz_hooks`). Prints the number of generated cases; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.harness import BASE_DIR, Gunicorn, every_provider_at, server_env
from tests.support.stand_ins import ProviderServer

WORK = BASE_DIR / "var" / "fuzz"
CONFIG = BASE_DIR / "schemathesis.toml"
AGENT_READ = "agent_read_credentials"
# The agent API's operations: the read, the access requests and the brokered calls (to the
# fake provider).
AGENT_OPERATIONS = [
    AGENT_READ,
    "agent_request_access",
    "agent_read_access_request",
    *(f"agent_proxy_{method}" for method in ("get", "post", "put", "patch", "delete")),
]


def seed(env: dict[str, str]) -> dict:
    """Migrate the throwaway database and store marked values; returns what the hooks need."""
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "credvault.settings"
    import django

    django.setup()
    from django.core.management import call_command

    from services import agents, credentials
    from services.accounts import create_account, issue_token
    from services.audit import Actor
    from services.grants import GrantSpec, given_in_list
    from services.masking import Secret
    from services.oauth.clients import put_client
    from services.sealed import OpenedSet

    call_command("migrate", verbosity=0)
    account = create_account(name="fuzz")
    token = issue_token(account=account, name="fuzz").plaintext
    actor = Actor.command(account.pk)
    values: dict[str, list[str]] = {}
    for service, names in {
        "github": ["api_key"],
        "slack": ["access_token", "refresh_token"],
        "custom": ["api_key", "client_secret"],
    }.items():
        fields = OpenedSet((name, Secret(f"FUZZ-MARKED-{service}-{name}-x9q")) for name in names)
        values[service] = [value.reveal() for _, value in fields]
        checked = credentials.credential_set(service=service, fields=fields)
        credentials.store_credentials(actor=actor, credentials=checked)
    agents.put_agent(
        actor=actor,
        name="fuzzer",
        services=given_in_list(GrantSpec(s, access="read") for s in ("github", "custom", "openai")),
    )
    agent_token = agents.issue_agent_token(actor=actor, name="fuzzer").issued
    client_secret = Secret("FUZZ-MARKED-oauth-client-secret-x9q")
    values["oauth-client"] = [client_secret.reveal()]
    put_client(actor=actor, provider="github", client_id="fuzz-client", client_secret=client_secret)
    return {
        "token": token,
        "agent_token": agent_token.plaintext,
        # The display prefix that names the token in the agent API: `cva_` and 8 characters.
        "agent_prefix": agent_token.plaintext[:12],
        "values": values,
    }


def schemathesis(
    label: str, url: str, operations: list[str], args: argparse.Namespace
) -> tuple[int, int]:
    """Run schemathesis over `operations` (+id: only those, -id: all but those); (exit code,
    number of generated cases). The tokens come from the environment, through the config."""
    report = WORK / f"report-{label}.ndjson"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/api/v1/schema?format=json",
        "--max-examples",
        str(args.max_examples),
        "--seed",
        str(args.seed),
        "--phases",
        "examples,coverage,fuzzing,stateful",
        # One worker: on CPython 3.11, hypothesis describing lambdas from several threads at
        # once trips `ast.parse` ("AST constructor recursion depth mismatch"), a tool error.
        "--workers",
        "1",
        "--request-timeout",
        "15",
        "--no-color",
        "--output-sanitize",
        "true",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
        "--generation-database",
        "none",
    ]
    for operation in operations:
        flag = "--include-operation-id" if operation.startswith("+") else "--exclude-operation-id"
        command += [flag, operation.lstrip("+-")]
    env = dict(os.environ)
    env.update(
        {
            "SCHEMATHESIS_HOOKS": "scripts.fuzz_hooks",
            "PYTHONPATH": str(BASE_DIR),
        }
    )
    result = subprocess.run(
        command, cwd=BASE_DIR, env=env, check=False, capture_output=True, text=True
    )
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode, generated_cases(result.stdout)


def generated_cases(output: str) -> int:
    """The number schemathesis reports in its summary: `Test cases: N generated, ...`."""
    match = re.search(r"Test cases:\s*(\d+) generated", output)
    return int(match.group(1)) if match else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261121)
    args = parser.parse_args()

    WORK.mkdir(parents=True, exist_ok=True)
    database = WORK / "fuzz.sqlite3"
    for path in WORK.glob("fuzz.sqlite3*"):
        path.unlink()
    provider = ProviderServer().start()
    provider.answer(
        200,
        {
            "ok": True,
            "success": True,
            "valid": True,
            "data": {"viewer": {"id": "1"}, "me": {"id": "1"}},
        },
    )
    env = server_env(
        f"sqlite:///{database}",
        CREDVAULT_PROVIDER_BASE_URLS=every_provider_at(provider.url),
        CREDVAULT_RATE_LIMIT="1000000/min",
        CREDVAULT_TEST_RATE_LIMIT="1000000/min",
        CREDVAULT_VERIFY_TIMEOUT="3",
    )
    seeded = seed(env)
    secrets_file = WORK / "secrets.json"
    secrets_file.write_text(
        json.dumps(
            {
                "values": seeded["values"],
                "tokens": [seeded["token"], seeded["agent_token"]],
            }
        )
    )
    os.environ["CREDVAULT_FUZZ_SECRETS"] = str(secrets_file)
    os.environ["CREDVAULT_FUZZ_ACCOUNT_TOKEN"] = seeded["token"]
    os.environ["CREDVAULT_FUZZ_AGENT_TOKEN"] = seeded["agent_token"]
    os.environ["CREDVAULT_FUZZ_AGENT_PREFIX"] = seeded["agent_prefix"]
    try:
        with Gunicorn(env, workers=2, log=WORK / "gunicorn.log") as server:
            # The agent API first: the account run deletes agents (and so their tokens).
            agent_code, agent_cases = schemathesis(
                "agent", server.url, [f"+{op}" for op in AGENT_OPERATIONS], args
            )
            account_code, account_cases = schemathesis(
                "account", server.url, [f"-{op}" for op in AGENT_OPERATIONS], args
            )
    finally:
        provider.stop()
    cases = account_cases + agent_cases
    print(
        f"fuzz: {cases} generated cases ({account_cases} account API, {agent_cases} agent API), "
        f"{len(provider.requests)} calls to the fake provider (verification and brokered), "
        f"exit codes {account_code} and {agent_code}"
    )
    return 0 if account_code == 0 and agent_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
