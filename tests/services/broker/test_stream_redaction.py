"""Redaction of a body passed on piece by piece (`StreamRedaction`): however the provider's
body is cut into pieces, what leaves is what redacting the whole body at once gives, and no more
than an end that may still become a form is held back."""

from __future__ import annotations

import base64
import html
import itertools
import json
import re
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.redaction import Redaction, StreamRedaction

SECRET = "sk-Abc/+=&<>'\"\\ é😀xyz-qqqqqqqqqq"
REDACTION = Redaction([SECRET, "user:pass"])
FORMS = [
    SECRET.encode(),
    quote(SECRET, safe="").encode(),
    re.sub(rb"%[0-9A-F]{2}", lambda escape: escape[0].lower(), quote(SECRET, safe="").encode()),
    json.dumps(SECRET)[1:-1].encode(),
    json.dumps(SECRET, ensure_ascii=False)[1:-1].encode(),
    html.escape(SECRET).encode(),
    "".join(f"&#{ord(c)};" for c in SECRET).encode(),
    base64.b64encode(SECRET.encode()),
    SECRET.encode().hex().encode(),
]
# Text around the forms, with the starts of escapes and of the secret that a form may follow.
FILLERS = [b"data: {}\n\n", b"%", b"%4", b"\\", b"\\u00", b"\\ud83d", b"&", b"&amp", b"sk-", b"x"]


def streamed(pieces: list[bytes]) -> bytes:
    stream = StreamRedaction(REDACTION)
    return b"".join(stream.feed(piece) for piece in pieces) + stream.end()


def cut(body: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *sorted({point % (len(body) + 1) for point in points}), len(body)]
    return [body[start:end] for start, end in itertools.pairwise(edges)]


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FORMS + FILLERS), min_size=1, max_size=8),
    points=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_cut_gives_what_the_whole_body_gives(parts, points):
    body = b"".join(parts)
    assert streamed(cut(body, points)) == REDACTION.apply(body)


def test_a_form_split_in_two_is_redacted_whole():
    for form in FORMS:
        body = b'data: {"echo": "' + form + b'"}\n\n'
        for at in range(1, len(body)):
            out = streamed([body[:at], body[at:]])
            assert out == b'data: {"echo": "[REDACTED]"}\n\n', (form, at)


def test_an_event_that_ends_where_no_form_begins_leaves_at_once():
    stream = StreamRedaction(REDACTION)
    event = b'data: {"choices": [{"delta": {"content": "Hello"}}]}\n\n'
    assert stream.feed(event) == event


def test_only_an_end_that_may_begin_a_form_is_held():
    stream = StreamRedaction(REDACTION)
    assert stream.feed(b'data: "the key is s') == b'data: "the key is '
    assert stream.feed(b"k-Ab") == b""  # still the start of the secret
    assert stream.feed(b"ove") == b"sk-Above"  # it was not
    assert stream.feed(b" 50%") == b" 50"  # an escape may be starting
    assert stream.feed(b" off") == b"% off"
    assert stream.end() == b""


def test_what_is_held_stays_below_the_longest_form():
    longest = max(len(form) for form in FORMS)
    for form in FORMS:
        for at in range(1, len(form)):
            stream = StreamRedaction(REDACTION)
            stream.feed(b"text " + form[:at])
            assert len(stream.end()) < longest
