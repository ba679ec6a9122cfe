"""Redaction's cost is bounded: a text with many escapes is first folded by the C library, and
read escape by escape only where an injected value may be (services/broker/redaction.py). The
fold changes what is found nowhere: whatever the text and however it is cut into pieces, the
folded reading gives what reading every escape gives, and every form is still redacted, across
pieces too. (The figures are a benchmark's, scripts/bench_redaction.py, not a test's.)"""

from __future__ import annotations

import html
import itertools
import json
import threading
from urllib.parse import quote

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker import redaction
from services.broker.redaction import Redaction, StreamRedaction
from services.models import AuditEvent
from tests.support.harness import Gunicorn, server_env
from tests.support.helpers import PROXY_PREFIX, agent_token, creds, database_url, marked, put_agent
from tests.support.stand_ins import ProviderServer

# slow: bodies of many escapes, and gunicorn under dense streams: seconds each.
pytestmark = pytest.mark.slow

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


@pytest.mark.parametrize(
    ("before", "decoded"),
    [
        (b"%", True),  # `%%67`: QP reads `==` as one `=`, and the escape after it stays undecoded
        (b"%=", True),
        (b"\\u00", True),  # `\\u00\\u0067`: the same
        (b"\\", False),  # `\\\\u0067`: a backslash, then `u0067`
        (b"&#00000001", True),  # up to 7 zeros, a `1` and 2 digits taken from what follows
        (b"&#x", True),
        (b"&", True),
    ],
)
def test_a_value_right_after_an_escape_that_is_none_is_found_as_before(
    monkeypatch, before, decoded
):
    """What the fold's `lead` is for: an escape that is not one, right before a value whose
    first characters are escaped, may take them in the fold; folded or not, the text is
    redacted alike (and the value found wherever reading every escape finds it)."""
    value = "gab0101-_:=ab01gxab01"
    for spell in (
        lambda c: f"\\u{ord(c):04x}",
        lambda c: f"%{ord(c):02x}",
        lambda c: f"&#{ord(c)};",
        lambda c: f"&#x{ord(c):x};",
    ):
        escaped = (spell(value[0]) + spell(value[1]) + value[2:]).encode()
        body = b"text " + before + escaped + b" text"
        monkeypatch.setattr(redaction, "FOLD_FROM", 10**9)
        exact = Redaction([value]).apply(body)
        monkeypatch.setattr(redaction, "FOLD_FROM", 0)
        assert Redaction([value]).apply(body) == exact, (before, escaped)
        if decoded or not escaped.startswith(b"\\"):
            assert exact == body.replace(escaped, b"[REDACTED]"), (before, escaped)


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
        if draw(st.booleans()):  # right after noise, which may take its first bytes
            parts.append(draw(st.sampled_from(NOISE)))
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


@pytest.mark.django_db(transaction=True)
def test_dense_streams_at_the_cap_leave_the_worker_alive_and_answering(
    alice_api, bob_api, settings
):
    """One gevent worker under gunicorn with a 3-second timeout; alice's agent at its cap of
    8 calls, each a 16 MiB answer of dense HTML escapes passed on as fast as it comes (its
    reads never wait); while they run, bob's call on the same worker is answered. Every
    stream ends whole and redacted, and the worker is never killed. (Read escape by escape,
    the streams cost about 30 s of the worker's CPU, with no pause between pieces.)"""
    assert alice_api.store("github", creds(api_key=SECRET)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    alice = agent_token(alice_api, "bot")
    assert bob_api.store("stripe", creds(api_key=marked("sk"))).status_code == 201
    assert put_agent(bob_api, "bot", ["stripe"]).status_code == 201
    bob = agent_token(bob_api, "bot")
    piece = DENSE["html-hex"] * (65536 // len(DENSE["html-hex"]))
    pieces = (piece,) * 256
    streams, other = ProviderServer().start(), ProviderServer().start()
    streams.answer(200, headers={"Content-Type": "text/html"}, chunks=pieces)
    other.answer(200, {"object": "balance", "available": []})
    env = server_env(
        database_url(),
        CREDVAULT_ENCRYPTION_KEYS=settings.CREDVAULT_ENCRYPTION_KEYS,
        CREDVAULT_AUDIT_KEYS=settings.CREDVAULT_AUDIT_KEYS,
        CREDVAULT_PROVIDER_BASE_URLS=json.dumps({"github": streams.url, "stripe": other.url}),
        CREDVAULT_PROXY_MAX_RESPONSE=str(64 * 1024 * 1024),
        GUNICORN_CMD_ARGS="--timeout 3",
    )
    started = threading.Barrier(9)
    received: list[int | BaseException] = []

    def stream(server: Gunicorn) -> None:
        try:
            answer = _agent_call(server, alice, "github/stream")
            total, first = 0, True
            for chunk in answer.read_chunked():
                total += len(chunk)
                if first:
                    first = False
                    started.wait(30)
            received.append(total)
        except (urllib3.exceptions.HTTPError, threading.BrokenBarrierError) as exc:
            received.append(exc)

    try:
        with Gunicorn(env, workers=1) as server:
            [worker] = server.worker_pids()
            readers = [threading.Thread(target=stream, args=(server,)) for _ in range(8)]
            for reader in readers:
                reader.start()
            started.wait(30)
            answer = _agent_call(server, bob, "stripe/v1/balance")
            assert answer.status == 200
            assert json.loads(answer.read()) == {"object": "balance", "available": []}
            # Answered while alice's calls were still passing on their answers.
            assert any(reader.is_alive() for reader in readers)
            for reader in readers:
                reader.join(120)
            assert received == [len(piece) * len(pieces)] * 8
            assert server.worker_pids() == [worker]
    finally:
        streams.stop()
        other.stop()
    outcomes = [
        (event.service, event.outcome)
        for event in AuditEvent.objects.filter(action="agent.proxy").order_by("seq")
    ]
    assert sorted(outcomes) == [("github", "success")] * 8 + [("stripe", "success")]


def _agent_call(server: Gunicorn, token: str, path: str) -> urllib3.BaseHTTPResponse:
    return urllib3.request(
        "GET",
        f"{server.url}{PROXY_PREFIX}/{path}",
        headers={"Authorization": f"Bearer {token}"},
        preload_content=False,
        timeout=urllib3.Timeout(connect=5, read=60),
        retries=False,
    )
