"""credvault as a Model Context Protocol server for its agents (docs/mcp.md).

An agent adds one URL (`{CREDVAULT_PUBLIC_URL}/mcp`) and its agent token, and gets two tools:
`list_services` (its grants and whether each can be called) and `call_api` (a call to a granted
service's provider through the broker: `services.broker.call.call`, the same rule as the proxy
route, audited with `via: "mcp"`). No tool ever returns a stored value.

- `protocol`: JSON-RPC 2.0 over Streamable HTTP, answering `application/json`, with no
  server-held session: the handshake-era revisions 2025-06-18 and 2025-11-25 (`initialize`
  negotiation), and 2026-07-28 (the per-request `MCP-Protocol-Version` header and `_meta`,
  `server/discover`, its error statuses).
- `tools`: the two tools, their per-agent descriptions, and their results.

A small handler of credvault's own, not the `mcp` package's server: see docs/decisions.md.
"""
