"""Validate the OpenAPI document a live server serves: `python -m scripts.validate_openapi`.

Starts credvault under gunicorn on a free loopback port (a throwaway SQLite file), fetches
`GET /api/v1/schema` as JSON and as YAML, and validates each with openapi-spec-validator.
Exits non-zero with the validator's message when either is not a valid OpenAPI document.
"""

from __future__ import annotations

import json
import sys

import yaml
from openapi_spec_validator import validate

from tests.support.harness import BASE_DIR, Gunicorn, request, server_env

WORK = BASE_DIR / "var" / "openapi"


def fetch(url: str, accept: str) -> bytes:
    status, _, body = request("GET", url, headers={"Accept": accept})
    if status != 200:
        raise SystemExit(f"validate_openapi: GET {url} answered {status}")
    return body


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    env = server_env(f"sqlite:///{WORK / 'openapi.sqlite3'}")
    with Gunicorn(env, workers=1, log=WORK / "gunicorn.log") as server:
        url = f"{server.url}/api/v1/schema"
        documents = {
            "JSON": json.loads(fetch(url, "application/vnd.oai.openapi+json")),
            "YAML": yaml.safe_load(fetch(url, "application/vnd.oai.openapi")),
        }
    for form, document in documents.items():
        try:
            validate(document)
        except Exception as error:  # an unresolvable $ref raises referencing's errors, too
            print(f"validate_openapi: the served {form} document is invalid: {error}")
            return 1
    paths = documents["JSON"]["paths"]
    count = sum(1 for item in paths.values() for method in item if method != "parameters")
    version = documents["JSON"]["openapi"]
    print(f"validate_openapi: OpenAPI {version}, {count} operations, valid as JSON and as YAML")
    return 0


if __name__ == "__main__":
    sys.exit(main())
