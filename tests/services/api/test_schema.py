"""The OpenAPI document and the docs: every operation, the input the server accepts
with the limits it enforces, every status it can answer, names a client generator takes as
they are, valid without warnings, and docs served from local assets only."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import Client, RequestFactory
from jsonschema import Draft7Validator

from providers.catalog import catalog
from providers.verification import Reason
from services import credentials
from services.api import serializers
from services.api.wsgi import MAX_BODY_BYTES
from services.bearer_tokens import MAX_LIFETIME_DAYS
from services.exceptions import FieldErrorCode, field_error, problem_code_choices
from services.models import AuditAction
from services.webhooks.events import EVENT_TYPES
from tests.support.helpers import assert_problem, creds

OPERATIONS = {"get", "put", "post", "delete", "patch"}
BODY_OPERATIONS = {
    ("/api/v1/services/test", "post"),
    ("/api/v1/services/credentials", "put"),
    ("/api/v1/agents/{name}", "put"),
    ("/api/v1/agents/{name}/tokens", "post"),
}


def served_schema(query: str = "") -> dict:
    response = Client().get(f"/api/v1/schema?format=json{query}")
    assert response.status_code == 200
    return json.loads(response.content)


def operations(doc: dict):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method in OPERATIONS:
                yield path, method, operation


def component(doc: dict, name: str) -> Draft7Validator:
    """A validator of one component, its references resolved in the document."""
    return Draft7Validator({"$ref": f"#/components/schemas/{name}", **doc})


def enums(node: object):
    if isinstance(node, dict):
        if "enum" in node:
            yield node
        for value in node.values():
            yield from enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from enums(value)


@pytest.fixture(scope="module")
def doc(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        return served_schema()


@pytest.mark.django_db
class TestSchemaAndDocs:
    def test_schema_describes_every_operation(self, doc):
        assert doc["openapi"].startswith("3.")
        assert {(path, method) for path, method, _ in operations(doc)} == {
            ("/api/v1/agents", "get"),
            ("/api/v1/agents/{name}", "put"),
            ("/api/v1/agents/{name}", "delete"),
            ("/api/v1/agents/{name}/tokens", "get"),
            ("/api/v1/agents/{name}/tokens", "post"),
            ("/api/v1/agents/{name}/tokens/{prefix}", "delete"),
            ("/api/v1/agent/credentials/{service}", "get"),
            *(
                ("/api/v1/agent/proxy/{service}/{path}", method)
                for method in ("get", "post", "put", "patch", "delete")
            ),
            ("/api/v1/audit-events", "get"),
            ("/api/v1/providers", "get"),
            ("/api/v1/services", "get"),
            ("/api/v1/services/test", "post"),
            ("/api/v1/services/credentials", "put"),
            ("/api/v1/services/credentials/{service}", "delete"),
            ("/api/v1/oauth-clients", "get"),
            ("/api/v1/oauth-clients/{provider}", "put"),
            ("/api/v1/oauth-clients/{provider}", "delete"),
            ("/api/v1/connect/{provider}", "post"),
            ("/api/v1/approvals", "get"),
            ("/api/v1/approvals/{approval_id}/approve", "post"),
            ("/api/v1/approvals/{approval_id}/deny", "post"),
            ("/api/v1/agent/access-requests", "post"),
            ("/api/v1/agent/access-requests/{approval_id}", "get"),
            ("/api/v1/webhooks", "get"),
            ("/api/v1/webhooks", "post"),
            ("/api/v1/webhooks/{webhook_id}", "get"),
            ("/api/v1/webhooks/{webhook_id}", "patch"),
            ("/api/v1/webhooks/{webhook_id}", "delete"),
            ("/api/v1/webhooks/{webhook_id}/rotate-secret", "post"),
            ("/api/v1/webhooks/{webhook_id}/test", "post"),
            ("/api/v1/webhooks/{webhook_id}/deliveries", "get"),
            ("/api/v1/webhook-deliveries/{event_id}/redeliver", "post"),
        }
        for name in ("accountToken", "agentToken"):
            scheme = doc["components"]["securitySchemes"][name]
            assert scheme == scheme | {"type": "http", "scheme": "bearer"}
        for path, item in doc["paths"].items():
            for method in ("put", "post"):
                # A brokered call's body is the provider's, of any media type, and optional;
                # a new agent token's options, a connect's and an approval's may be left out;
                # a denial takes none.
                optional = path.endswith(("/tokens", "/approve", "/deny")) or path.startswith(
                    "/api/v1/connect/"
                )
                # The actions on a webhook endpoint or an event take no body at all.
                bodiless = path.endswith(("/rotate-secret", "/test", "/redeliver"))
                if method in item and bodiless and path.startswith("/api/v1/webhook"):
                    assert "requestBody" not in item[method], (path, method)
                elif method in item and not optional and "/proxy/" not in path:
                    body = item[method]["requestBody"]
                    assert body["required"] is True, (path, method)
                    assert list(body["content"]) == ["application/json"], (path, method)
                    assert body["content"]["application/json"]["examples"], (path, method)
        tokens_body = doc["paths"]["/api/v1/agents/{name}/tokens"]["post"]["requestBody"]
        assert tokens_body.get("required", False) is False
        connect_body = doc["paths"]["/api/v1/connect/{provider}"]["post"]["requestBody"]
        assert connect_body.get("required", False) is False
        approve_body = doc["paths"]["/api/v1/approvals/{approval_id}/approve"]["post"]
        assert approve_body["requestBody"].get("required", False) is False
        assert "requestBody" not in doc["paths"]["/api/v1/approvals/{approval_id}/deny"]["post"]
        agent_read = doc["paths"]["/api/v1/agent/credentials/{service}"]["get"]
        assert agent_read["security"] == [{"agentToken": []}]

    def test_schema_validates_without_warnings(self, tmp_path):
        from django.core.management import call_command

        target = tmp_path / "schema.yaml"
        call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
        assert "operationId: store_credentials" in target.read_text()

    def test_docs_are_served_from_local_assets(self):
        response = Client().get("/api/docs")
        assert response.status_code == 200
        html = response.content.decode()
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets
        assert not re.search(r"https?://", " ".join(assets)), assets
        # No address of another host anywhere in the page, inline scripts included: absolute
        # and protocol-relative URLs alike.
        assert not re.findall(r"(?:https?:)?//[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+", html)
        for asset in assets:
            assert asset.startswith("/static/"), asset
            assert Client().get(asset).status_code == 200, asset


@pytest.mark.django_db
class TestSchemaAndDocsMethods:
    def test_the_schema_answers_a_browsers_accept_header(self):
        response = Client().get("/api/v1/schema", HTTP_ACCEPT="text/html")
        assert response.status_code == 200
        assert b"openapi" in response.content

    @pytest.mark.parametrize("path", ["/api/docs", "/api/v1/schema"])
    def test_options_is_405_problem_details_not_a_500(self, path):
        response = Client(raise_request_exception=False).options(path)
        assert response.status_code == 405
        assert response["Content-Type"] == "application/problem+json"
        assert json.loads(response.content)["code"] == "method_not_allowed"

    def test_a_version_parameter_does_not_change_the_documents_version(self):
        doc = served_schema("&version=9.9.9-evil")
        assert doc["info"]["version"] == settings.SPECTACULAR_SETTINGS["VERSION"]


@pytest.mark.django_db
class TestTheAcceptedInput:
    """The document describes what the server accepts, with the limits it enforces, each read
    from its one declaration (issue item 10)."""

    ACCEPTED_SERVICES = [
        "github",
        "GitHub",
        " GitHub ",
        "\uff27\uff49\uff54\uff28\uff55\uff42",
        "Google Drive",
        "my_api",
        "a" * 64,
        "github" + " " * 80,
    ]

    @pytest.mark.parametrize("service", ACCEPTED_SERVICES)
    def test_a_service_the_server_normalizes_is_valid_input(self, doc, alice_api, service):
        body = {"service": service, "credentials": creds(api_key="v")}
        assert list(component(doc, "CredentialInput").iter_errors(body)) == []
        assert alice_api.store(service, creds(api_key="v")).status_code in (200, 201)
        grants = {"services": [service]}
        assert list(component(doc, "AgentInput").iter_errors(grants)) == []
        for path in ("/api/v1/services/credentials/{service}", "/api/v1/agents/{name}"):
            parameters = doc["paths"][path]["delete"]["parameters"]
            [parameter] = [p for p in parameters if p["in"] == "path"]
            assert list(Draft7Validator(parameter["schema"]).iter_errors(service)) == [], path

    def test_the_service_field_states_the_normalization(self, doc):
        service = doc["components"]["schemas"]["CredentialInput"]["properties"]["service"]
        assert "pattern" not in service
        assert service["minLength"] == 1
        assert "NFKC" in service["description"]
        assert "1 to 64 characters" in service["description"]

    def test_credentials_state_their_limits(self, doc):
        schemas = doc["components"]["schemas"]
        entries = schemas["CredentialInput"]["properties"]["credentials"]
        assert (entries["minItems"], entries["maxItems"]) == (1, serializers.MAX_CREDENTIALS)
        assert "keyName at most once" in entries["description"]
        value = schemas["CredentialEntry"]["properties"]["value"]
        assert (value["minLength"], value["maxLength"]) == (1, serializers.MAX_VALUE_CHARS)
        assert (serializers.MAX_CREDENTIALS, serializers.MAX_VALUE_CHARS) == (20, 16384)
        assert value["pattern"] == "^[^\\u0000]*$"
        check = component(doc, "CredentialEntry")
        assert check.is_valid({"keyName": "pem", "value": "-----BEGIN-----\nx\n"})
        assert not check.is_valid({"keyName": "pem", "value": "a\x00b"})

    def test_a_duplicate_keyname_is_refused_as_the_description_says(self, alice_api):
        body = json.dumps({"service": "a", "credentials": creds(k="1") + creds(k="2")})
        problem = assert_problem(
            alice_api.raw("PUT", "/api/v1/services/credentials", body), 400, "invalid_request"
        )
        assert problem["errors"][0]["code"] == "duplicate"

    def test_a_nul_or_a_trailing_newline_is_refused_as_the_patterns_say(self, alice_api):
        for entry, field in [
            ({"keyName": "api_key", "value": "a\x00b"}, "credentials[0].value"),
            ({"keyName": "api_key\n", "value": "v"}, "credentials[0].keyName"),
        ]:
            body = json.dumps({"service": "custom", "credentials": [entry]})
            problem = assert_problem(
                alice_api.raw("PUT", "/api/v1/services/credentials", body), 400, "invalid_request"
            )
            assert problem["errors"][0]["field"] == field

    def test_the_account_token_scheme_names_the_readmes_command(self, doc):
        scheme = doc["components"]["securitySchemes"]["accountToken"]["description"]
        command = re.search(r"`(\S*python manage\.py issue_token) \w+`", scheme)
        assert command is not None
        readme = (settings.BASE_DIR / "README.md").read_text()
        assert f"`{command.group(1)} demo`" in readme

    def test_every_request_body_states_the_size_limit(self, doc):
        assert MAX_BODY_BYTES == 64 * 1024
        for path, method in BODY_OPERATIONS:
            body = doc["paths"][path][method]["requestBody"]
            assert f"{MAX_BODY_BYTES // 1024} KiB" in body["description"], (path, method)

    def test_grants_and_token_lifetimes_state_their_limits(self, doc):
        schemas = doc["components"]["schemas"]
        assert schemas["AgentInput"]["properties"]["services"]["maxItems"] == 100
        assert serializers.MAX_GRANTS == 100
        days = schemas["AgentTokenInput"]["properties"]["expiresInDays"]
        assert (days["minimum"], days["maximum"]) == (1, MAX_LIFETIME_DAYS) == (1, 3650)

    def test_every_catalog_providers_shapes_are_described(self, doc):
        entries = doc["components"]["schemas"]["CredentialInput"]["properties"]["credentials"]
        lines = {
            line.split("`")[1]: line
            for line in entries["description"].splitlines()
            if line.startswith("- `")
        }
        assert set(lines) == set(catalog())
        github = catalog()["github"]
        for shape in github.shapes:
            for name in shape.required:
                assert f"`{name}`" in lines["github"]

    def test_the_audit_parameters_are_those_the_server_reads(self, doc, alice_api):
        parameters = doc["paths"]["/api/v1/audit-events"]["get"]["parameters"]
        limit, before = (
            next(p["schema"] for p in parameters if p["name"] == n) for n in ("limit", "before")
        )
        for raw in ("1", "99", "9" * 19):
            assert Draft7Validator(before).is_valid(raw)
            response = alice_api.client.get(
                "/api/v1/audit-events", {"before": raw}, headers=alice_api.headers()
            )
            assert response.status_code == 200, raw
        for raw in ("0", "01", "\u0661", "1" * 20):
            assert not Draft7Validator(before).is_valid(raw)
            response = alice_api.client.get(
                "/api/v1/audit-events", {"before": raw}, headers=alice_api.headers()
            )
            assert_problem(response, 400, "invalid_request")
        assert (limit["minimum"], limit["maximum"]) == (1, 200)


@pytest.mark.django_db
class TestEveryStatusIsDocumented:
    """Every status a path can answer is in the document for its operation (issue item 11)."""

    EVERY_OPERATION = {"400", "401", "403", "405", "408", "411", "414", "429", "431", "500", "503"}

    def test_every_operation_lists_the_statuses_any_request_can_get(self, doc):
        for path, method, operation in operations(doc):
            responses = operation["responses"]
            assert set(responses) >= self.EVERY_OPERATION, (path, method)
            assert "406" not in responses, (path, method)
            if (path, method) in BODY_OPERATIONS:
                assert {"413", "415"} <= set(responses), (path, method)
            if "{" in path:
                assert "404" in responses, (path, method)
            for status, response in responses.items():
                assert response["headers"]["Cache-Control"]["required"] is True
                if status >= "400":
                    media = response["content"]["application/problem+json"]
                    assert media["schema"] == {"$ref": "#/components/schemas/Problem"}
        services = doc["paths"]["/api/v1/services"]["get"]["responses"]
        assert services["429"]["headers"]["Retry-After"]["required"] is True
        assert services["401"]["headers"]["WWW-Authenticate"]["required"] is True
        assert services["405"]["headers"]["Allow"]["required"] is True
        for before_django in ("408", "411", "414", "431"):
            assert "X-Request-ID" not in services[before_django]["headers"]
        assert services["400"]["headers"]["X-Request-ID"]["required"] is False
        codes = set(doc["components"]["schemas"]["ProblemCode"]["enum"])
        assert {
            "bad_request",
            "request_timeout",
            "uri_too_long",
            "request_header_too_large",
        } <= codes

    def test_a_brokered_calls_headers_are_those_of_either_answer(self, doc):
        """A proxied answer may be the provider's (its own X-Request-ID, if any; credvault's
        id in X-Credvault-Request-Id) or credvault's refusal (X-Credvault-Error too)."""
        proxied = doc["paths"]["/api/v1/agent/proxy/{service}/{path}"]["get"]["responses"]
        for status in ("200", "403", "504"):
            headers = proxied[status]["headers"]
            assert headers["X-Credvault-Request-Id"]["required"] is True
            assert headers["X-Request-ID"]["required"] is False
            assert headers["X-Credvault-Error"]["required"] is False
        services = doc["paths"]["/api/v1/services"]["get"]["responses"]
        assert "X-Credvault-Request-Id" not in services["200"]["headers"]
        assert services["200"]["headers"]["X-Request-ID"]["required"] is True

    def documented(self, doc: dict, path: str, method: str) -> set[str]:
        return set(doc["paths"][path][method]["responses"])

    def test_a_name_holding_a_slash_is_a_documented_404(self, doc, alice_api):
        for method, path in [("PUT", "/api/v1/agents/a/b"), ("DELETE", "/api/v1/agents/a/b")]:
            response = alice_api.raw(method, path, json.dumps({"services": []}))
            assert_problem(response, 404, "not_found")
            assert "404" in self.documented(doc, "/api/v1/agents/{name}", method.lower())

    def test_a_server_error_and_a_database_outage_are_documented(self, doc, alice_api, monkeypatch):
        def broken(**kwargs):
            raise RuntimeError("boom")

        monkeypatch.setattr(credentials, "list_services", broken)
        assert_problem(alice_api.list(), 500, "internal_error")

        def refused(**kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr(credentials, "list_services", refused)
        assert_problem(alice_api.list(), 503, "service_unavailable")
        assert {"500", "503"} <= self.documented(doc, "/api/v1/services", "get")

    def test_an_unterminated_chunked_body_is_a_documented_411(self, doc, alice_api):
        from credvault.wsgi import application

        environ = dict(RequestFactory().get("/api/v1/services").environ)
        environ.update(
            {
                "HTTP_TRANSFER_ENCODING": "chunked",
                "wsgi.input": io.BytesIO(b"{}"),
                "wsgi.input_terminated": False,
            }
        )
        environ.pop("CONTENT_LENGTH", None)
        status: list[str] = []
        body = b"".join(application(environ, lambda s, h, exc_info=None: status.append(s)))
        assert status[0].startswith("411")
        assert json.loads(body)["code"] == "length_required"
        assert "411" in self.documented(doc, "/api/v1/services", "get")

    def test_a_foreign_host_is_a_documented_400(self, doc, alice_api):
        response = alice_api.client.get(
            "/api/v1/services", headers=alice_api.headers({"Host": "evil.example"})
        )
        assert_problem(response, 400, "invalid_request")
        assert "400" in self.documented(doc, "/api/v1/services", "get")

    def test_no_accept_header_gets_a_406(self, alice_api):
        for accept in ("text/html", "application/xml", "image/*"):
            response = alice_api.client.get(
                "/api/v1/services", headers=alice_api.headers({"Accept": accept})
            )
            assert response.status_code == 200, accept
            assert Client().get("/api/v1/schema", HTTP_ACCEPT=accept).status_code == 200

    def test_a_no_content_answer_has_no_content_schema(self, doc):
        no_content = [
            (path, method, operation["responses"]["204"])
            for path, method, operation in operations(doc)
            if "204" in operation["responses"]
        ]
        assert len(no_content) == 5
        for path, method, response in no_content:
            assert "content" not in response, (path, method)


@pytest.mark.django_db
class TestNamesForClientGenerators:
    """What openapi-python-client and openapi-generator make of the document is usable as it is
    (issue item 12)."""

    def test_nothing_is_named_like_a_test(self, doc):
        names = list(doc["components"]["schemas"])
        names += [operation["operationId"] for _, _, operation in operations(doc)]
        assert [n for n in names if n.lower().startswith("test")] == []
        assert "VerificationResult" in doc["components"]["schemas"]
        test = doc["paths"]["/api/v1/services/test"]["post"]
        assert test["operationId"] == "verify_credentials"

    def test_components_have_the_names_they_are_given(self, doc):
        assert set(doc["components"]["schemas"]) == {
            "AccessRequest",
            "AccessRequestCreated",
            "AccessRequestInput",
            "Approval",
            "ApprovalKind",
            "ApprovalStatus",
            "ApproveInput",
            "Agent",
            "AgentCredential",
            "AgentCredentials",
            "AgentInput",
            "AgentToken",
            "AgentTokenInfo",
            "AgentTokenInput",
            "ApproveRule",
            "AuditAction",
            "AuditEvent",
            "AuditOutcome",
            "AuditPage",
            "Connect",
            "ConnectInput",
            "ConnectedService",
            "CredentialEntry",
            "CredentialInput",
            "EventType",
            "FieldError",
            "FieldErrorCode",
            "Grant",
            "GrantAccess",
            "GrantInput",
            "KeyType",
            "ListedService",
            "OAuthClient",
            "OAuthClientInput",
            "Problem",
            "ProblemCode",
            "Provider",
            "ProviderCategory",
            "ProviderShape",
            "ProxyMethod",
            "ServiceStatus",
            "VerificationReason",
            "VerificationResult",
            "PatchedWebhookChange",
            "Webhook",
            "WebhookAttempt",
            "WebhookAttemptPage",
            "WebhookCreated",
            "WebhookInput",
            "WebhookRedelivery",
            "WebhookSecret",
            "WebhookTest",
        }

    def test_no_enum_has_a_single_value(self, doc):
        assert [node for node in enums(doc) if len(node["enum"]) < 2] == []
        store = doc["paths"]["/api/v1/services/credentials"]["put"]
        [verify] = [p for p in store["parameters"] if p["name"] == "verify"]
        assert verify["in"] == "query"
        assert verify["schema"] == {"type": "string", "pattern": "^required$"}

    def test_one_reason_enum(self, doc):
        schemas = doc["components"]["schemas"]
        # ProblemCode aside: the 503 of a token URL that cannot be reached is
        # `provider_unavailable`, a word the verification reasons use too.
        reasons = [
            node
            for node in enums(schemas)
            if set(node["enum"]) & {reason.value for reason in Reason}
            and node is not schemas["ProblemCode"]
        ]
        assert reasons == [schemas["VerificationReason"]]
        assert schemas["VerificationReason"]["enum"] == [reason.value for reason in Reason]
        ref = {"$ref": "#/components/schemas/VerificationReason"}
        assert schemas["VerificationResult"]["properties"]["reason"] == ref
        assert schemas["Problem"]["properties"]["reason"]["allOf"] == [ref]

    def test_codes_and_actions_are_closed_sets_from_their_one_definition(self, doc):
        schemas = doc["components"]["schemas"]
        codes = schemas["ProblemCode"]["enum"]
        assert codes == [code for code, _ in problem_code_choices()]
        for code in ("length_required", "not_authenticated", "invalid_token", "rate_limited"):
            assert code in codes
        assert schemas["FieldErrorCode"]["enum"] == [code.value for code in FieldErrorCode]
        assert schemas["AuditAction"]["enum"] == AuditAction.values
        assert schemas["Problem"]["properties"]["code"]["allOf"] == [
            {"$ref": "#/components/schemas/ProblemCode"}
        ]
        assert schemas["FieldError"]["properties"]["code"] == {
            "$ref": "#/components/schemas/FieldErrorCode"
        }
        assert schemas["AuditEvent"]["properties"]["action"] == {
            "$ref": "#/components/schemas/AuditAction"
        }

    def test_a_webhook_endpoints_events_are_the_event_types(self, doc):
        schemas = doc["components"]["schemas"]
        assert schemas["EventType"] == {"type": "string", "enum": list(EVENT_TYPES)}
        ref = {"$ref": "#/components/schemas/EventType"}
        for name in ("WebhookInput", "PatchedWebhookChange", "Webhook", "WebhookCreated"):
            assert schemas[name]["properties"]["events"]["items"] == ref, name
        assert schemas["WebhookAttempt"]["properties"]["type"] == ref
        assert schemas["WebhookTest"]["properties"]["type"]["allOf"] == [ref]
        # Each one the server accepts, every type but one outside the enum refused.
        accepted = component(doc, "WebhookInput")
        assert accepted.is_valid({"url": "https://x.example.com/", "events": list(EVENT_TYPES)})
        assert not accepted.is_valid({"url": "https://x.example.com/", "events": ["nope.never"]})

    def test_a_field_error_code_outside_the_set_is_a_programming_error(self):
        with pytest.raises(ValueError, match="not_a_code"):
            field_error("x", "not_a_code", "message")  # type: ignore[arg-type]

    def test_the_problems_the_server_sends_carry_documented_codes(self, doc, anonymous_api):
        codes = set(doc["components"]["schemas"]["ProblemCode"]["enum"])
        sent = [
            anonymous_api.list(),
            anonymous_api.client.get("/api/v1/services", headers={"Authorization": "Bearer x"}),
            anonymous_api.raw("PATCH", "/api/v1/services"),
            anonymous_api.client.get("/nothing-here"),
            Client(raise_request_exception=False).get("/api/v1/services", HTTP_HOST="evil"),
        ]
        for response in sent:
            assert json.loads(response.content)["code"] in codes

    def test_operations_are_tagged_by_resource(self, doc):
        tags = {operation["operationId"]: operation["tags"] for _, _, operation in operations(doc)}
        assert tags == {
            "list_services": ["services"],
            "verify_credentials": ["services"],
            "store_credentials": ["services"],
            "remove_service": ["services"],
            "list_providers": ["providers"],
            "list_agents": ["agents"],
            "put_agent": ["agents"],
            "delete_agent": ["agents"],
            "list_agent_tokens": ["agent-tokens"],
            "issue_agent_token": ["agent-tokens"],
            "revoke_agent_token": ["agent-tokens"],
            "agent_read_credentials": ["agent"],
            **{f"agent_proxy_{m}": ["agent"] for m in ("get", "post", "put", "patch", "delete")},
            "list_audit_events": ["audit"],
            "list_approvals": ["approvals"],
            "approve": ["approvals"],
            "deny": ["approvals"],
            "agent_request_access": ["agent"],
            "agent_read_access_request": ["agent"],
            **{
                operation: ["oauth"]
                for operation in (
                    "list_oauth_clients",
                    "put_oauth_client",
                    "delete_oauth_client",
                    "connect",
                )
            },
            **{
                operation: ["webhooks"]
                for operation in (
                    "list_webhooks",
                    "create_webhook",
                    "get_webhook",
                    "update_webhook",
                    "delete_webhook",
                    "rotate_webhook_secret",
                    "send_webhook_test_event",
                    "list_webhook_deliveries",
                    "redeliver_webhook_event",
                )
            },
        }
        assert [tag["name"] for tag in doc["tags"]] == [
            "services",
            "providers",
            "agents",
            "agent-tokens",
            "agent",
            "audit",
            "approvals",
            "oauth",
            "webhooks",
        ]
