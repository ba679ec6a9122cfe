"""Redaction's cost is bounded: a text with many escapes is first folded by the C library, and
read escape by escape only where an injected value may be (services/broker/redaction.py). The
fold changes what is found nowhere: whatever the text and however it is cut into pieces, the
folded reading gives what reading every escape gives, and every form is still redacted, across
pieces too. (The figures are a benchmark's, scripts/bench_redaction.py, not a test's.)"""

from __future__ import annotations

import html
import itertools
import json
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker import redaction
from services.broker.redaction import Redaction, StreamRedaction

SECRET = "sk-proj-9fK2mQ7xR4tV8wZ1bN5cL3hJ6gD0sA"
PAIR = f"user:{SECRET}"
DENSE = {
    "percent": b"%67%68",
    "json": b"\\u0067\\u0068",
    "html-hex": b"&#x67;&#x68;",
    "html-dec": b"&#103;&#104;",
    "html-named": b"&gt;&lt;",
}


def _per_char(text: str, spell) -> bytes:
    return "".join(spell(index, char) for index, char in enumerate(text)).encode()


def _forms(value: str) -> list[bytes]:
    """The value's escaped forms, each character spelled differently in turn."""
    return [
        quote(value, safe="").encode(),
        _per_char(value, lambda i, c: f"%{ord(c):02x}" if i % 2 else c),
        _per_char(value, lambda i, c: f"%{ord(c):02X}"),
        _per_char(value, lambda i, c: f"\\u{ord(c):04x}" if i % 3 else c),
        _per_char(value, lambda i, c: f"\\u{ord(c):04X}"),
        json.dumps(value).encode()[1:-1],
        _per_char(value, lambda i, c: f"&#{ord(c)};" if i % 2 else c),
        _per_char(value, lambda i, c: f"&#x{ord(c):x};"),
        _per_char(value, lambda i, c: f"&#X{ord(c):06X};"),
        _per_char(value, lambda i, c: f"&#{ord(c):07d};" if i % 2 else f"&#x{ord(c):02x};"),
        html.escape(value).encode(),
        _per_char(value, lambda i, c: {":": "&colon;", "-": "&#45;"}.get(c, c)),
    ]


@pytest.fixture(params=["read escape by escape", "folded"])
def fold_from(request, monkeypatch):
    """Each test twice: the text read escape by escape, and folded whatever its escapes."""
    monkeypatch.setattr(redaction, "FOLD_FROM", 10**9 if request.param[0] == "r" else 0)


def _streamed(pieces: list[bytes], values: list[str]) -> list[bytes]:
    stream = StreamRedaction(Redaction(values))
    return [stream.feed(piece) for piece in pieces] + [stream.end()]


@pytest.mark.parametrize("dense", DENSE.values(), ids=DENSE.keys())
def test_every_form_among_dense_escapes_is_redacted(fold_from, dense):
    """Each form of the secret and of its basic pair, between 48 KiB of dense escapes on each
    side, whole and cut across two pieces at offsets through the form: all redacted, and the
    escapes around pass unchanged."""
    filler = dense * (48 * 1024 // len(dense))
    for form in _forms(SECRET) + _forms(PAIR):
        body = filler + form + filler
        whole = Redaction([SECRET, PAIR]).apply(body)
        assert whole == filler + b"[REDACTED]" + filler, form
        for offset in range(0, len(form), len(form) // 5):
            cut = len(filler) + offset
            pieces = [body[at : min(at + 16384, cut)] for at in range(0, cut, 16384)]
            pieces += [body[cut : cut + 16384], body[cut + 16384 :]]
            assert b"".join(_streamed(pieces, [SECRET, PAIR])) == whole, (form, offset)


def test_a_dense_stream_is_read_escape_by_escape_only_near_its_end(monkeypatch):
    """Folded, a 64 KiB piece of dense escapes with no secret reads escape by escape only its
    last bytes (where a form may begin), not its 10,000 escapes."""
    read: list[int] = []
    scan = redaction.Escaping.scan

    def counting(self, data, needles, starts):
        read.append(len(data))
        return scan(self, data, needles, starts)

    monkeypatch.setattr(redaction.Escaping, "scan", counting)
    stream = StreamRedaction(Redaction([SECRET, PAIR]))
    for dense in DENSE.values():
        piece = dense * (65536 // len(dense))
        assert stream.feed(piece) + stream.end() == piece
    assert read, "nothing was read escape by escape, not even the end"
    assert max(read) < 1024


# Characters that the escapes and the fold treat specially, and others.
ALPHABET = 'ab gxXu01:=-_;#&%+/\\"\r\né'
NOISE = [
    b"%",
    b"%%",
    b"%4",
    b"%0",
    b"\\",
    b"\\\\",
    b"\\u00",
    b"\\u0",
    b"\\ud83d",
    b"&",
    b"&#",
    b"&#x",
    b"&#X",
    b"&#0000",
    b"&#1",
    b"&#x1",
    b"=",
    b"==",
    b";",
    b"\r",
    b"\n",
    b"0",
    b"1",
    b"00000001",
    b"6",
    b"7",
    b"&amp;",
    b"&colon",
]


def _spelled(char: str, family: int, how: int) -> bytes:
    """One character as it is, or in one of the ways a provider of one escaping (percent,
    JSON, HTML) writes it."""
    code = ord(char)
    utf8 = char.encode()
    families = [
        [
            "".join(f"%{byte:02x}" for byte in utf8).encode(),
            "".join(f"%{byte:02X}" for byte in utf8).encode(),
        ],
        [
            json.dumps(char).encode()[1:-1],
            (f"\\u{code:04x}" if code < 0x10000 else json.dumps(char)[1:-1]).encode(),
        ],
        [
            f"&#{code};".encode(),
            f"&#{code:05d};".encode(),
            f"&#x{code:x};".encode(),
            f"&#X{code:04X};".encode(),
            html.escape(char).encode(),
        ],
    ]
    ways = [utf8, *families[family % 3]]
    return ways[how % len(ways)]


# Characters of secrets that every fold can stand for (no `%`, `&`, backslash, CR or
# non-ASCII), long enough for each fold to hold more than their start.
FOLDABLE = "ab gxXu01:=-_;#+/"


@st.composite
def texts(draw):
    """A secret, and a text of noise and of pieces of the secret (often whole), each piece in
    one escaping, each of its characters as it is or escaped one way or another."""
    if draw(st.booleans()):
        secret = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=14))
    else:
        secret = draw(st.text(alphabet=FOLDABLE, min_size=14, max_size=40))
    parts = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(NOISE)))
            continue
        if draw(st.booleans()):
            start, end = 0, len(secret)
        else:
            start = draw(st.integers(min_value=0, max_value=len(secret) - 1))
            end = draw(st.sampled_from([len(secret), draw(st.integers(start, len(secret)))]))
        family = draw(st.integers(0, 2))
        ways = draw(st.lists(st.integers(0, 5), min_size=end - start, max_size=end - start))
        spelled = (_spelled(c, family, w) for c, w in zip(secret[start:end], ways, strict=True))
        parts.append(b"".join(spelled))
    return secret, b"".join(parts)


@settings(max_examples=2000, deadline=None)
@given(drawn=texts(), points=st.lists(st.integers(0, 400), max_size=6))
def test_the_fold_finds_whatever_reading_every_escape_finds(drawn, points):
    """The same text and cuts, read escape by escape and folded: the same answer, piece by
    piece (so the same bytes held back too)."""
    secret, body = drawn
    values = [secret, f"me:{secret}"]
    edges = [0, *sorted({point % (len(body) + 1) for point in points}), len(body)]
    pieces = [body[start:end] for start, end in itertools.pairwise(edges)]
    original = redaction.FOLD_FROM
    try:
        redaction.FOLD_FROM = 10**9
        exact = (Redaction(values).apply(body), _streamed(pieces, values))
        redaction.FOLD_FROM = 0
        folded = (Redaction(values).apply(body), _streamed(pieces, values))
    finally:
        redaction.FOLD_FROM = original
    assert folded == exact
