"""Liveness and readiness, without authentication (CONTRACT 9)."""

from __future__ import annotations

import logging

from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse

from services.api.errors import render, safe_methods_only
from services.crypto import KeyRingError, key_ring
from services.exceptions import ServiceUnavailable
from services.models import CredentialField

logger = logging.getLogger("credvault.health")


@safe_methods_only
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers. Touches neither the database nor the keys."""
    return JsonResponse({"status": "ok"})


@safe_methods_only
def readyz(request: HttpRequest):
    """Ready when the database answers and the key ring holds every key id in use."""
    try:
        ring_ids = key_ring().ids
    except KeyRingError:
        logger.error("not ready: CREDVAULT_ENCRYPTION_KEYS is missing or malformed")
        return render(ServiceUnavailable("The key ring is not configured."))
    try:
        # One indexed probe, which also proves the database answers; the full list of missing
        # ids is read only when there are any.
        orphaned = CredentialField.objects.exclude(key_id__in=ring_ids)
        if orphaned.exists():
            missing = sorted(set(orphaned.values_list("key_id", flat=True).distinct()))
            logger.error(
                "not ready: key ids in use but not in the key ring: %s", ", ".join(missing)
            )
        else:
            missing = []
    except DatabaseError as exc:
        logger.error("not ready: database unavailable (%s)", type(exc).__name__)
        return render(ServiceUnavailable("The database cannot be reached."))
    if missing:
        return render(
            ServiceUnavailable("Stored credentials are sealed with keys missing from the key ring.")
        )
    return JsonResponse({"status": "ready"})
