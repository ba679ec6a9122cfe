"""JSON-RPC 2.0 over MCP's Streamable HTTP, answering `application/json`, for one agent's POST.

No server-held session: every POST is answered by itself, by any worker; no `Mcp-Session-Id` is
minted. Which revision a POST speaks follows its `MCP-Protocol-Version` header, as the `mcp`
package's server routes it: none, `2025-06-18` or `2025-11-25` is the handshake era
(`initialize`); any other is the stateless revision 2026-07-28 (`params._meta` on every
request, headers that must agree with the body). A body whose `_meta` names a version its
header does not is -32020 in both eras, and nothing is called. Each era's statuses and error
codes are listed in docs/mcp.md#the-protocol.

Tool calls with a malformed `params` are -32602; arguments that do not fit the tool's schema
are a tool result with `isError: true` (`invalid_arguments`), which a model can read and correct.
A `call_api` that awaits a person's approval is, in 2026-07-28 for a request that declares
URL-mode elicitation, that revision's URL interaction (services/mcp/approvals.py).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from services.audit import Actor
from services.mcp import approvals, tools

HANDSHAKE_VERSIONS = ("2025-06-18", "2025-11-25")
LATEST_HANDSHAKE = "2025-11-25"
# Handshake-era revisions that credvault does not serve: a header naming one is refused.
OLDER_VERSIONS = ("2024-11-05", "2025-03-26")
MODERN_VERSIONS = ("2026-07-28",)


class RpcCode(IntEnum):
    """A JSON-RPC error code with the HTTP status it is answered with: in the 2026-07-28
    revision (`status`) and in the handshake era (`handshake_status`)."""

    status: int
    handshake_status: int

    def __new__(cls, code: int, status: int, handshake_status: int) -> RpcCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.status, member.handshake_status = status, handshake_status
        return member

    PARSE_ERROR = (-32700, 400, 400)
    INVALID_REQUEST = (-32600, 400, 400)
    METHOD_NOT_FOUND = (-32601, 404, 200)
    INVALID_PARAMS = (-32602, 400, 200)
    HEADER_MISMATCH = (-32020, 400, 200)
    UNSUPPORTED_PROTOCOL_VERSION = (-32022, 400, 200)


PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "credvault", "title": "credvault", "version": "0.1.0"}
CAPABILITIES = {"tools": {"listChanged": False}}
INSTRUCTIONS = (
    "credvault brokers this agent's calls to its granted services: list_services says which "
    "services it may call and how; call_api makes a call, and credvault adds the credential "
    "on the way out. No tool ever returns a credential."
)


@dataclass(frozen=True, slots=True)
class Reply:
    """The HTTP answer to one POST: its status and its JSON-RPC message (None: no body)."""

    status: int
    message: dict[str, Any] | None = None


class RpcError(Exception):
    def __init__(self, code: RpcCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _error(request_id: Any, error: RpcError, *, modern: bool) -> Reply:
    body: dict[str, Any] = {"code": int(error.code), "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    status = error.code.status if modern else error.code.handshake_status
    return Reply(status, {"jsonrpc": "2.0", "id": request_id, "error": body})


def answer(*, actor: Actor, body: bytes, headers: Mapping[str, str], proxy_base: str) -> Reply:
    """The answer to one POST of the agent `actor`: `headers` by lower-case name; `proxy_base`
    the proxy's URL before the service (`https://credvault.example/api/v1/agent/proxy/`)."""
    version = headers.get("mcp-protocol-version")
    modern = version is not None and version not in HANDSHAKE_VERSIONS + OLDER_VERSIONS
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return _error(None, RpcError(RpcCode.PARSE_ERROR, "Parse error"), modern=modern)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(None, RpcError(RpcCode.INVALID_REQUEST, "Invalid Request"), modern=modern)
    if "method" not in message and ("result" in message or "error" in message):
        # A client's response: the server sends no request, so nothing waits for it.
        if modern:
            return _error(None, RpcError(RpcCode.INVALID_REQUEST, "Invalid Request"), modern=modern)
        return Reply(202)
    request_id = message.get("id")
    method = message.get("method")
    if not isinstance(method, str) or (
        "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, (str, int)))
    ):
        return _error(None, RpcError(RpcCode.INVALID_REQUEST, "Invalid Request"), modern=modern)
    params = message.get("params", {})
    if not isinstance(params, dict):
        return _error(
            request_id, RpcError(RpcCode.INVALID_PARAMS, "params must be an object"), modern=modern
        )
    if "id" not in message:
        if modern and version not in MODERN_VERSIONS:
            return _error(None, _unsupported(version), modern=modern)
        return Reply(202)  # a notification: acknowledged, nothing to act on
    if version in OLDER_VERSIONS:
        return _error(
            request_id,
            RpcError(RpcCode.INVALID_REQUEST, f"Unsupported protocol version: {version}"),
            modern=modern,
        )
    if not modern and _claims_version(params, version):
        # A body that speaks a revision its header does not name: the header routed it here,
        # the body says otherwise, and neither is trusted.
        return _error(request_id, _header_mismatch(), modern=True)
    try:
        if modern:
            _check_envelope(message, params, headers)
            result = _modern(actor, method, params, proxy_base)
        else:
            result = _handshake(actor, method, params, proxy_base)
    except RpcError as error:
        return _error(request_id, error, modern=modern)
    return Reply(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def _unsupported(requested: Any) -> RpcError:
    return RpcError(
        RpcCode.UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(MODERN_VERSIONS), "requested": requested},
    )


def _header_mismatch() -> RpcError:
    return RpcError(
        RpcCode.HEADER_MISMATCH,
        "MCP-Protocol-Version header does not match the request's protocol version",
    )


def _claims_version(params: Mapping[str, Any], version: str | None) -> bool:
    """Whether a handshake-era request's `_meta` names a protocol version (the 2026-07-28
    envelope's key) that its `MCP-Protocol-Version` header does not: a missing header
    included."""
    meta = params.get("_meta")
    return (
        isinstance(meta, dict)
        and PROTOCOL_VERSION_META in meta
        and meta[PROTOCOL_VERSION_META] != version
    )


def _header_value(value: str | None) -> str | None:
    """A routing header's value, its base64 form (`=?base64?...?=`) decoded."""
    if value is not None and value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def _check_envelope(
    message: Mapping[str, Any], params: Mapping[str, Any], headers: Mapping[str, str]
) -> None:
    """The 2026-07-28 request's envelope: `_meta` with its version and the client's
    capabilities, headers that agree with the body, a version served."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not {PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META} <= set(
        meta
    ):
        raise RpcError(
            RpcCode.INVALID_PARAMS,
            f"params._meta must carry {PROTOCOL_VERSION_META!r} and {CLIENT_CAPABILITIES_META!r}",
        )
    requested = meta[PROTOCOL_VERSION_META]
    if headers.get("mcp-protocol-version") != requested:
        raise _header_mismatch()
    if headers.get("mcp-method") != message["method"]:
        raise RpcError(
            RpcCode.HEADER_MISMATCH, "Mcp-Method header does not match the request's method"
        )
    name = params.get("name") if message["method"] == "tools/call" else None
    if name is not None and _header_value(headers.get("mcp-name")) != name:
        raise RpcError(RpcCode.HEADER_MISMATCH, "Mcp-Name header does not match the tool's name")
    if not isinstance(requested, str):
        raise RpcError(RpcCode.INVALID_PARAMS, "the protocol version must be a string")
    if requested not in MODERN_VERSIONS:
        raise _unsupported(requested)


def _handshake(actor: Actor, method: str, params: Mapping[str, Any], proxy_base: str) -> dict:
    if method == "initialize":
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            raise RpcError(RpcCode.INVALID_PARAMS, "initialize needs a protocolVersion")
        return {
            "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE,
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": tools.definitions(actor=actor)}
    if method == "tools/call":
        return _call_tool(actor, params, proxy_base, url_elicitation=False)
    raise RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method}")


def _modern(actor: Actor, method: str, params: Mapping[str, Any], proxy_base: str) -> dict:
    if method == "server/discover":
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "cacheScope": "private",
            "ttlMs": 0,
            "_meta": {SERVER_INFO_META: SERVER_INFO},
        }
    elif method == "tools/list":
        result = {"tools": tools.definitions(actor=actor), "cacheScope": "private", "ttlMs": 0}
    elif method == "tools/call":
        capabilities = params["_meta"][CLIENT_CAPABILITIES_META]  # checked by _check_envelope
        url_elicitation = approvals.declares_url_elicitation(capabilities)
        result = _call_tool(actor, params, proxy_base, url_elicitation=url_elicitation)
    else:
        raise RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method}")
    return {"resultType": "complete", **result}


def _call_tool(
    actor: Actor, params: Mapping[str, Any], proxy_base: str, *, url_elicitation: bool
) -> dict:
    """The tool's result; `url_elicitation`: the request declares URL-mode elicitation (only
    in 2026-07-28), so that a call awaiting a person's approval is that revision's URL
    interaction, unless this very retry answers it already."""
    name = params.get("name")
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(name, str):
        raise RpcError(RpcCode.INVALID_PARAMS, "tools/call needs the tool's name")
    if not isinstance(arguments, dict):
        raise RpcError(RpcCode.INVALID_PARAMS, "the tool's arguments must be an object")
    if name == "list_services":
        result = tools.list_services(actor=actor)
    elif name == "call_api":
        result = tools.call_api(actor=actor, arguments=arguments, proxy_base=proxy_base)
    else:
        raise RpcError(RpcCode.INVALID_PARAMS, f"Unknown tool: {name}")
    ask = result.ask
    if url_elicitation and ask is not None and not approvals.answered(params, ask.approval_id):
        return approvals.input_required(ask)
    return {
        "content": [{"type": "text", "text": json.dumps(result.structured)}],
        "structuredContent": result.structured,
        "isError": result.is_error,
    }
