"""Liveness and readiness, without authentication."""

from __future__ import annotations

import logging

from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse

from services.api.errors import render, safe_methods_only
from services.crypto import KeyRingError
from services.exceptions import KeyManagerUnavailable, ServiceUnavailable
from services.keys import canary
from services.sealed import outside_ring, ring_ids

logger = logging.getLogger("credvault.health")


@safe_methods_only
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers. Touches neither the database nor the keys."""
    return JsonResponse({"status": "ok"})


@safe_methods_only
def readyz(request: HttpRequest):
    """Ready when the database answers, the key ring holds every key id that values sealed
    before data keys name, and the canary opens (its data key cached, or unwrapped now)."""
    try:
        ids = ring_ids()
    except KeyRingError:
        logger.error("not ready: CREDVAULT_ENCRYPTION_KEYS is missing or malformed")
        return render(ServiceUnavailable("The key ring is not configured."))
    try:
        # One probe per kind of sealed value, which also proves the database answers; the
        # missing ids are read only where there are any.
        missing = outside_ring(ids)
    except DatabaseError as exc:
        logger.error("not ready: database unavailable (%s)", type(exc).__name__)
        return render(ServiceUnavailable("The database cannot be reached."))
    if missing:
        for kind, (count, names) in missing.items():
            logger.error(
                "not ready: %d %s value(s) sealed with key ids not in the key ring: %s",
                count,
                kind,
                ", ".join(names),
            )
        return render(
            ServiceUnavailable("Stored values are sealed with keys missing from the key ring.")
        )
    try:
        found = canary.problem(fresh=False)
    except DatabaseError as exc:
        logger.error("not ready: database unavailable (%s)", type(exc).__name__)
        return render(ServiceUnavailable("The database cannot be reached."))
    if found is not None:
        check_id, message = found
        logger.error("not ready: %s (%s)", message, check_id)
        return render(KeyManagerUnavailable())
    return JsonResponse({"status": "ready"})
