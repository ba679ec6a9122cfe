from django.core.management.base import BaseCommand, CommandError

from providers.identifiers import SERVICE_RULE, InvalidIdentifier, normalize_service
from services.accounts import AccountError, get_account
from services.agents import put_agent
from services.audit import Actor


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
            raise CommandError(f"agent names and services are {SERVICE_RULE}") from None
        put = put_agent(actor=Actor.command(owner.pk), name=agent_name, services=services)
        verb = "created" if put.created else "updated"
        granted = ", ".join(put.agent.services) or "no services"
        self.stdout.write(f"{verb} agent {put.agent.name} of {owner.name}: {granted}")
