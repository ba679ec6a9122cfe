import argparse
import re

from django.core.management.base import CommandError

from services.accounts import named_or_all
from services.audit import Break, verify_chain, verify_completions
from services.checkpoints import Contradiction, check_expected, verify_checkpoints
from services.crypto import KeyRingError
from services.exceptions import AccountError
from services.management.base import CredvaultCommand
from services.models import Account

EXPECTED = re.compile(r"([1-9][0-9]{0,18}):([0-9a-f]{64})")


def expected_point(text: str) -> tuple[int, str]:
    """An --expect value; refused with ArgumentTypeError, which argparse reports as a usage
    error on one line (a CommandError raised here would escape as a traceback)."""
    match = EXPECTED.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            "takes SEQ:DIGEST, the event's number and its whole digest (64 lowercase hex "
            "characters), as checkpoint_audit and the credvault.audit log print them"
        )
    return int(match[1]), match[2]


class Command(CredvaultCommand):
    help = (
        "Verify the audit of one account, or of every account: every event's digest, every "
        "signed checkpoint (CREDVAULT_AUDIT_KEYS), that the chain passes through each, and "
        "the signed completion of every brokered call written before it left. "
        "Names the first broken link or contradicted checkpoint and exits non-zero. "
        "--expect SEQ:DIGEST (with an account) also checks a checkpoint kept outside the "
        "database, such as a line of the credvault.audit log or of checkpoint_audit."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("account", nargs="?")
        parser.add_argument(
            "--expect",
            action="append",
            default=[],
            type=expected_point,
            metavar="SEQ:DIGEST",
            help="the event SEQ of the account must have DIGEST (repeatable)",
        )

    def handle(self, *args, account: str | None, expect: list[tuple[int, str]], **options):
        if expect and not account:
            raise CommandError("--expect needs the account it belongs to")
        try:
            failures = [
                failure
                for owner in named_or_all(account)
                if (failure := self.verify(owner, expect))
            ]
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        except KeyRingError as exc:
            raise CommandError(f"CREDVAULT_AUDIT_KEYS is invalid: {exc}") from None
        if failures:
            raise CommandError(f"{len(failures)} broken chain(s)")

    def verify(self, owner: Account, expect: list[tuple[int, str]]) -> str:
        """One account: prints what holds, or writes the failure to stderr and returns it."""
        failure: Break | Contradiction | None
        count, failure = verify_chain(owner)
        signed = 0
        if failure is None:
            signed, failure = verify_checkpoints(owner)
        if failure is None:
            failure = verify_completions(owner)
        for seq, digest in expect:
            if failure is None:
                failure = check_expected(owner, seq, digest)
        if failure is not None:
            self.stderr.write(str(failure))
            return str(failure)
        self.stdout.write(
            f"account {owner.name}: {count} events, chain intact, {signed} signed checkpoint(s) "
            f"hold, {len(expect)} expected point(s) hold, head {owner.audit_head} at seq "
            f"{owner.audit_seq}"
        )
        return ""
