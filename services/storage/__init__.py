"""Storage: the only package that knows which database credvault runs on or holds SQL text.

- `queries.py`: the hot statements as plain functions, plain values and frozen dataclasses in
  and out; `dialects.py`: their SQL text for PostgreSQL and SQLite, side by side.
- `transactions.py`: the account lock order (`account_transaction`).
- `schema.py`: the SQLite audit-head trigger's DDL, for migration 0005.
- `checks.py`: start-up checks of the database (credvault.E007, credvault.E008).
- `connections.py`: a request's connections given back while it waits on a provider.
- `config.py`: `DATABASES` for each vendor, read by credvault/settings.py.
- `backends/`: the two database backends, each with a pool of connections per worker.

Everything else uses the ORM.
"""
