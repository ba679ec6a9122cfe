from django.core.management.base import CommandError

from providers.identifiers import SERVICE_RULE
from services.accounts import get_account
from services.agents import put_agent
from services.audit import Actor
from services.exceptions import AccountError, InvalidIdentifier
from services.grants import (
    GRANT_PATH_RULE,
    GrantSpec,
    base_errors,
    given_in_list,
    graphql_errors,
    option_errors,
)
from services.identifiers import service_identifier
from services.management.base import CredvaultCommand
from services.models import PROXY_METHODS, WHOLE_API, GrantAccess


def _grant_text(grant: GrantSpec) -> str:
    methods = "all methods" if grant.methods == PROXY_METHODS else ",".join(grant.methods)
    base = f", base {grant.base}" if grant.base else ""
    mutations = f", GraphQL {','.join(grant.graphql)}" if grant.graphql else ""
    return f"{grant.service} ({grant.access}, {methods}, {','.join(grant.paths)}{base}{mutations})"


class Command(CredvaultCommand):
    help = (
        "Create an agent of an account (or replace its grants) with the given services: "
        "brokered access by default, the plaintext read too with --read. --method, --path and "
        "--graphql apply to every --service. Recorded in the account's audit chain with the "
        "actor `cli`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account")
        parser.add_argument("name")
        parser.add_argument(
            "--service", action="append", default=[], help="A granted service; repeatable."
        )
        parser.add_argument(
            "--read", action="store_true", help="Also allow the plaintext read (access read)."
        )
        parser.add_argument(
            "--method",
            action="append",
            default=[],
            choices=PROXY_METHODS,
            help="An HTTP method allowed through the proxy; repeatable (default: all).",
        )
        parser.add_argument(
            "--path",
            action="append",
            default=[],
            help="A path prefix allowed through the proxy; repeatable (default: /).",
        )
        parser.add_argument(
            "--base",
            default="",
            help="The one base of each service allowed (router, host: a provider with more "
            "than one host); default: every base.",
        )
        parser.add_argument(
            "--graphql",
            action="append",
            default=[],
            metavar="MUTATION",
            help="A sensitive GraphQL mutation of the service allowed by name; repeatable "
            "(default: none).",
        )

    def handle(
        self,
        *args,
        account: str,
        name: str,
        service: list[str],
        read: bool,
        method: list[str],
        path: list[str],
        base: str,
        graphql: list[str],
        **options,
    ) -> None:
        access = GrantAccess.READ if read else GrantAccess.PROXY
        for prefix in path:
            if option_errors(access=access, methods=PROXY_METHODS, paths=[prefix]):
                raise CommandError(f"--path {prefix!r}: {GRANT_PATH_RULE}")
        try:
            owner = get_account(name=account)
            services = sorted({service_identifier(s) for s in service})
            grants = self._grants(services, access, method, path, base, graphql)
            # put_agent normalizes and checks the agent's name itself.
            put = put_agent(
                actor=Actor.command(owner.pk), name=name, services=given_in_list(grants)
            )
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except InvalidIdentifier:
            raise CommandError(f"agent names and services are {SERVICE_RULE}") from None
        verb = "created" if put.created else "updated"
        granted = "; ".join(map(_grant_text, put.agent.services)) or "no services"
        self.stdout.write(f"{verb} agent {put.agent.name} of {owner.name}: {granted}")

    @staticmethod
    def _grants(
        services: list[str],
        access: str,
        method: list[str],
        path: list[str],
        base: str,
        graphql: list[str],
    ) -> list[GrantSpec]:
        for each in services:
            for error in base_errors(service=each, base=base):
                raise CommandError(f"--base {base!r} for {each}: {error['message']}")
            for error in graphql_errors(service=each, graphql=graphql):
                raise CommandError(f"--graphql for {each}: {error['message']}")
        return [
            GrantSpec.given(
                each,
                access=access,
                methods=method or PROXY_METHODS,
                paths=path or (WHOLE_API,),
                base=base,
                graphql=graphql,
            )
            for each in services
        ]
