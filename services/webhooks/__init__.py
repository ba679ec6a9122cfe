"""Events: signed webhooks sent from an outbox.

`events.raise_event` writes an event in the transaction of the change that causes it;
`endpoints` holds the account's endpoints and their secrets; `signing` the Standard Webhooks
signature; `delivery` one attempt and its schedule; `worker` the loop that claims endpoints.
"""
