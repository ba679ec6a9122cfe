from services.management.commands import deactivate_account


class Command(deactivate_account.Command):
    help = "Reactivate a deactivated account. Recorded in its audit chain (actor `cli`)."
    active = True
