# The two commands a newcomer needs: `make run` and `make test`. Everything else is their set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

SOAK_SECONDS ?= 60
SLOW_SECONDS ?= 10
# The slow calls of `make slow-clients`: the test operation, or brokered calls (proxy).
SLOW_VIA ?= test
BENCH_ARGS ?=
# The key managers `make bench` compares (scripts/bench_key_managers.py).
KEY_MANAGERS ?= local,aws-kms,pkcs11
# Where `make run` serves; gunicorn.conf.py reads it too.
CREDVAULT_BIND ?= 127.0.0.1:8000
export CREDVAULT_BIND

.PHONY: run test test-all demo lint format setup env-file migrate clean fuzz openapi client-walk soak slow-clients bench softhsm2

# The settings and the address are checked first: a bad value or a taken port stops here, in
# one line, before any token is printed (gunicorn's own WEB_CONCURRENCY would be a traceback).
run: setup
	@$(PY) -m credvault.configuration --check
	@$(PY) scripts/check_bind.py
	@$(PYTHON) scripts/write_env.py --follow-bind .env
	$(PY) manage.py migrate --no-input
	$(PY) manage.py bootstrap_demo --base-url http://$(CREDVAULT_BIND)
	$(SERVE)

# gunicorn in the foreground and the webhook worker beside it, stopped when gunicorn stops:
# Ctrl-C reaches both (the worker ends after its attempts in flight), and the trap ends the
# worker whatever else stopped gunicorn. The shell ignores the signal itself so that it waits
# for gunicorn and then runs the trap.
SERVE = $(PY) manage.py deliver_webhooks & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker' EXIT; trap : INT TERM; \
	$(BIN)/gunicorn -c gunicorn.conf.py credvault.wsgi:application

# PYTEST_ARGS passes options to pytest (.ci/run: a JUnit report for its totals). The tests are
# spread over the cores (pytest-xdist): a module's tests, or a class's, stay on one worker, so
# that the servers their fixtures start are started once; an `xdist_group` stays together too.
PYTEST_ARGS ?=
PYTEST_PARALLEL := -n auto --dist loadgroup

# The fast tier: every test not marked `slow` (CONTRIBUTING.md, "Tests"), quiet: a failure or an
# error is reported, a skip only counted.
test: setup lint softhsm2
	$(BIN)/pytest -q -rfE -m "not slow" $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# Every test, the slow ones too: what CI runs.
test-all: setup lint softhsm2
	$(BIN)/pytest -q $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The pkcs11 key manager's tests run against a token of Debian's SoftHSM2
# (tests/support/key_managers.py), installed here where it can be (as root, with apt-get);
# elsewhere those tests are skipped, with a message. The KMS of the aws-kms key manager's tests
# is moto's server, from the `dev` extra.
SOFTHSM2_MODULE := /usr/lib/softhsm/libsofthsm2.so
softhsm2:
	@{ command -v softhsm2-util >/dev/null 2>&1 && [ -f $(SOFTHSM2_MODULE) ]; } \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& (apt-get update -qq && apt-get install -y -qq softhsm2) >/dev/null 2>&1; } \
		|| echo "softhsm2 is not installed (apt-get install softhsm2, as root): the pkcs11 key manager's tests are skipped"

# An agent calls GitHub through credvault in five steps, offline: a throwaway server and a
# stand-in GitHub on 127.0.0.1 (scripts/demo.py).
demo: setup
	$(PY) -m scripts.demo

# schemathesis against a live gunicorn over every operation of the OpenAPI document.
fuzz: setup
	$(PY) -m scripts.fuzz_api

# openapi-spec-validator on the document a live gunicorn serves, as JSON and as YAML.
openapi: setup
	$(PY) -m scripts.validate_openapi

# A client generated from the served document (openapi-python-client) walks the docs' walk-through
# (docs/api.md, docs/agents.md, docs/webhooks.md).
client-walk: setup
	$(PY) -m scripts.client_walk

# Concurrent clients for SOAK_SECONDS against gunicorn on PostgreSQL (127.0.0.1:5432).
soak: setup
	$(PY) -m scripts.soak --seconds $(SOAK_SECONDS)

# /healthz and the list probed while 16 clients hold bodies open and 32 calls wait 2 s each on
# a slow provider (scripts/slow_clients.py): fails when a probe goes unanswered. CI runs it for a
# few seconds; the figures are in docs/performance.md, "Slow clients".
slow-clients: setup
	$(PY) -m scripts.slow_clients --seconds $(SLOW_SECONDS) --via $(SLOW_VIA)

# Throughput and latency of each endpoint beside a plain Django view, on SQLite and PostgreSQL,
# then the brokered call beside a direct call and a naive forwarder (scripts/bench_proxy.py),
# against each backend's targets (TARGETS in scripts/bench.py), and the agent read of 16 agents
# of one account beside that of 16 accounts (docs/performance.md). BENCH_ARGS passes options, e.g.
# "--rounds 1 --seconds 2" for a short run. Uses wrk from the system's packages, installing it
# where it can, else a Python load generator. Then the store and the agent read under each key
# manager of KEY_MANAGERS side by side, their calls per 1,000 reads and rotate_keys's work
# (scripts/bench_key_managers.py).
bench: setup softhsm2
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null 2>&1; } \
		|| echo "wrk is not installed: the Python load generator is used"
	$(PY) -m scripts.bench $(BENCH_ARGS)
	$(PY) -m scripts.bench_proxy
	$(PY) -m scripts.bench_key_managers --key-manager $(KEY_MANAGERS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# mypy with the Django and DRF plugins over services, providers and credvault ([tool.mypy]).
.PHONY: typecheck
typecheck: setup
	$(BIN)/mypy

setup: $(VENV)/.installed env-file var

migrate: setup
	$(PY) manage.py migrate --no-input

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=68"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# Written once, never overwritten: it holds the key that opens every stored credential. A
# setting that a later version requires (CREDVAULT_AUDIT_KEYS) is appended to an older file.
env-file:
	@$(PYTHON) scripts/write_env.py .env

var:
	mkdir -p var

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
