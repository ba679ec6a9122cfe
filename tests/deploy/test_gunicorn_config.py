"""gunicorn.conf.py, the settings `make run` and production serve with."""

from __future__ import annotations

import gc
import os
import runpy
import signal
from types import SimpleNamespace

import pytest

from tests.support.harness import BASE_DIR, Gunicorn, request, server_env
from tests.support.helpers import database_url


@pytest.mark.django_db
def test_a_worker_answers_its_own_errors_as_problems_and_freezes_what_it_loaded(monkeypatch):
    from gunicorn import util

    from services.api import serving
    from services.models import KeyCanary

    config = runpy.run_path(str(BASE_DIR / "gunicorn.conf.py"))
    assert config["worker_class"] == "gevent"
    assert config["keepalive"] == 0
    monkeypatch.setattr(util, "write_error", util.write_error)  # restored after the test
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGQUIT)}
    quits = []
    worker = SimpleNamespace(handle_quit=lambda sig, frame: quits.append(sig))
    gc.unfreeze()
    try:
        config["post_worker_init"](worker=worker)
        assert util.write_error is serving.write_problem
        # The start-up self-check ran: the first start sealed the canary it opened.
        assert KeyCanary.objects.count() == 1
        # Everything alive now, this test run's modules included, is out of the collector's
        # generations.
        assert gc.get_freeze_count() > 10_000
        # A worker quits once: Ctrl-C's SIGINT and then the master's SIGQUIT quit it once
        # (tests/deploy/test_make_run.py runs it).
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        signal.getsignal(signal.SIGQUIT)(signal.SIGQUIT, None)
        assert quits == [signal.SIGINT]
    finally:
        gc.unfreeze()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _config(monkeypatch, *, cores: int, web_concurrency: str | None = None) -> dict:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    if web_concurrency is None:
        monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    else:
        monkeypatch.setenv("WEB_CONCURRENCY", web_concurrency)
    return runpy.run_path(str(BASE_DIR / "gunicorn.conf.py"))


@pytest.mark.parametrize(("cores", "workers"), [(1, 2), (2, 4), (3, 6), (4, 8), (64, 8)])
def test_two_workers_per_usable_core_by_default_at_most_eight(monkeypatch, cores, workers):
    assert _config(monkeypatch, cores=cores)["workers"] == workers


def test_web_concurrency_sets_the_number_of_workers(monkeypatch):
    assert _config(monkeypatch, cores=2, web_concurrency="3")["workers"] == 3
    # Set but empty, as an unset variable in some deployment tools: the default.
    assert _config(monkeypatch, cores=2, web_concurrency="")["workers"] == 4


def test_no_instance_opens_a_control_socket(tmp_path):
    """Instances on one host shared ~/.gunicorn/gunicorn.ctl; stopping one deleted another's."""
    env = server_env(f"sqlite:///{tmp_path / 'db.sqlite3'}", HOME=str(tmp_path))
    env.pop("XDG_RUNTIME_DIR", None)
    with Gunicorn(env, workers=1) as server:
        status, _, _ = request("GET", f"{server.url}/healthz")
    assert status == 200
    assert not list(tmp_path.rglob("*.ctl"))


@pytest.mark.django_db(transaction=True)
def test_head_requests_get_no_body_and_gunicorn_logs_no_warning(alice_account_and_token, tmp_path):
    _, token = alice_account_and_token
    log = tmp_path / "gunicorn.log"
    with Gunicorn(server_env(database_url(), LOG_LEVEL="INFO"), workers=1, log=log) as server:
        for path in ("/healthz", "/api/v1/services", "/api/v1/schema"):
            status, headers, body = request("HEAD", f"{server.url}{path}", token=token)
            assert (status, body) == (200, b""), path
            get_status, _, got = request("GET", f"{server.url}{path}", token=token)
            assert get_status == 200
            assert int(headers["Content-Length"]) == len(got), path
    assert "no-body response" not in log.read_text()
