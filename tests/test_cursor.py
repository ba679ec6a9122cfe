"""The cursor both backends make (credvault/cursor.py): Django's, with its fetches and close as
methods, and the driver's errors still raised as Django's."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import OperationalError, connection

from credvault.cursor import CursorWrapper

pytestmark = pytest.mark.django_db

# The second row overflows: SQLite reports it while the rows are fetched, not at execute.
OVERFLOW_ON_FETCH = "SELECT abs(x) FROM (SELECT 1 AS x UNION ALL SELECT -9223372036854775808)"


def test_both_backends_make_the_cursor():
    with connection.cursor() as cursor:
        assert type(cursor) is CursorWrapper
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_cursor_is_closed_at_the_end_of_its_block():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        raw = cursor.cursor
    assert raw.closed if hasattr(raw, "closed") else _sqlite_closed(raw)


def _sqlite_closed(raw) -> bool:
    try:
        raw.fetchall()
    except sqlite3.ProgrammingError:
        return True
    return False


@pytest.mark.parametrize("fetch", ["fetchall", "fetchone"])
def test_an_error_met_while_fetching_is_djangos(fetch):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL reports such an error at execute")
    with connection.cursor() as cursor:
        cursor.execute(OVERFLOW_ON_FETCH)
        with pytest.raises(OperationalError, match="integer overflow"):
            getattr(cursor, fetch)()
