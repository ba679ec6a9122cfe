"""gunicorn settings for `make run` and production; every value can be overridden on the command
line or with GUNICORN_CMD_ARGS. WEB_CONCURRENCY sets the number of workers."""

import gc
import os

bind = os.environ.get("CREDVAULT_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "sync"
# A verification call may take CREDVAULT_VERIFY_TIMEOUT seconds; leave room above it.
timeout = 30
graceful_timeout = 20
# credvault writes its own access-log line per request (without secrets); gunicorn's is off.
accesslog = None
errorlog = "-"


def post_worker_init(worker) -> None:
    """Move what the worker loaded at start-up (Django and the apps: about 86,000 objects) out
    of the garbage collector's reach. A full collection otherwise walks all of them, pausing
    the worker for tens of milliseconds (BENCHMARKS.md)."""
    gc.freeze()
