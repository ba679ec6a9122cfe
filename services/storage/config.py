"""The database settings of credvault's backends, from django-environ's parsed DATABASE_URL.
Imported by credvault/settings.py: nothing here may import Django's models or connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BACKENDS = "services.storage.backends"


def database_settings(config: dict[str, Any], *, base_dir: Path) -> dict[str, Any]:
    """`config` with credvault's backend of its vendor and the options it relies on."""
    db = dict(config)
    db["OPTIONS"] = dict(db.get("OPTIONS", {}))
    if db["ENGINE"] == "django.db.backends.sqlite3":
        # A relative SQLite path is relative to the project, not to the working directory.
        if db["NAME"] != ":memory:" and not Path(db["NAME"]).is_absolute():
            db["NAME"] = str(base_dir / db["NAME"])
        # Several workers write to one file: WAL lets readers run beside the writer, and an
        # IMMEDIATE transaction takes the write lock at BEGIN, since upgrading a read lock midway
        # fails without waiting (docs/production.md#sqlite-with-several-workers).
        db["ENGINE"] = f"{BACKENDS}.sqlite"
        db["OPTIONS"].update(
            {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    elif db["ENGINE"] == "django.db.backends.postgresql":
        db["ENGINE"] = f"{BACKENDS}.postgresql"  # a health check without a round trip
        # Values bound by the server, and statements run five times prepared by psycopg: the
        # server stops parsing and planning the same few statements on every request
        # (docs/performance.md). Django turns psycopg's prepared statements off unless OPTIONS
        # names a threshold. Behind PgBouncer in transaction mode, prepared statements need
        # PgBouncer 1.21 or later with max_prepared_statements set.
        db["OPTIONS"].setdefault("server_side_binding", True)
        db["OPTIONS"].setdefault("prepare_threshold", 5)
    # Closed at the request's end, the backends give it back to the worker's idle ones instead
    # (backends/idle.py): a connection kept per greenlet would live and die with each client.
    db["CONN_MAX_AGE"] = 0
    db["CONN_HEALTH_CHECKS"] = False  # the backends check a connection as they take it
    return db
