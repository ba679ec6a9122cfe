from providers.checks import CATALOG_TAG
from services.crypto import generate_key_entry
from services.management.base import CredvaultCommand


class Command(CredvaultCommand):
    help = (
        "Print a new KEYID:BASE64KEY entry for CREDVAULT_ENCRYPTION_KEYS. Put it first to seal "
        "new values with it, then run reencrypt."
    )
    # It runs before any key is configured (docs/production.md): only the catalog's check.
    requires_system_checks = [CATALOG_TAG]

    def handle(self, *args, **options) -> None:
        self.stdout.write(generate_key_entry())
