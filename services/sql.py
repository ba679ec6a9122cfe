"""Fixed SQL for the statements every request runs, and the one conversion they need.

The ORM compiles a query anew on each call, which costs more than running these small indexed
statements: the token lookup, the list of services and the agent read are therefore written
once here, from the models' metadata. Only quoted table and column names ever go into the
text; every value is bound as a parameter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from django.db import connection
from django.db.models import Model


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def as_datetime(value: datetime | str | None) -> datetime | None:
    """A datetime column as read by a plain cursor: PostgreSQL gives an aware datetime, SQLite
    a naive one (or its text, `YYYY-MM-DD HH:MM:SS[.ffffff]`) holding UTC, as Django stores it
    with USE_TZ."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def cached(build):
    """A statement built once per database vendor (tests switch vendors between runs)."""
    memo = lru_cache(maxsize=4)(lambda vendor: build())
    return lambda: memo(connection.vendor)


def fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
