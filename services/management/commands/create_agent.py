import argparse
from dataclasses import replace
from datetime import datetime

from django.core.management.base import CommandError

from providers.identifiers import SERVICE_RULE
from services.accounts import get_account, refuse_if_deleted
from services.agents import put_agent
from services.audit import Actor
from services.exceptions import AccountError, InvalidIdentifier
from services.grants import (
    GRANT_PATH_RULE,
    MAX_APPROVE_RULES,
    ApproveRule,
    GrantSpec,
    approve_errors,
    base_errors,
    expiry_errors,
    given_in_list,
    graphql_errors,
    option_errors,
)
from services.identifiers import service_identifier
from services.management.base import CredvaultCommand
from services.models import PROXY_METHODS, WHOLE_API, GrantAccess
from services.times import RFC3339_RULE, parse_rfc3339, rfc3339

EVERY = "*"


def _rule_text(rule: ApproveRule) -> str:
    methods = ",".join(rule.methods) if rule.methods is not None else EVERY
    return methods if rule.paths is None else f"{methods}:{','.join(rule.paths)}"


def _grant_text(grant: GrantSpec) -> str:
    methods = "all methods" if grant.methods == PROXY_METHODS else ",".join(grant.methods)
    base = f", base {grant.base}" if grant.base else ""
    mutations = f", GraphQL {','.join(grant.graphql)}" if grant.graphql else ""
    until = f", until {rfc3339(grant.expires_at)}" if grant.expires_at else ""
    asks = f", approve {' '.join(map(_rule_text, grant.approve))}" if grant.approve else ""
    options = f"{base}{mutations}{until}{asks}"
    return f"{grant.service} ({grant.access}, {methods}, {','.join(grant.paths)}{options})"


def _moment(text: str) -> datetime:
    moment = parse_rfc3339(text)
    if moment is None:
        raise argparse.ArgumentTypeError(f"{text!r}: {RFC3339_RULE}")
    return moment


def _approve_rule(text: str) -> ApproveRule:
    """`METHODS[:PATHS]`, each a comma-separated list; `*` (or nothing) before the colon for
    every method, no colon for every path: `POST:/repos`, `POST,DELETE`, `*:/user/keys`, `*`."""
    methods_text, colon, paths_text = text.partition(":")
    methods = None if methods_text.strip() in ("", EVERY) else methods_text.split(",")
    paths = paths_text.split(",") if colon else None
    rule = ApproveRule.given(methods=methods, paths=paths)
    for error in approve_errors(approve=[rule], granted=PROXY_METHODS):
        raise argparse.ArgumentTypeError(f"{text!r}: {error['message']}")
    return rule


class Command(CredvaultCommand):
    help = (
        "Create an agent of an account (or replace its grants) with the given services: "
        "brokered access by default, the plaintext read too with --read. --method, --path and "
        "--graphql, --expires-at and --approve apply to every --service. Recorded in the "
        "account's audit chain with the actor `cli`."
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
        parser.add_argument(
            "--expires-at",
            type=_moment,
            metavar="RFC3339",
            help="When the grants expire, such as 2026-12-01T09:00:00Z; past it each refuses "
            "as if absent (default: never).",
        )
        parser.add_argument(
            "--approve",
            action="append",
            default=[],
            type=_approve_rule,
            metavar="METHODS[:PATHS]",
            help="Calls that need a member's approval: comma-separated methods (`*` for every "
            "method), then optionally `:` and comma-separated path prefixes (none: every "
            "path), such as POST:/repos or '*'; repeatable (default: none).",
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
        expires_at: datetime | None,
        approve: list[ApproveRule],
        **options,
    ) -> None:
        access = GrantAccess.READ if read else GrantAccess.PROXY
        for prefix in path:
            if option_errors(access=access, methods=PROXY_METHODS, paths=[prefix]):
                raise CommandError(f"--path {prefix!r}: {GRANT_PATH_RULE}")
        if expires_at is not None:
            for error in expiry_errors(expires_at=expires_at):
                raise CommandError(f"--expires-at {rfc3339(expires_at)}: {error['message']}")
        if len(approve) > MAX_APPROVE_RULES:
            raise CommandError(f"--approve: at most {MAX_APPROVE_RULES} rules")
        for rule in approve:
            for error in approve_errors(approve=[rule], granted=method or PROXY_METHODS):
                raise CommandError(f"--approve {_rule_text(rule)!r}: {error['message']}")
        try:
            owner = get_account(name=account)
            refuse_if_deleted(owner)
            services = sorted({service_identifier(s) for s in service})
            grants = [
                replace(grant, expires_at=expires_at, approve=tuple(approve))
                for grant in self._grants(services, access, method, path, base, graphql)
            ]
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
