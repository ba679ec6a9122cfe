from django.core.management.base import BaseCommand, CommandError

from services.accounts import AccountError, get_account
from services.agents import put_agent
from services.audit import AuditContext
from services.identifiers import InvalidIdentifier, normalize_service


class Command(BaseCommand):
    help = (
        "Create an agent of an account (or replace its grants) with the given services. "
        "Recorded in the account's audit chain with the actor `cli`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("name")
        parser.add_argument(
            "--service", action="append", default=[], help="A granted service; repeatable."
        )

    def handle(self, *args, account: str, name: str, service: list[str], **options) -> None:
        try:
            owner = get_account(name=account)
            agent_name = normalize_service(name)
            services = sorted({normalize_service(s) for s in service})
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except InvalidIdentifier:
            raise CommandError(
                "agent names and services are 1 to 64 characters of a-z, 0-9, '.' and '-'"
            ) from None
        view, created = put_agent(
            account=owner,
            name=agent_name,
            services=services,
            context=AuditContext.for_command(owner.pk),
        )
        verb = "created" if created else "updated"
        granted = ", ".join(view.services) or "no services"
        self.stdout.write(f"{verb} agent {view.name} of {owner.name}: {granted}")
