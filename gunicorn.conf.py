"""gunicorn settings for `make run` and production; every value can be overridden on the command
line or with GUNICORN_CMD_ARGS. WEB_CONCURRENCY sets the number of workers."""

import gc
import os
import signal

from credvault.configuration import check_environment

# Every setting is checked here, in the master, before any worker forks: a bad value stops
# gunicorn once with one line and exit status 2, not each worker with a traceback.
_settings = check_environment(os.environ)
# gunicorn reads its two from the environment only, never from .env.
bind = os.environ.get("CREDVAULT_BIND") or "127.0.0.1:8000"

MAX_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """Two workers per core this process may run on, at most MAX_DEFAULT_WORKERS.

    Every request waits on the database at least twice (its token, its audit event); a second
    worker per core keeps the core busy while the first waits on PostgreSQL
    (docs/performance.md). gunicorn's documentation starts from about twice the cores. The
    ceiling keeps a large host from opening more database connections and memory (about 80 MB
    a worker) than a default should: set WEB_CONCURRENCY there, and where a container's CPU
    quota is below the cores it sees.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(2 * (cores or 1), MAX_DEFAULT_WORKERS))


workers = _settings["WEB_CONCURRENCY"] if os.environ.get("WEB_CONCURRENCY") else default_workers()
# gevent workers: each request runs in a greenlet, so a client that holds its body open, or a
# request waiting on a provider, waits without holding a worker; /healthz and the other
# requests go on being answered (scripts/slow_clients.py, docs/performance.md "Slow
# clients"). A greenlet runs until it waits on a socket, so a read costs what it would cost on
# a worker of its own; threads (gthread) would contend for the GIL and cost the reads a third
# of their rate.
worker_class = "gevent"
# Requests (and held client connections) a worker serves at once, waiting ones included.
worker_connections = 256
# One request per client connection: a kept-alive connection stays with the worker that
# accepted it, and gevent's workers accept greedily, so under keep-alive a few
# busy workers served most connections while others idled (p99 tens of times the median,
# docs/performance.md). nginx opens a connection per request by default as well.
keepalive = 0
# A held body ends after CREDVAULT_BODY_TIMEOUT seconds (services/api/wsgi.py); in production
# a buffering proxy reads bodies before gunicorn sees them (docs/production.md).
# A verification call may take CREDVAULT_VERIFY_TIMEOUT seconds; leave room above it.
timeout = 30
graceful_timeout = 20
# credvault writes its own access-log line per request (without secrets); gunicorn's is off.
accesslog = None
errorlog = "-"
# No control socket: credvault does not use gunicornc, and every instance on a host would
# otherwise share (and a stopping one delete) ~/.gunicorn/gunicorn.ctl.
control_socket_disable = True


def post_worker_init(worker) -> None:
    """gunicorn's own refusals (414, 431, a malformed request) as problem details, never HTML
    (services/api/serving.py). Then move what the worker loaded at start-up (Django and the
    apps: about 86,000 objects) out of the garbage collector's reach: a full collection
    otherwise walks all of them, pausing the worker for tens of milliseconds
    (docs/performance.md)."""
    from services.api import serving

    serving.install()
    quit_once(worker)
    refuse_without_keys(worker)
    gc.freeze()


# gunicorn's exit status of a worker that could not boot: the master stops rather than start
# another worker that would fail the same way.
WORKER_BOOT_ERROR = 3


def refuse_without_keys(worker) -> None:
    """The start-up self-check: the worker unwraps the canary's data key and opens the canary
    value before it serves; when that fails it logs one line naming the check's id and the
    cause and exits, and gunicorn stops (services/keys/canary.py)."""
    from django.db import DatabaseError

    from services.keys import canary

    try:
        found = canary.problem()
    except DatabaseError:
        return  # not migrated yet: `migrate` runs the same check
    if found is not None:
        check_id, message = found
        worker.log.error("%s: %s; this worker does not serve", check_id, message)
        raise SystemExit(WORKER_BOOT_ERROR)


def quit_once(worker) -> None:
    """A worker quits on the first SIGINT or SIGQUIT and ignores the next. Ctrl-C on `make run`
    sends SIGINT to the whole process group, so each worker had it from the terminal and then
    SIGQUIT from the master: the second quit raised SystemExit in a greenlet while the worker
    was already exiting, and gevent printed a traceback for each worker."""
    quit_now = worker.handle_quit
    quitting = False

    def handle_quit(sig, frame) -> None:
        nonlocal quitting
        if quitting:
            return
        quitting = True
        quit_now(sig, frame)

    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, handle_quit)
