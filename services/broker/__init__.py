"""Brokered access: an agent asks credvault to call its provider, credvault adds the credential
on the way out, and the agent sees the provider's answer only, with every injected secret
redacted from it.

One module per concern, in the order a request meets them:

- `paths`: the agent's path, checked and encoded again; whether a grant covers a method and a
  path.
- `destination`: where the call goes (the catalog and the server's configuration, or the
  connection's own API host) and where the credential is placed.
- `headers`: the one rule set for request headers (names, values, the names dropped, matched
  in any case with `_` read as `-`), and which of the agent's headers reach the provider.
- `methods`: every method a request names (its line's and its overrides').
- `tokens`: credvault's own tokens never leave: a request that still carries one is refused.
- `redaction`: every injected secret, in each form a provider may write it, as `[REDACTED]`.
- `mutations`: a request on a GraphQL endpoint, judged by the mutations it selects.
- `answers`: the provider's answer as the agent receives it, and the failures of the call.
- `locations`: the provider's addresses in an answer (headers, JSON bodies) judged where they
  lead and moved onto the proxy.
- `redirects`: a redirect that leaves the service, followed without the credential or refused.
- `call`: the whole rule, from the agent's request to its audit event.
"""
