from django.core.management.base import BaseCommand

from services.crypto import generate_key_entry


class Command(BaseCommand):
    help = (
        "Print a new KEYID:BASE64KEY entry for CREDVAULT_ENCRYPTION_KEYS. Put it first to seal "
        "new values with it, then run reencrypt."
    )
    requires_system_checks: list = []

    def handle(self, *args, **options) -> None:
        self.stdout.write(generate_key_entry())
