"""Bearer tokens: generation, format check and digest.

A token is `<kind>_` followed by 40 base62 characters drawn with `secrets` (about 238 bits) and
a 6-character base62 CRC32 checksum of those 40 characters, left-padded with `0`:

    cvt_ + 40 random + 6 checksum   (50 characters; an account token)

The checksum lets a mistyped or malformed token be refused without a database query, and lets
secret scanners recognize a leaked one. Only the SHA-256 hex digest of the whole token and its
display prefix (the kind and the first 8 random characters) are stored.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE62_SET = frozenset(BASE62)
RANDOM_LENGTH = 40
CHECKSUM_LENGTH = 6
PREFIX_RANDOM_LENGTH = 8

ACCOUNT_KIND = "cvt"
AGENT_KIND = "cva"
# Every kind of token credvault issues: the patterns that find one in a text are built from it.
KINDS = (ACCOUNT_KIND, AGENT_KIND)
# The longest lifetime a token may be issued with, in days (ten years).
MAX_LIFETIME_DAYS = 3650
# A display prefix: the kind, `_` and the first random characters (`cvt_AbCd1234`).
PREFIX_LENGTH = len(ACCOUNT_KIND) + 1 + PREFIX_RANDOM_LENGTH


@dataclass(frozen=True, slots=True)
class NewToken:
    """A freshly generated token. `plaintext` is shown once and never stored."""

    plaintext: str
    prefix: str
    digest: str

    def __repr__(self) -> str:
        return f"NewToken(prefix={self.prefix!r})"


def _base62(number: int, width: int) -> str:
    chars = []
    while number:
        number, rest = divmod(number, 62)
        chars.append(BASE62[rest])
    return "".join(reversed(chars)).rjust(width, "0")


def checksum(random_part: str) -> str:
    return _base62(zlib.crc32(random_part.encode("ascii")), CHECKSUM_LENGTH)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def display_prefix(token: str) -> str:
    kind, _, rest = token.partition("_")
    return f"{kind}_{rest[:PREFIX_RANDOM_LENGTH]}"


def generate(kind: str = ACCOUNT_KIND) -> NewToken:
    random_part = "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    plaintext = f"{kind}_{random_part}{checksum(random_part)}"
    return NewToken(plaintext=plaintext, prefix=display_prefix(plaintext), digest=digest(plaintext))


def is_well_formed(token: str, kind: str = ACCOUNT_KIND) -> bool:
    """Shape and checksum: no database needed."""
    head = f"{kind}_"
    if len(token) != len(head) + RANDOM_LENGTH + CHECKSUM_LENGTH or not token.startswith(head):
        return False
    body = token[len(head) :]
    if not _BASE62_SET.issuperset(body):
        return False
    random_part, check = body[:RANDOM_LENGTH], body[RANDOM_LENGTH:]
    return secrets.compare_digest(checksum(random_part), check)


# A token in a request's text: its kind, `_`, its random part and checksum (is_well_formed
# decides); and a token-shaped run, as a log line withholds it.
_KIND = "|".join(re.escape(kind) for kind in KINDS)
_BODY = f"[0-9A-Za-z]{{{RANDOM_LENGTH + CHECKSUM_LENGTH}}}"
_TOKEN_TEXT = re.compile(f"({_KIND})_({_BODY})".encode("ascii"))
_TOKEN_LOGGED = re.compile(f"({_KIND})(?:_|%5[Ff]|%255[Ff]){_BODY}")
# Percent-decoding rounds before a text is judged free of tokens: a value encoded twice or
# three times over is still found.
_DECODING_ROUNDS = 4


def _holds_token(data: bytes) -> bool:
    for found in _TOKEN_TEXT.finditer(data):
        kind, body = found.group(1).decode(), found.group(2).decode()
        if is_well_formed(f"{kind}_{body}", kind):
            return True
    return False


def carries_token(data: str | bytes) -> bool:
    """Whether `data` holds a well-formed account or agent token anywhere: as it is, or
    percent-decoded (a few times over)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    for _ in range(_DECODING_ROUNDS):
        if _holds_token(raw):
            return True
        if b"%" not in raw:
            return False
        decoded = unquote_to_bytes(raw)
        if decoded == raw:
            return False
        raw = decoded
    return _holds_token(raw)


def withheld(text: str) -> str:
    """`text` with every token-shaped run (a whole token's length, checksum or not, its `_`
    percent-encoded once or twice too) replaced by its kind and `_...`, for a log line; a
    display prefix (`cva_AbCd1234`) stays."""
    return _TOKEN_LOGGED.sub(r"\1_...", text)
