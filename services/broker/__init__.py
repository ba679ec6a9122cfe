"""Brokered access: an agent asks credvault to call its provider, credvault adds the credential
on the way out, and the agent sees the provider's answer only, with every injected secret
redacted from it.

One module per concern, in the order a request meets them: `paths` (the path checked, encoded,
matched against a grant), `destination` (where the call goes, where the credential is placed),
`headers` (the one rule set for request headers), `methods` (every method a request names),
`tokens` (credvault's own tokens never leave), `redaction`, `mutations` (a GraphQL request
judged by the mutations it selects), `answers` (the answer the agent gets, the failures),
`locations` (the provider's addresses in an answer, moved onto the proxy), `redirects`
(followed without the credential or refused), `call` (the whole rule, to its audit event).
"""
