from django.core.management.base import CommandError
from django.utils import timezone

from providers.identifiers import SERVICE_RULE
from services.accounts import get_account
from services.exceptions import AccountError, InvalidIdentifier
from services.identifiers import agent_name
from services.management.base import CredvaultCommand
from services.management.listing import token_status, when
from services.models import Agent, AgentToken


class Command(CredvaultCommand):
    help = (
        "List the agent tokens of an account, or of one of its agents (prefixes only); a deleted "
        "agent's tokens are listed by its name too."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("agent", nargs="?")

    def handle(self, *args, account: str, agent: str | None, **options) -> None:
        try:
            owner = get_account(name=account)
            tokens = AgentToken.objects.filter(account=owner)
            if agent:
                name = agent_name(agent)
                tokens = tokens.filter(agent_name=name)
                # An agent's tokens outlive it: a name that neither an agent nor a token has
                # is a mistake, not an empty list.
                if not (Agent.objects.filter(account=owner, name=name).exists() or tokens.exists()):
                    raise CommandError(f"no agent named {agent!r} in {owner.name}")
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except InvalidIdentifier:
            raise CommandError(f"an agent name is {SERVICE_RULE}") from None
        now = timezone.now()
        self.stdout.write(
            f"{'PREFIX':<14}{'AGENT':<20}{'CREATED':<21}{'LAST USED':<21}{'EXPIRES':<21}STATUS"
        )
        for token in tokens.select_related("account").order_by("agent_name", "created_at"):
            self.stdout.write(
                f"{token.prefix:<14}{token.agent_name[:19]:<20}{when(token.created_at):<21}"
                f"{when(token.last_used_at):<21}{when(token.expires_at):<21}"
                f"{token_status(token, now)}"
            )
