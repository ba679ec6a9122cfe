"""The local-memory cache (`CACHE_URL=locmem://`, the default), without memcached's key checks.

Django checks every key against what memcached refuses (more than 250 characters, spaces,
control characters) on every operation and warns, so that code written against one backend
still runs on memcached. A local-memory cache is a dict in the worker: it takes any key.
Every rate-limited request makes one or two such operations, and the check cost more than
the rest of each (BENCHMARKS.md). Django's documentation on cache key warnings names this
way to change it: subclass the backend and override `validate_key`. credvault's own keys
pass the check anyway (tests/test_errors.py), so nothing changes on another backend.
"""

from __future__ import annotations

from django.core.cache.backends import locmem


class LocMemCache(locmem.LocMemCache):
    def validate_key(self, key: str) -> None:
        """Any key: this cache is the worker's own memory."""
