"""Redaction: every value credvault injected into a call is replaced by `[REDACTED]` in the
answer's headers and body before it leaves, in each form a well-behaved provider writes it:

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

    __slots__ = ("_literals", "_needles")

    def __init__(self, values: Iterable[str]) -> None:
        raw = {value.encode() for value in values if value}
        literals = set(raw)
        for value in raw:
            literals |= _base64_forms(value)
            literals |= {value.hex().encode(), value.hex().upper().encode()}
        self._literals = tuple(sorted(literals, key=len, reverse=True))
        # Searched for once the escapes are decoded; a form's space may have been sent as `+`.
        self._needles = tuple(raw | {value.replace(b" ", b"+") for value in raw})

    def __repr__(self) -> str:
        return f"Redaction({len(self._literals)} literal forms)"

    def apply(self, data: bytes) -> bytes:
        """`data` with every occurrence of every form replaced by [REDACTED]."""
        spans: list[tuple[int, int]] = []
        for literal in self._literals:
            at = data.find(literal)
            while at != -1:
                spans.append((at, at + len(literal)))
                at = data.find(literal, at + 1)
        for escaping in ESCAPINGS:
            if escaping.introducer in data:
                spans += escaping.spans(data, self._needles)
        return _replaced(data, spans) if spans else data


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
    one escape, and what it stands for (UTF-8 bytes)."""

    introducer: bytes
    pattern: re.Pattern[bytes]
    decode: Callable[[re.Match[bytes]], bytes]

    def spans(self, data: bytes, needles: Iterable[bytes]) -> list[tuple[int, int]]:
        """The spans of `data` that hold one of `needles` once its escapes are decoded, each
        widened to whole escapes."""
        view = bytearray()
        view_starts: list[int] = []
        view_ends: list[int] = []
        data_starts: list[int] = []
        data_ends: list[int] = []
        kept = 0
        for match in self.pattern.finditer(data):
            view += data[kept : match.start()]
            view_starts.append(len(view))
            view += self.decode(match)
            view_ends.append(len(view))
            data_starts.append(match.start())
            data_ends.append(match.end())
            kept = match.end()
        if not view_starts:
            return []  # nothing escaped: the literal forms found every occurrence
        view += data[kept:]

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
        return spans


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


ESCAPINGS = (
    Escaping(b"%", re.compile(rb"%([0-9A-Fa-f]{2})"), lambda match: bytes([int(match[1], 16)])),
    Escaping(
        b"\\",
        re.compile(
            rb"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
            rb"|\\u([0-9a-fA-F]{4})"
            rb"|\\([\"\\/bfnrt])"
        ),
        _json,
    ),
    Escaping(
        b"&",
        re.compile(rb"&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));"),
        _html,
    ),
)
