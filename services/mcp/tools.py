"""The MCP server's two tools, for one agent: `list_services` and `call_api`.

`call_api` is the broker's own call (`services.broker.call.call`, the rule of the proxy route),
recorded with `via: "mcp"`; its result is the provider's status, headers and body, at most
CREDVAULT_MCP_MAX_RESULT bytes of it (a streamed answer cut there is recorded `cut`). A refusal
is a tool result with `isError: true` and the problem's code, status and detail, recorded as
the proxy route records one; one that needs a person's approval carries it (`ToolResult.ask`)
for the protocol to tell the client as its revision can (services/mcp/approvals.py). The same
arguments always make the same request, so a repeated call meets the same approval. No tool
returns a stored value, whatever the grant; descriptions name the agent's own services only
(docs/mcp.md#what-an-agent-sees).
"""

from __future__ import annotations

import base64
import codecs
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings

from providers import catalog
from providers.identifiers import HOST_BASE, split_base
from services import audit
from services.audit import Actor, Operation
from services.broker import destination
from services.broker.answers import ProxyAnswer
from services.broker.call import ProxyRequest, call
from services.broker.destination import named_base
from services.broker.paths import MAX_PATH_LENGTH
from services.broker.streams import StreamCut
from services.broker.tokens import without_tokens
from services.exceptions import ApprovalProblem, ProblemError
from services.grants import PROXY_METHODS, GrantSpec
from services.identifiers import service_identifier
from services.mcp import approvals
from services.mcp.approvals import Ask
from services.models import Grant, ServiceStatus
from services.storage import queries
from services.times import rfc3339

VIA = "mcp"
NOT_CONNECTED = "not_connected"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result: its structured content, whether it is a refusal, and the approval a
    person can still decide when the refusal is that the call needs one."""

    structured: dict[str, Any]
    is_error: bool = False
    ask: Ask | None = None


class InvalidArguments(ValueError):
    """A tool's arguments that do not fit its input schema: the problem, for the model."""


def _grants(actor: Actor) -> list[GrantSpec]:
    # Django reads None as IS NULL; the plugin's lookup types leave None out.
    grants = Grant.objects.filter(agent_id=actor.agent_id).order_by("service")  # type: ignore[misc]
    return [GrantSpec.of(grant) for grant in grants]


def _docs_url(provider: catalog.Provider, key_type: str | None) -> str | None:
    """The provider's API documentation: the check's docs of the stored shape, else of its
    first shape that has one."""
    shapes = sorted(provider.shapes, key=lambda shape: shape.key_type != key_type)
    return next((shape.check.docs for shape in shapes if shape.check is not None), None)


def _why_not_callable(
    grant: GrantSpec, provider: catalog.Provider | None, status: str
) -> str | None:
    if grant.expired():
        return "not_granted"  # what call_api answers past the grant's expiry
    if status == NOT_CONNECTED:
        return "service_not_connected"
    if status == ServiceStatus.REAUTHORIZATION_REQUIRED:
        return "reauthorization_required"
    if provider is None:
        return "not_proxyable"  # a custom service: no API address in the catalog
    if not destination.has_destination(provider):
        return "not_proxyable"  # a per-customer host the operator has not set
    return None


def list_services(*, actor: Actor) -> ToolResult:
    """The agent's grants, each with its provider, its docs, its stored set's key type and
    status, and whether a call can be made now (`callable`, else `reason`); a grant's
    `expiresAt` and `approve` rules where it has them (an expired grant is listed with its
    expiry, not callable, so that the model can tell the person why)."""
    connected = {row.service: row for row in queries.list_services(account_id=actor.account_id)}
    entries = []
    for grant in _grants(actor):
        provider = catalog.get(grant.service)
        row = connected.get(grant.service)
        status = row.status if row is not None else NOT_CONNECTED
        key_type = row.key_type if row is not None else None
        reason = _why_not_callable(grant, provider, status)
        entry: dict[str, object] = {
            "service": grant.service,
            "provider": provider.name if provider is not None else None,
            "docsUrl": _docs_url(provider, key_type) if provider is not None else None,
            "keyType": key_type,
            "status": str(status),
            "access": str(grant.access),
            "methods": list(grant.methods),
            "paths": list(grant.paths),
            "graphql": list(grant.graphql),
            "callable": reason is None,
            "reason": reason,
        }
        if grant.base:
            entry["base"] = grant.base
        if grant.expires_at is not None:
            entry["expiresAt"] = rfc3339(grant.expires_at)
        if grant.approve:
            entry["approve"] = [rule.as_json() for rule in grant.approve]
        bases = _bases(provider, grant) if provider is not None else {}
        if bases:
            entry["bases"] = bases
        entries.append(entry)
    return ToolResult({"services": entries})


def _bases(provider: catalog.Provider, grant: GrantSpec) -> dict[str, str]:
    """The service's other bases that the grant covers, by the name `call_api`'s `service`
    takes after `~`: each base's URL, and `host`'s pattern (the catalog's)."""
    bases = dict(provider.bases)
    if provider.host_pattern is not None:
        bases[HOST_BASE] = provider.host_pattern.pattern
    return {name: url for name, url in bases.items() if grant.base in ("", name)}


def _named(grant: GrantSpec) -> str:
    provider = catalog.get(grant.service)
    return f"{grant.service} ({provider.name})" if provider is not None else grant.service


def definitions(*, actor: Actor) -> list[dict[str, Any]]:
    """The two tools as `tools/list` gives them, described for this agent: its granted
    services (those not expired) by identifier and provider name."""
    grants = [grant for grant in _grants(actor) if not grant.expired()]
    named = ", ".join(_named(grant) for grant in grants) or "none yet"
    return [
        {
            "name": "list_services",
            "title": "List granted services",
            "description": (
                "List the services this agent may call through credvault, each with its "
                "provider, API docs, connection status, the methods and path prefixes its "
                "grant allows, and whether a call can be made now. No credential is ever "
                f"returned. Granted services: {named}."
            ),
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        },
        {
            "name": "call_api",
            "title": "Call a granted service's API",
            "description": (
                "Make an HTTP request to the API of a service granted to this agent, through "
                "credvault: credvault adds the stored credential on the way out, and the answer "
                "comes back with every credential value redacted. The path is below the "
                "provider's API base (for GitHub, /user or /repos/OWNER/REPO). A call that "
                "needs a person's approval answers with the page to give them; once they have "
                f"decided, call again with the same arguments. Granted services: {named}."
            ),
            "inputSchema": CALL_API_INPUT,
            "annotations": {"readOnlyHint": False, "openWorldHint": True},
        },
    ]


CALL_API_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "service": {
            "type": "string",
            "description": "A granted service identifier; for another base of it that "
            "list_services names, `service~base` (`huggingface~router`); for a host of its "
            "host pattern, `service~host`, the path then starting with the host "
            "(`/idx-1.svc.env.pinecone.io/query`).",
        },
        "method": {"type": "string", "enum": list(PROXY_METHODS)},
        "path": {
            "type": "string",
            "description": "The path below the provider's API base, starting with '/'.",
        },
        "query": {
            "type": "object",
            "description": "Query parameters: each a string or a list of strings.",
            "additionalProperties": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
            },
        },
        "headers": {
            "type": "object",
            "description": "Request headers (never a credential: credvault adds it).",
            "additionalProperties": {"type": "string"},
        },
        "body": {
            "description": "The request body: a string as it is, any other JSON value as JSON."
        },
    },
    "required": ["service", "method", "path"],
    "additionalProperties": False,
}


def _valid_text(value: Any) -> bool:
    """Whether every string in a JSON value, keys included, is Unicode text: JSON's `\\ud800`
    decodes to a lone surrogate, which no request, header or database can carry."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _string(arguments: Mapping[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise InvalidArguments(f"`{name}` must be a string.")
    return value


def _query(raw_query: str, query: Any) -> str:
    if query is None:
        return raw_query
    if not isinstance(query, dict):
        raise InvalidArguments("`query` must be an object of strings or lists of strings.")
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(item, str) for item in values):
            raise InvalidArguments("`query` must be an object of strings or lists of strings.")
        pairs.extend((name, item) for item in values)
    encoded = urlencode(pairs)
    return "&".join(part for part in (raw_query, encoded) if part)


def _headers(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict) or not all(
        isinstance(value, str) for value in headers.values()
    ):
        raise InvalidArguments("`headers` must be an object of strings.")
    return {name.lower(): value for name, value in headers.items()}


def proxy_request(arguments: Mapping[str, Any]) -> tuple[str, ProxyRequest]:
    """The service and the ProxyRequest that `call_api`'s arguments describe. Its headers obey
    the broker's rule set for headers (services/broker/headers.py), as the proxy's do."""
    if not _valid_text(arguments):
        raise InvalidArguments(
            "The arguments hold text that is not valid Unicode (a lone surrogate such as \\ud800)."
        )
    unknown = set(arguments) - set(CALL_API_INPUT["properties"])
    if unknown:
        raise InvalidArguments(f"Unknown argument: {sorted(unknown)[0]}.")
    service = _string(arguments, "service")
    method = _string(arguments, "method").upper()
    if method not in PROXY_METHODS:
        raise InvalidArguments(f"`method` must be one of {', '.join(PROXY_METHODS)}.")
    path, _, raw_query = _string(arguments, "path").partition("?")
    path = path.partition("#")[0]
    if path and not path.startswith("/"):
        path = "/" + path
    # Characters a URL path may not hold as they are (a space) are encoded; an encoded one
    # (`%2F`) stays as it was given.
    path = quote(path, safe="/%:@!$&'()*+,;=-._~")[:MAX_PATH_LENGTH]
    headers = _headers(arguments.get("headers"))
    body: bytes = b""
    if "body" in arguments and arguments["body"] is not None:
        given = arguments["body"]
        if isinstance(given, str):
            body = given.encode()
        else:
            body = json.dumps(given, separators=(",", ":")).encode()
            headers.setdefault("content-type", "application/json")
    return service, ProxyRequest(
        method=method,
        raw_path=path,
        query=_query(raw_query, arguments.get("query")),
        headers=headers,
        body=body,
    )


def call_api(*, actor: Actor, arguments: Mapping[str, Any], proxy_base: str) -> ToolResult:
    """`call_api`: the brokered call its arguments describe, its answer or its refusal;
    `proxy_base` the proxy's URL before the service, where the answer's addresses move."""
    try:
        service, request = proxy_request(arguments)
    except InvalidArguments as exc:
        method, path = arguments.get("method"), arguments.get("path")
        audit.record_refusal(
            actor,
            Operation.PROXY_CALL,
            via=VIA,
            service="",
            method=str(method).upper() if str(method).upper() in PROXY_METHODS else "",
            path=without_tokens(path)[:MAX_PATH_LENGTH]
            if isinstance(path, str) and _valid_text(path)
            else "",
            status=400,
        )
        return _refusal(400, "invalid_arguments", str(exc))
    normalized = ""  # recorded without a service that cannot be normalized
    try:
        named, base = split_base(service)
        service = normalized = service_identifier(named)
        chosen, path = named_base(base, request.raw_path)
        request = replace(
            request,
            raw_path=path,
            base=chosen,
            proxy_url=partial(str, proxy_base + service + chosen.spelling),
        )
        answer = call(actor=actor, service=service, request=request, via=VIA)
    except ProblemError as problem:
        if not audit.is_recorded(problem):  # a call that failed once sent has its event
            audit.record_refusal(
                actor,
                Operation.PROXY_CALL,
                via=VIA,
                service=normalized,
                method=request.method,
                path=without_tokens(request.agent_path),
                status=problem.status_code,
            )
        if isinstance(problem, ApprovalProblem):
            called = f"{request.method} {normalized}{without_tokens(request.agent_path)}"
            return ToolResult(
                approvals.refusal(problem), True, approvals.ask_of(problem, call=called)
            )
        return _refusal(problem.status_code, problem.default_code, str(problem.detail))
    return _result(answer)


def _refusal(status: int, code: str, detail: str) -> ToolResult:
    return ToolResult({"error": {"status": status, "code": code, "detail": detail}}, True)


def _read(answer: ProxyAnswer, most: int) -> tuple[bytes, bool]:
    """At most `most` bytes of the answer's body, and whether there was more."""
    if answer.stream is None:
        return answer.body[:most], len(answer.body) > most
    stream = answer.stream
    pieces: list[bytes] = []
    size = 0
    truncated = False
    try:
        for piece in stream:
            pieces.append(piece)
            size += len(piece)
            if size > most:
                truncated = True
                break
    except StreamCut:
        truncated = True  # credvault cut it (a size, a duration, a silence): recorded `cut`
    finally:
        if truncated:
            stream.cut()
        stream.close()
    return b"".join(pieces)[:most], truncated


def _text(body: bytes, truncated: bool) -> str | None:
    """The body as text when it is UTF-8 (a cut body may end inside a character), else None."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(body, final=not truncated)
    except UnicodeDecodeError:
        return None


def _result(answer: ProxyAnswer) -> ToolResult:
    body, truncated = _read(answer, settings.CREDVAULT_MCP_MAX_RESULT)
    text = _text(body, truncated)
    merged: dict[str, str] = {}
    for name, value in answer.headers:
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return ToolResult(
        {
            "status": answer.status,
            "headers": merged,
            "body": text if text is not None else base64.b64encode(body).decode("ascii"),
            "bodyEncoding": "text" if text is not None else "base64",
            "truncated": truncated,
        }
    )
