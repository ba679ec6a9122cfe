"""Envelope encryption: each account's values are sealed by the account's own data keys
(services/keys/data_keys.py), which a key manager wraps (services/keys/managers.py).
`envelope` seals and opens one value; `canary` is the start-up self-check."""
