"""Redaction: every secret credvault injected into a call is replaced by `[REDACTED]` in the
answer's headers and body before it leaves, in each form a well-behaved provider writes it.
The values are the placement's (providers/placement.py): each secret, and a basic-auth pair,
which always holds one; an identifier placed beside them (Twilio's Account SID, a Jira
account's e-mail address) is not among them, so an answer that names it is passed on intact.
The forms:

- raw, as it was sent (its UTF-8 bytes);
- percent-encoded, with upper or lower hex, minimal or every byte (or any mix of the two);
- JSON-escaped: `\\/`, `\\"`, `\\\\`, and `\\uXXXX` in upper or lower hex (a surrogate pair
  beyond the BMP) for any character: Go's, .NET's and PHP's `\\u003c` for `<>&'=+`, or every
  character;
- HTML-escaped, with named entities (HTML5's list) or numeric ones, decimal or hex;
- base64, standard and URL-safe, padded or not: of the value, alone or inside a longer base64
  text at any of the three alignments, and of a basic-auth pair (`user:password`, which
  placement counts among the injected values);
- hex, in lower or upper case.

`Redaction(values)` builds the forms of a call's values once. The escaped forms are not listed
one by one: the text is read once per escaping (percent, JSON, HTML) with its escapes decoded
and each value searched for there, which finds every mix of escaped and plain characters.
Every occurrence of every form is found in the text as it came, and the union of their spans
is replaced, so that no form can cut another, however long each is.

A body passed on as it arrives is redacted by `StreamRedaction`: each piece leaves at once but
for its end where a form may be starting (a proper prefix of a form, raw or once its escapes are
decoded, or an escape that has not ended), which is held back until the next piece tells. So a
form split across two pieces is redacted as if it had come in one, and an event of a stream
that ends as no form begins (`\n\n`) is held back not at all.
"""

from __future__ import annotations

import base64
import html.entities
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REDACTED = b"[REDACTED]"
# A value's base64 inside a longer base64 text, at an alignment that mixes its first and last
# bytes with its neighbours', is the part its own bytes alone decide; shorter, it could be
# anything.
MIN_BASE64_CORE = 8
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


class Redaction:
    """Every form of one call's injected values; `apply` redacts one header value or body."""

    __slots__ = ("_literal_starts", "_literals", "_needle_starts", "_needles")

    def __init__(self, values: Iterable[str]) -> None:
        raw = {value.encode() for value in values if value}
        literals = set(raw)
        for value in raw:
            literals |= _base64_forms(value)
            literals |= {value.hex().encode(), value.hex().upper().encode()}
        self._literals = tuple(sorted(literals, key=len, reverse=True))
        # Searched for once the escapes are decoded; a form's space may have been sent as `+`.
        self._needles = tuple(raw | {value.replace(b" ", b"+") for value in raw})
        self._literal_starts = _Starts(literals | set(self._needles))
        self._needle_starts = _Starts(self._needles)

    def __repr__(self) -> str:
        return f"Redaction({len(self._literals)} literal forms)"

    def apply(self, data: bytes) -> bytes:
        """`data` with every occurrence of every form replaced by [REDACTED]."""
        spans, _ = self.scan(data, open_end=False)
        return _replaced(data, spans) if spans else data

    def scan(self, data: bytes, *, open_end: bool) -> tuple[list[tuple[int, int]], int]:
        """The spans of every form in `data`, and, when more may follow it (`open_end`), where
        its end may hold the start of a form that the next bytes complete (`len(data)` when
        nowhere)."""
        spans: list[tuple[int, int]] = []
        for literal in self._literals:
            at = data.find(literal)
            while at != -1:
                spans.append((at, at + len(literal)))
                at = data.find(literal, at + 1)
        starts = self._literal_starts.earliest(data) if open_end else len(data)
        for escaping in ESCAPINGS:
            if escaping.introducer in data:
                found, start = escaping.scan(
                    data, self._needles, self._needle_starts if open_end else None
                )
                spans += found
                starts = min(starts, start)
        return spans, starts


class StreamRedaction:
    """The redaction of one body passed on piece by piece: `feed` each piece as it arrives, and
    pass on what it returns; `end` returns the rest once the body has ended."""

    __slots__ = ("_held", "_redaction")

    def __init__(self, redaction: Redaction) -> None:
        self._redaction = redaction
        self._held = b""

    def __repr__(self) -> str:
        return f"StreamRedaction({len(self._held)} bytes held)"

    def feed(self, piece: bytes) -> bytes:
        """What of the body so far can leave now, redacted: all of it but an end that may be
        the start of a form (never a form cut in two)."""
        data = self._held + piece
        spans, cut = self._redaction.scan(data, open_end=True)
        moved = True
        while moved:  # a form found whole is never cut: it stays whole with what follows
            moved = False
            for start, end in spans:
                if start < cut < end:
                    cut, moved = start, True
        self._held = data[cut:]
        passed = data[:cut]
        spans = [span for span in spans if span[1] <= cut]
        return _replaced(passed, spans) if spans else passed

    def end(self) -> bytes:
        """The rest of the body, redacted, once it has ended."""
        rest, self._held = self._held, b""
        return self._redaction.apply(rest)


class _Starts:
    """Forms whose start may be the end of a text: where a form that the next bytes complete
    may begin. Nothing is built per form (a call's redaction is made for every call, most of
    which are read whole); each question looks only where the form holds the text's last
    byte."""

    __slots__ = ("_forms",)

    def __init__(self, forms: Iterable[bytes]) -> None:
        self._forms = tuple(forms)

    def earliest(self, text: bytes | bytearray, end: int | None = None) -> int:
        """Where the longest end of `text[:end]` that is a proper prefix of a form starts;
        `end` if none."""
        end = len(text) if end is None else end
        if not end:
            return end
        last = text[end - 1]
        longest = 0
        for form in self._forms:
            # Each length of a proper prefix of `form` that ends with `last`, longest first.
            at = form.rfind(last, 0, len(form) - 1)
            while at + 1 > longest:
                if at + 1 <= end and text.endswith(form[: at + 1], 0, end):
                    longest = at + 1
                    break
                at = form.rfind(last, 0, at)
        return end - longest


def redact(data: bytes, values: Iterable[str]) -> bytes:
    """`data` with every form of each of `values` replaced by [REDACTED]."""
    return Redaction(values).apply(data)


def _base64_forms(value: bytes) -> set[bytes]:
    """Standard base64 of `value`, padded, unpadded and inside a longer text, and the same in
    the URL-safe alphabet."""
    whole = base64.b64encode(value)
    forms = {whole, whole.rstrip(b"=")}
    # Followed by more bytes, or encoded after `shift` other bytes: the group that mixes in
    # another byte is left out.
    cores = [whole[: 4 * (len(value) // 3)]]
    for shift in (1, 2):
        cores.append(base64.b64encode(bytes(shift) + value)[4 : 4 * ((shift + len(value)) // 3)])
    forms.update(core for core in cores if len(core) >= MIN_BASE64_CORE)
    return forms | {form.translate(_URL_SAFE) for form in forms}


def _replaced(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """`data` with each span, overlapping spans merged, replaced by [REDACTED]."""
    pieces, kept = [], 0
    start, end = None, 0
    for span_start, span_end in sorted(spans):
        if start is not None and span_start < end:
            end = max(end, span_end)
            continue
        if start is not None:
            pieces += [data[kept:start], REDACTED]
            kept = end
        start, end = span_start, span_end
    pieces += [data[kept:start], REDACTED, data[end:]]
    return b"".join(pieces)


@dataclass(frozen=True, slots=True)
class Escaping:
    """One way of escaping characters in text: what every escape starts with, the pattern of
    one escape and what it stands for (UTF-8 bytes); for a text that more may follow, the
    pattern of an escape begun but not ended (from its introducer to the text's end), and
    which whole escapes still wait for another (a surrogate's first half)."""

    introducer: bytes
    pattern: re.Pattern[bytes]
    decode: Callable[[re.Match[bytes]], bytes]
    unfinished: re.Pattern[bytes]
    awaits_more: Callable[[re.Match[bytes]], bool] = lambda match: False

    def scan(
        self, data: bytes, needles: Iterable[bytes], starts: _Starts | None
    ) -> tuple[list[tuple[int, int]], int]:
        """The spans of `data` that hold one of `needles` once its escapes are decoded, each
        widened to whole escapes; and, with `starts` (the needles' prefixes; more may follow
        `data`), where its end may begin a needle (`len(data)` when nowhere)."""
        view = bytearray()
        view_starts: list[int] = []
        view_ends: list[int] = []
        data_starts: list[int] = []
        data_ends: list[int] = []
        kept = 0
        last = None
        for last in self.pattern.finditer(data):
            view += data[kept : last.start()]
            view_starts.append(len(view))
            view += self.decode(last)
            view_ends.append(len(view))
            data_starts.append(last.start())
            data_ends.append(last.end())
            kept = last.end()
        view += data[kept:]
        hold = len(data) if starts is None else self._unfinished(data, kept, last)
        if not view_starts and hold == len(data):
            # Nothing escaped: the literal forms found every occurrence and every start.
            return [], hold

        def in_data(offset: int, *, end: bool) -> int:
            """Where the view's `offset` (a start, or an end, exclusive) lies in `data`."""
            last = offset - 1 if end else offset
            escape = bisect_right(view_starts, last) - 1
            if escape < 0:
                return offset
            if last < view_ends[escape]:
                return data_ends[escape] if end else data_starts[escape]
            return data_ends[escape] + offset - view_ends[escape]

        spans = []
        for needle in needles:
            at = view.find(needle)
            while at != -1:
                spans.append((in_data(at, end=False), in_data(at + len(needle), end=True)))
                at = view.find(needle, at + 1)
        if starts is not None:
            # The view up to what is held already: a needle may begin there and go on in it.
            # (`hold` is after the last whole escape, or the start of one that waits for more).
            before = len(view) - (len(data) - hold) if hold >= kept else view_starts[-1]
            start = starts.earliest(view, before)
            if start < before:
                hold = min(hold, in_data(start, end=False))
        return spans, hold

    def _unfinished(self, data: bytes, kept: int, last: re.Match[bytes] | None) -> int:
        """Where an escape that is not finished begins at the end of `data` (after the last
        whole escape, which ends at `kept`); `len(data)` if none."""
        at = data.rfind(self.introducer, max(kept, len(data) - MAX_UNFINISHED_ESCAPE))
        if at != -1 and self.unfinished.fullmatch(data, at):
            if last is not None and last.end() == at and self.awaits_more(last):
                return last.start()
            return at
        if last is not None and last.end() == len(data) and self.awaits_more(last):
            return last.start()
        return len(data)


def _character(code: int, escape: bytes) -> bytes:
    """The UTF-8 bytes of the character `code`, or the escape as it is when there is none."""
    if code > 0x10FFFF:
        return escape
    return chr(code).encode("utf-8", "surrogatepass")


_JSON_SHORT = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"\b", b"f": b"\f"}
_JSON_SHORT |= {b"n": b"\n", b"r": b"\r", b"t": b"\t"}


def _json(match: re.Match[bytes]) -> bytes:
    high, low, unit, short = match.groups()
    if high:
        code = 0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00
        return _character(code, match[0])
    if unit:
        return _character(int(unit, 16), match[0])
    return _JSON_SHORT[short]


def _html(match: re.Match[bytes]) -> bytes:
    decimal, hexadecimal, name = match.groups()
    if name:
        text = html.entities.html5.get(name.decode("ascii") + ";")
        return text.encode() if text is not None else match[0]
    return _character(int(decimal) if decimal else int(hexadecimal, 16), match[0])


# The longest end of a text that an unfinished escape may be: an HTML entity but its `;`.
MAX_UNFINISHED_ESCAPE = 32


def _high_surrogate(match: re.Match[bytes]) -> bool:
    """A JSON `\\uXXXX` of a surrogate pair's first half, whose second may follow."""
    unit = match[3]
    return unit is not None and unit[:1] in b"dD" and unit[1:2] in b"89abAB"


ESCAPINGS = (
    Escaping(
        b"%",
        re.compile(rb"%([0-9A-Fa-f]{2})"),
        lambda match: bytes([int(match[1], 16)]),
        re.compile(rb"%[0-9A-Fa-f]?"),
    ),
    Escaping(
        b"\\",
        re.compile(
            rb"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
            rb"|\\u([0-9a-fA-F]{4})"
            rb"|\\([\"\\/bfnrt])"
        ),
        _json,
        re.compile(rb"\\(?:u[0-9a-fA-F]{0,3})?"),
        _high_surrogate,
    ),
    Escaping(
        b"&",
        re.compile(rb"&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));"),
        _html,
        re.compile(rb"&(?:#[0-9]{0,8}|#[xX][0-9a-fA-F]{0,7}|[A-Za-z][A-Za-z0-9]{0,31})?"),
    ),
)
