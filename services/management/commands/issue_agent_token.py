from django.core.management.base import CommandError

from services.accounts import get_account, refuse_if_deactivated
from services.agents import issue_agent_token
from services.audit import Actor
from services.exceptions import AccountError, AgentNotFound, InvalidIdentifier
from services.management.base import CredvaultCommand, manage_command
from services.management.expiry import add_expires_in, lifetime


class Command(CredvaultCommand):
    help = (
        "Issue a token for an agent. Prints the token alone on stdout, once: "
        f"AGENT_TOKEN=$({manage_command()} issue_agent_token demo my-agent)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("name")
        add_expires_in(parser)

    def handle(self, *args, account: str, name: str, expires_in: int | None, **options) -> None:
        duration = lifetime(expires_in)
        try:
            owner = get_account(name=account)
            refuse_if_deactivated(owner)
            issued = issue_agent_token(
                actor=Actor.command(owner.pk),
                name=name,
                expires_in=duration,
            ).issued
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except (AgentNotFound, InvalidIdentifier):
            raise CommandError(f"no agent named {name!r} in {owner.name}") from None
        self.stdout.write(issued.plaintext)
        self.stderr.write(f"issued {issued.token.prefix} for agent {name}; shown only once")
