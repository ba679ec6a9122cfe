"""Each worker's idle database connections (services/storage/backends/idle.py): a request's
connection is given back at its end and taken by the next request, whichever greenlet serves
it; never inside a transaction, never to another database, never across a fork."""

from __future__ import annotations

import os

import pytest
from django.db import connection, transaction

from services.storage.backends.idle import IdleConnections


class Closable:
    closed = False

    def close(self) -> None:
        self.closed = True


SQLITE_A = {"ENGINE": "sqlite", "NAME": "/a.sqlite3"}


def test_the_last_connection_given_back_is_taken_first():
    idle = IdleConnections(limit=2)
    first, second = Closable(), Closable()
    assert idle.give(SQLITE_A, first)
    assert idle.give(SQLITE_A, second)
    assert idle.take(SQLITE_A) is second
    assert idle.take(SQLITE_A) is first
    assert idle.take(SQLITE_A) is None


def test_beyond_the_limit_the_caller_closes_it():
    idle = IdleConnections(limit=1)
    assert idle.give(SQLITE_A, Closable())
    assert not idle.give(SQLITE_A, Closable())


def test_a_connection_is_never_taken_for_another_database():
    idle = IdleConnections()
    idle.give(SQLITE_A, Closable())
    assert idle.take({**SQLITE_A, "NAME": "/b.sqlite3"}) is None
    assert idle.take({"ENGINE": "postgresql", "NAME": "x", "HOST": "h", "PORT": "5432"}) is None


def test_a_child_process_never_takes_its_parents_connections(monkeypatch):
    idle = IdleConnections()
    inherited = Closable()
    idle.give(SQLITE_A, inherited)
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in the child after fork()
    assert idle.take(SQLITE_A) is None
    idle.close_all()
    assert not inherited.closed  # untouched: closing it could disturb the parent's session


def test_close_all_closes_every_idle_connection():
    idle = IdleConnections()
    connections = [Closable(), Closable()]
    for each in connections:
        idle.give(SQLITE_A, each)
    idle.close_all()
    assert all(each.closed for each in connections)
    assert idle.take(SQLITE_A) is None


@pytest.mark.django_db(transaction=True)
def test_the_next_request_takes_the_connection_the_last_one_gave_back():
    connection.ensure_connection()
    raw = connection.connection
    connection.close()  # what Django does at the end of each request (CONN_MAX_AGE 0)
    connection.ensure_connection()
    assert connection.connection is raw


@pytest.mark.django_db(transaction=True)
def test_a_connection_closed_inside_a_transaction_is_not_given_back():
    connection.ensure_connection()
    raw = connection.connection
    with transaction.atomic():
        connection.close()  # a broken request: its transaction never ends on this connection
    connection.ensure_connection()
    assert connection.connection is not raw


@pytest.mark.django_db
def test_an_idle_sqlite_connection_to_a_replaced_file_is_not_taken(tmp_path):
    """A restored backup, or a test database made again at one path: a connection opened on
    the old file answered `disk I/O error`."""
    import sqlite3

    from services.storage.backends.sqlite.base import DatabaseWrapper

    path = tmp_path / "replaced.sqlite3"
    settings_dict = {**connection.settings_dict, "NAME": str(path)}
    if connection.vendor != "sqlite":
        settings_dict = {
            **settings_dict,
            "ENGINE": "services.storage.backends.sqlite",
            "OPTIONS": {},
            "HOST": "",
            "PORT": "",
            "USER": "",
        }
    wrapper = DatabaseWrapper(settings_dict, alias="replaced")
    wrapper.ensure_connection()
    first = wrapper.connection
    wrapper.close()
    wrapper.ensure_connection()
    assert wrapper.connection is first  # the same file: taken again
    wrapper.close()
    path.unlink()
    sqlite3.connect(path).close()
    wrapper.ensure_connection()
    assert wrapper.connection is not first
    wrapper.close()
