"""Storage: the only package that knows which database credvault runs on or holds SQL text.

- `queries.py`: the hot statements as plain functions (token lookup, list, agent read, the
  store's lock and writes, the audit append); plain values and frozen dataclasses in and out.
- `dialects.py`: their SQL text, what PostgreSQL and SQLite each run, side by side.
- `schema.py`: the SQLite audit-head trigger's DDL, for migration 0005.
- `checks.py`: start-up checks of the database (credvault.E007, credvault.E008).
- `connections.py`: a request's connections given back to the pool while it waits on a
  provider.
- `config.py`: `DATABASES` for each vendor, read by credvault/settings.py.
- `backends/`: the two database backends `DATABASES` names, each with a pool of connections per
  worker: SQLite with its writers queued on a file lock, PostgreSQL with a health check that
  costs no round trip.

Everything else uses the ORM.
"""
