"""gunicorn.conf.py, the settings `make run` and production serve with."""

from __future__ import annotations

import gc
import runpy

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
