"""gunicorn.conf.py, the settings `make run` and production serve with."""

from __future__ import annotations

import gc
import os
import runpy

import pytest

from scripts.harness import BASE_DIR


def test_a_worker_freezes_what_it_loaded_at_start_up():
    config = runpy.run_path(str(BASE_DIR / "gunicorn.conf.py"))
    assert config["worker_class"] == "sync"
    gc.unfreeze()
    try:
        config["post_worker_init"](worker=None)
        # Everything alive now, this test run's modules included, is out of the collector's
        # generations.
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()


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
