"""The catalog at start-up: credvault's file and the operator's CREDVAULT_EXTRA_CATALOG must
load, or every management command stops with the error naming the file, the entry and the
field (credvault.E017). The server loads the catalog before its first request instead
(credvault/wsgi.py)."""

from __future__ import annotations

from django.core.checks import Error, register

from providers.catalog import CatalogError, catalog

# The tag of this check alone: the commands that run no other check (generate_key,
# render_provider_table) still run this one.
CATALOG_TAG = "catalog"


@register(CATALOG_TAG)
def check_catalog(app_configs, **kwargs):
    try:
        catalog()
    except CatalogError as exc:
        return [
            Error(
                str(exc),
                hint="CREDVAULT_EXTRA_CATALOG's entries take the format of credvault's catalog "
                "(docs/agents.md, 'Brokered access').",
                id="credvault.E017",
            )
        ]
    return []
