"""Redaction: every secret credvault injected into a call (the placement's values, a basic-auth
pair included; an identifier placed beside them is not one) is replaced by `[REDACTED]` in the
answer's headers and body, in each form a well-behaved provider writes it: raw, percent-, JSON-
and HTML-escaped, base64 (standard or URL-safe, alone or inside a longer base64 text) and hex.
The forms are listed in docs/agents.md#brokered-access.

`Redaction(values)` builds a call's forms once. The escaped forms are found by reading the text
once per escaping with its escapes decoded; a text with many escapes is folded first, in C
(`Escaping`; the cost is in docs/decisions.md and docs/performance.md). The union of every
form's spans is replaced, so no form can cut another. `StreamRedaction` redacts a body as it
arrives, holding back only an end where a form may be starting.
"""

from __future__ import annotations

import base64
import binascii
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

    __slots__ = ("_folded", "_literal_starts", "_literals", "_needle_starts", "_needles")

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
        # Each escaping's folded needles (`Folded`), made when a text first needs them.
        self._folded: dict[bytes, Folded | None] = {}

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
            if escaping.introducer not in data:  # memchr: far quicker than counting
                continue
            needle_starts = self._needle_starts if open_end else None
            many = len(data) > FOLD_ALWAYS or data.count(escaping.introducer) > FOLD_FROM
            if many and (folded := self._folded_for(escaping)) is not None:
                found, start = escaping.scan_folded(data, self._needles, needle_starts, folded)
            else:
                found, start = escaping.scan(data, self._needles, needle_starts)
            spans += found
            starts = min(starts, start)
        return spans, starts

    def _folded_for(self, escaping: Escaping) -> Folded | None:
        if escaping.introducer not in self._folded:
            self._folded[escaping.introducer] = escaping.folded(self._needles)
        return self._folded[escaping.introducer]


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
class Folded:
    """A call's needles as one escaping's fold holds them (`Escaping.folded`): each without
    its first `lead` bytes; the replacements the fold makes for the needles' characters; how
    far from a text's end a needle's escaped start may lie (`window`), and how far when no
    folded needle's first byte is near the fold's end (`near`: only a start that the fold may
    not show can be there)."""

    needles: tuple[bytes, ...]
    replacements: tuple[tuple[bytes, bytes], ...]
    window: int
    near: int


@dataclass(frozen=True, slots=True)
class Escaping:
    """One way of escaping characters in text: what every escape starts with, the pattern of
    one escape and what it stands for (UTF-8 bytes); for a text that more may follow, the
    pattern of an escape begun but not ended, and which whole escapes still wait for another
    (a surrogate's first half).

    Reading escape by escape costs Python's time per escape, so a text with more than
    FOLD_FROM escapes is first folded by the C library alone (`fold`) into a text that holds
    every needle the escapes may spell, bar at most its first `lead` bytes (`fold_needle`:
    which needles the fold can stand for, None for one always read escape by escape). Only
    where a folded needle is found is the text read escape by escape; for the hold at a
    text's end, only its last `Folded.near` or `Folded.window` bytes (`spelled`: a needle's
    longest escaped spelling)."""

    introducer: bytes
    pattern: re.Pattern[bytes]
    decode: Callable[[re.Match[bytes]], bytes]
    unfinished: re.Pattern[bytes]
    awaits_more: Callable[[re.Match[bytes]], bool]
    fold: Callable[[bytes, tuple[tuple[bytes, bytes], ...]], bytes]
    fold_needle: Callable[[bytes], bytes | None]
    replacements: Callable[[Iterable[bytes]], list[tuple[bytes, bytes]]]
    lead: int
    spelled: Callable[[bytes], int]

    def folded(self, needles: Iterable[bytes]) -> Folded | None:
        """The needles as the fold holds them; None when the fold cannot stand for one."""
        needles = tuple(needles)
        folded = []
        for needle in needles:
            held = self.fold_needle(needle)
            if held is None or len(held) <= self.lead:
                return None
            folded.append(held[self.lead :])
        window = max(map(self.spelled, needles)) + MAX_UNFINISHED_ESCAPE
        near = 0
        for needle in needles:
            shown = len(needle)  # the longest start that the fold may not show
            while shown and len(self.fold_needle(needle[:shown]) or b"") > self.lead:
                shown -= 1
            near = max(near, self.spelled(needle[:shown]))
        near += MAX_UNFINISHED_ESCAPE
        return Folded(tuple(folded), tuple(self.replacements(needles)), window, near)

    def scan_folded(
        self, data: bytes, needles: Iterable[bytes], starts: _Starts | None, folded: Folded
    ) -> tuple[list[tuple[int, int]], int]:
        """`scan`, for a text that the fold shows to hold no needle at a cost per byte: no
        span, and the hold read from its end alone. Where it may hold one, `scan`."""
        view = self.fold(data, folded.replacements)
        if any(needle in view for needle in folded.needles):
            return self.scan(data, needles, starts)
        if starts is None:
            return [], len(data)
        # A start longer than `lead` shows in the fold, as a folded needle's start followed by
        # at most an unfinished escape.
        end = MAX_UNFINISHED_ESCAPE
        shown = any(needle[0] in view[-(len(needle) + end) :] for needle in folded.needles)
        tail = self._tail_start(data, len(data) - (folded.window if shown else folded.near))
        _, hold = self.scan(data[tail:], needles, starts)
        return [], tail + hold

    def _tail_start(self, data: bytes, at: int) -> int:
        """A start at or before `at` from which the text's escapes read as they do from its
        start: never between the two backslashes of a JSON `\\\\`."""
        if at <= 0:
            return 0
        if self.introducer == b"\\":
            run = at - len(data[:at].rstrip(b"\\"))
            if run % 2:
                at -= 1
        return at

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


# A text with more escapes than this is folded before it is read escape by escape (`Escaping`):
# reading these few costs less than folding. A text longer than FOLD_ALWAYS that holds an
# escape is folded without counting them: the fold of a text with few escapes costs about what
# counting them does.
FOLD_FROM = 64
FOLD_ALWAYS = 4096


def _qp(text: bytes) -> bytes:
    """`=XX` decoded (quoted-printable, in C). The text must hold no `=` but those that
    introduce an escape (`_qp_safe`); the space after it keeps a last `=` (which QP drops)."""
    return binascii.a2b_qp(text + b" ")[:-1]


def _qp_safe(data: bytes) -> bytes:
    """`data` with each `=` escaped, so that it decodes to itself, and each CR read as LF: QP
    skips from `=` and CR to the next LF (a soft line break), where `=` and LF lose the LF
    alone. A fold is thus never exact for a needle that holds a CR (`_folds`)."""
    return data.replace(b"=", b"=3D").replace(b"\r", b"\n")


def _folds(needle: bytes) -> bool:
    """Whether a fold can stand for `needle` at all (a CR reads LF in it)."""
    return b"\r" not in needle


def _percent_fold(data: bytes, replacements: tuple[tuple[bytes, bytes], ...]) -> bytes:
    """Every `%XX` decoded. A `%` that is no escape reads `=`, and one right before an escape
    keeps that escape from being decoded (`lead` 1)."""
    return _qp(_qp_safe(data).replace(b"%", b"="))


def _percent_needle(needle: bytes) -> bytes | None:
    return needle if _folds(needle) and b"%" not in needle else None


def _json_fold(data: bytes, replacements: tuple[tuple[bytes, bytes], ...]) -> bytes:
    """`\\u00XX` and `\\\\` decoded (XX as one byte, which is the character's UTF-8 below
    0x80), and the short escapes of the needles' characters (`replacements`). A `\\u00` that is
    no escape reads `=` and may take the next escape, and one whose backslash ends a `\\\\`
    reads `\\` and its character, taking `u00` and 2 digits: at most 4 bytes of a needle that
    holds no `u00` (`lead`). `\\u00` goes first: the backslashes then left are few, so the
    search for `\\\\` is quick."""
    text = _qp_safe(data).replace(b"\\u00", b"=").replace(b"\\\\", b"=5C")
    for escape, plain in replacements:
        text = text.replace(escape, plain)
    return _qp(text)


def _json_needle(needle: bytes) -> bytes | None:
    if not _folds(needle) or not needle.isascii() or b"\\" in needle or b"u00" in needle:
        return None
    return needle


def _json_replacements(needles: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
    present = set().union(*(set(needle) for needle in needles))
    return [
        (b"\\" + letter, b"=%02X" % plain[0])
        for letter, plain in _JSON_SHORT.items()
        if plain != b"\\" and plain[0] in present
    ]


def _html_fold(data: bytes, replacements: tuple[tuple[bytes, bytes], ...]) -> bytes:
    """Named entities of the needles' characters (`replacements`) and numeric entities
    decoded: `&` read as `=`, `#`, `x` and `X` dropped, leading zeros removed, then a `1`
    after `=` (the hundreds digit of the decimal entities from 100, which no ASCII hex entity
    holds), so that a hex entity decodes exactly and a decimal one to a byte that
    `HTML_CLASSES` takes for its character (`&#45;` reads `=45`, 0x45; `&#103;` `=03`, 0x03);
    then `#`, `x`, `X` and `;` dropped however they were written (`_HTML_DROPPED`), from the
    needles too. An `&` that begins no entity
    takes at most 10 bytes after it (7 zeros, a `1` and 2 digits: `lead`)."""
    for entity, plain in replacements:
        data = data.replace(entity, plain)
    if b"#" in data:  # numeric entities, maybe
        text = _strip_zeros(_qp_safe(data).translate(_AMPERSAND_AS_QP, b"#xX"), b"=")
        # A `;` after a one-digit entity keeps QP from taking the next byte as a digit.
        data = _qp(text.replace(b"=1", b"="))
    return data.translate(HTML_CLASSES).translate(None, _HTML_DROPPED)


def _strip_zeros(text: bytes, introducer: bytes) -> bytes:
    """`text` without the leading zeros of the entities that `introducer` begins (at most 7:
    8 digits, one of them not zero), in three passes when there are any."""
    if introducer + b"0" in text:
        for zeros in (b"0000", b"00", b"0"):
            text = text.replace(introducer + zeros, introducer)
    return text


def _html_needle(needle: bytes) -> bytes | None:
    if b"&" in needle or not all(0x20 <= byte < 0x7F for byte in needle):
        return None  # a CR among them
    return needle.translate(HTML_CLASSES).translate(None, _HTML_DROPPED)


def _html_replacements(needles: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
    present = set().union(*(set(needle) for needle in needles))
    return [
        (b"&" + name + b";", bytes([code]))
        for code in sorted(present)
        for name in _HTML_NAMES.get(code, ())
    ]


def _html_classes() -> bytes:
    """A translation that gives each printable ASCII character and the byte its decimal
    entity folds to (`_html_fold`) one value: a union of each with the other."""
    parent = list(range(256))

    def root(byte: int) -> int:
        while parent[byte] != byte:
            byte = parent[byte]
        return byte

    for code in range(0x20, 0x7F):
        digits = str(code)
        folded = int(digits if code < 100 else digits[1:], 16)
        parent[root(code)] = root(folded)
    return bytes(root(byte) for byte in range(256))


HTML_CLASSES = _html_classes()
# What the fold drops however it was written: `#`, `x` and `X` (dropped from the text before
# it is decoded, to join `&#x` into `=`) and `;`, with every byte of their classes.
_HTML_DROPPED = bytes(sorted({HTML_CLASSES[byte] for byte in b"#xX;"}))
_AMPERSAND_AS_QP = bytes.maketrans(b"&", b"=")
# The named entities of each printable ASCII character (`&colon;`, `&lowbar;`, ...).
_HTML_NAMES: dict[int, tuple[bytes, ...]] = {}
for _name, _text in html.entities.html5.items():
    if _name.endswith(";") and len(_text) == 1 and 0x20 <= ord(_text) < 0x7F:
        _HTML_NAMES[ord(_text)] = (*_HTML_NAMES.get(ord(_text), ()), _name[:-1].encode())
# The longest escape of each printable ASCII character: a numeric entity of 8 digits, or its
# longest name.
_HTML_SPELLED = [
    max([11, *(len(name) + 2 for name in _HTML_NAMES.get(byte, ()))]) for byte in range(256)
]

ESCAPINGS = (
    Escaping(
        b"%",
        re.compile(rb"%([0-9A-Fa-f]{2})"),
        lambda match: bytes([int(match[1], 16)]),
        re.compile(rb"%[0-9A-Fa-f]?"),
        lambda match: False,
        _percent_fold,
        _percent_needle,
        lambda needles: [],
        lead=1,
        spelled=lambda needle: 3 * len(needle),
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
        _json_fold,
        _json_needle,
        _json_replacements,
        lead=4,
        spelled=lambda needle: 6 * len(needle),
    ),
    Escaping(
        b"&",
        re.compile(rb"&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));"),
        _html,
        re.compile(rb"&(?:#[0-9]{0,8}|#[xX][0-9a-fA-F]{0,7}|[A-Za-z][A-Za-z0-9]{0,31})?"),
        lambda match: False,
        _html_fold,
        _html_needle,
        _html_replacements,
        lead=10,
        spelled=lambda needle: sum(_HTML_SPELLED[byte] for byte in needle),
    ),
)
