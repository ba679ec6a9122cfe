"""Redaction covers the forms a well-behaved provider writes: every injected value is
`[REDACTED]` in the answer's body and headers, raw; percent-encoded with upper or lower hex,
minimal or every byte; JSON-escaped with `\\/`, with `\\u00XX` for `<>&'=+` (Go, .NET, PHP) or
every character; HTML-escaped with named or numeric entities; base64 (standard and URL-safe)
of the value and of a basic-auth pair; hex.

The provider is a real HTTP server on 127.0.0.1 (`provider_server`) that echoes the value in
one form; the values hold characters each encoding changes (`/`, `+`, `=`, `<`, `&`, quotes,
and, where a placement can carry them, a space and non-ASCII characters)."""

from __future__ import annotations

import base64
import html
import html.entities
import json
import re
import secrets
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest

from providers.catalog import catalog
from providers.placement import place
from services.broker.redaction import Redaction
from services.masking import Secret
from tests.support.helpers import agent_token, call, creds, put_agent

# A bearer token travels in a header: printable ASCII only.
HEADER_SAFE = "MARKED-SECRET-{}/a+b=c<d&e\"f'g>h:i"
# A basic-auth password travels base64-encoded: anything.
ANY_TEXT = "MARKED-SECRET-{}/a+b=c<d&e\"f'g>h é€😀 z"


def _percent_lower(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda match: match[0].lower(), text)


def _every_byte(value: str, hex_format: str) -> str:
    return "".join("%" + format(byte, hex_format) for byte in value.encode())


def _json_units(character: str, hex_format: str) -> str:
    data = character.encode("utf-16-be")
    return "".join(
        "\\u" + format(int.from_bytes(data[i : i + 2]), hex_format) for i in range(0, len(data), 2)
    )


def _json(value: str, *, escaped: str = "", hex_format: str = "04x", ascii_only=False) -> str:
    """JSON's string text of `value`: `"` and `\\` escaped, the characters of `escaped` as
    \\uXXXX, and with `ascii_only` every non-ASCII one too."""
    out = []
    for character in value:
        if character in escaped or (ascii_only and not character.isascii()):
            out.append(_json_units(character, hex_format))
        else:
            out.append(json.dumps(character, ensure_ascii=False)[1:-1])
    return "".join(out)


_NAMES: dict[str, str] = {}
for _name, _text in sorted(html.entities.html5.items(), key=lambda item: len(item[0])):
    if _name.endswith(";") and len(_text) == 1:
        _NAMES.setdefault(_text, _name)


FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda v: v,
    "percent-minimal-upper": lambda v: quote(v, safe=""),
    "percent-minimal-lower": lambda v: _percent_lower(quote(v, safe="")),
    "percent-every-byte-upper": lambda v: _every_byte(v, "02X"),
    "percent-every-byte-lower": lambda v: _every_byte(v, "02x"),
    "percent-javascript": lambda v: quote(v, safe="!'()*~"),
    "percent-path": lambda v: quote(v, safe="/:@!$&'()*+,;="),
    "percent-form": lambda v: quote_plus(v, safe=""),
    "json-escaped-slash": lambda v: _json(v).replace("/", "\\/"),
    "json-python-ascii": lambda v: _json(v, ascii_only=True),
    "json-specials-lower": lambda v: _json(v, escaped="<>&'=+"),
    "json-specials-upper": lambda v: _json(v, escaped="<>&'=+", hex_format="04X"),
    "json-dotnet": lambda v: _json(v, escaped="<>&'+\"", hex_format="04X", ascii_only=True),
    "json-php": lambda v: _json(v, escaped="<>&'\"", hex_format="04X").replace("/", "\\/"),
    "json-every-character-lower": lambda v: _json(v, escaped=v),
    "json-every-character-upper": lambda v: _json(v, escaped=v, hex_format="04X"),
    "html-python": lambda v: html.escape(v),
    "html-php-039": lambda v: (
        html.escape(v, quote=False).replace('"', "&quot;").replace("'", "&#039;")
    ),
    "html-named": lambda v: "".join(f"&{_NAMES[c]}" if c in _NAMES else c for c in v),
    "html-decimal": lambda v: "".join(f"&#{ord(c)};" for c in v),
    "html-hex-lower": lambda v: "".join(f"&#x{ord(c):x};" for c in v),
    "html-hex-upper": lambda v: "".join(f"&#X{ord(c):X};" for c in v),
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64-unpadded": lambda v: base64.b64encode(v.encode()).decode().rstrip("="),
    "base64-url-safe": lambda v: base64.urlsafe_b64encode(v.encode()).decode(),
    "base64-url-safe-unpadded": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "hex-lower": lambda v: v.encode().hex(),
    "hex-upper": lambda v: v.encode().hex().upper(),
}


def _value(template: str, length: int) -> str:
    """The template's value, its length made such that base64 pads it (`=` or `==`)."""
    value = template.format(secrets.token_hex(4))
    while len(value.encode()) % 3 != length:
        value += "x"
    return value


@pytest.fixture(params=[1, 2], ids=["pad-2", "pad-1"])
def github(request, alice_api, provider_server):
    """A github set whose value only a header can carry (a bearer token)."""
    value = _value(HEADER_SAFE, request.param)
    assert alice_api.store("github", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["github"]).status_code == 201
    return value, agent_token(alice_api, "bot"), "github"


@pytest.fixture(params=[1, 2], ids=["pad-2", "pad-1"])
def mailgun(request, alice_api, provider_server):
    """A mailgun set: basic auth with the user `api`, so the password may be any text."""
    value = _value(ANY_TEXT, request.param)
    assert alice_api.store("mailgun", creds(api_key=value)).status_code == 201
    assert put_agent(alice_api, "bot", ["mailgun"]).status_code == 201
    return value, agent_token(alice_api, "bot"), "mailgun"


def echoed_in_body(provider_server, token: str, service: str, form: str):
    provider_server.answer(
        200,
        b"before " + form.encode() + b" after",
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    response = call(token, "GET", service, "/echo")
    assert response.status_code == 200
    return response.content


def echoed_in_header(provider_server, token: str, service: str, form: str):
    # The header's bytes are the form's UTF-8 bytes; http.server writes a str as Latin-1.
    provider_server.answer(
        200, b"{}", headers={"X-Echo": f"before {form} after".encode().decode("latin-1")}
    )
    response = call(token, "GET", service, "/echo")
    assert response.status_code == 200
    return response["X-Echo"].encode("latin-1")


@pytest.mark.django_db
@pytest.mark.parametrize("form", list(FORMS))
class TestEveryForm:
    def test_in_the_body_of_a_bearer_call(self, github, provider_server, form):
        value, token, service = github
        text = FORMS[form](value)
        assert echoed_in_body(provider_server, token, service, text) == b"before [REDACTED] after"

    def test_in_a_header_of_a_bearer_call(self, github, provider_server, form):
        value, token, service = github
        text = FORMS[form](value)
        assert echoed_in_header(provider_server, token, service, text) == (
            b"before [REDACTED] after"
        )

    def test_in_the_body_of_a_basic_call(self, mailgun, provider_server, form):
        value, token, service = mailgun
        text = FORMS[form](value)
        assert echoed_in_body(provider_server, token, service, text) == b"before [REDACTED] after"

    def test_in_a_header_of_a_basic_call(self, mailgun, provider_server, form):
        value, token, service = mailgun
        text = FORMS[form](value)
        assert echoed_in_header(provider_server, token, service, text) == (
            b"before [REDACTED] after"
        )


@pytest.mark.django_db
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
class TestBase64OfABasicPair:
    def test_in_the_body(self, mailgun, provider_server, encode):
        value, token, service = mailgun
        pair = encode(f"api:{value}".encode()).decode()
        assert echoed_in_body(provider_server, token, service, f"Basic {pair}") == (
            b"before Basic [REDACTED] after"
        )

    def test_in_a_header(self, mailgun, provider_server, encode):
        value, token, service = mailgun
        pair = encode(f"api:{value}".encode()).decode()
        assert echoed_in_header(provider_server, token, service, f"Basic {pair}") == (
            b"before Basic [REDACTED] after"
        )


@pytest.mark.django_db
@pytest.mark.parametrize("before", [b'{"key":"', b'{"key": "', b'{"the key":"'])
def test_base64_of_a_longer_text_that_holds_the_value(github, provider_server, before):
    """A value inside a document that is base64-encoded whole (a token's payload): whatever
    its alignment, the part of the base64 that its own bytes decide is redacted."""
    value, token, service = github
    document = base64.b64encode(before + value.encode() + b'","more":"after"}').decode()
    content = echoed_in_body(provider_server, token, service, document)
    assert b"[REDACTED]" in content
    left = content.decode().removeprefix("before ").removesuffix(" after")
    for piece in left.split("[REDACTED]"):
        for start in range(len(piece)):
            # No 8 characters of base64 decode to a piece of the value.
            chunk = piece[start : start + 8]
            if len(chunk) == 8:
                assert chunk not in base64.b64encode(value.encode()).decode()


@pytest.mark.django_db
def test_a_twilio_pair_whose_token_starts_with_its_sid(alice_api, provider_server):
    """No shorter text cuts a longer form: the token, which begins with the whole sid, is
    redacted whole; the sid, an identifier, stays as it is wherever it stands alone."""
    sid = "AC" + secrets.token_hex(16)
    secret = sid + "-and-the-rest"
    assert alice_api.store("twilio", creds(account_sid=sid, auth_token=secret)).status_code
    put_agent(alice_api, "bot", ["twilio"])
    token = agent_token(alice_api, "bot")
    text = f"token {secret} sid {sid} both {quote(secret, safe='')}{sid}"
    assert echoed_in_body(provider_server, token, "twilio", text) == (
        f"before token [REDACTED] sid {sid} both [REDACTED]{sid} after".encode()
    )


@pytest.mark.django_db
def test_an_answer_without_the_value_is_passed_on_byte_for_byte(github, provider_server):
    _, token, service = github
    text = "x \\u00e9 \\/ %41%2f &amp; &lt;b&gt; &#233; &unknown; &#99999999; \\ud83d\\ude00 %zz"
    assert echoed_in_body(provider_server, token, service, text) == (
        b"before " + text.encode() + b" after"
    )


def test_each_escaped_form_is_found_wherever_its_escapes_are():
    """Escaped and plain characters mixed at random, in each escaping."""
    value = ANY_TEXT.format("0123abcd")
    redaction = Redaction([value])
    escapes = {
        "percent": lambda c: _every_byte(c, "02X"),
        "json": lambda c: _json_units(c, "04x"),
        "html": lambda c: f"&#{ord(c)};",
    }
    for name, escape in escapes.items():
        for _ in range(20):
            mixed = "".join(escape(c) if secrets.randbelow(2) else c for c in value)
            if name == "json":
                mixed = mixed.replace('"', "\\u0022").replace("\\\\", "\\u005c")
            assert redaction.apply(f"<{mixed}>".encode()) == b"<[REDACTED]>", (name, mixed)


def test_a_redaction_shows_no_value():
    value = HEADER_SAFE.format("0123abcd")
    assert value not in repr(Redaction([value]))


IDENTIFIER = "someone+ops/é@example.com"


@pytest.fixture(params=[1, 2], ids=["pad-2", "pad-1"])
def jira(request, alice_api, provider_server):
    """A jira set: basic auth with the e-mail address (an identifier) as the user name and the
    API token (a secret) as the password."""
    value = _value(ANY_TEXT, request.param)
    stored = creds(email=IDENTIFIER, api_token=value)
    assert alice_api.store("jira", stored).status_code == 201
    assert put_agent(alice_api, "bot", ["jira"]).status_code == 201
    return value, agent_token(alice_api, "bot"), "jira"


@pytest.mark.django_db
@pytest.mark.parametrize("form", list(FORMS))
class TestAnIdentifierBesideASecret:
    """Only secrets are redacted: the e-mail address placed beside the token comes back as
    the provider wrote it, in any form; the token, and the pair that holds both, never do."""

    def test_in_the_body(self, jira, provider_server, form):
        value, token, service = jira
        pair = f"{IDENTIFIER}:{value}"
        text = " | ".join(FORMS[form](v) for v in (IDENTIFIER, value, pair))
        assert echoed_in_body(provider_server, token, service, text) == (
            f"before {FORMS[form](IDENTIFIER)} | [REDACTED] | [REDACTED] after".encode()
        )

    def test_in_a_header(self, jira, provider_server, form):
        value, token, service = jira
        pair = f"{IDENTIFIER}:{value}"
        text = " | ".join(FORMS[form](v) for v in (IDENTIFIER, value, pair))
        assert echoed_in_header(provider_server, token, service, text) == (
            f"before {FORMS[form](IDENTIFIER)} | [REDACTED] | [REDACTED] after".encode()
        )


def test_the_placement_lists_the_secret_and_the_pair_never_the_identifier_alone():
    twilio = catalog()["twilio"]
    sid, auth_token = "AC" + "0" * 32, "a-secret"
    fields = {"account_sid": Secret(sid), "auth_token": Secret(auth_token)}
    check = twilio.match(fields).shape.check
    placed = place(check.auth, check.path, fields)
    assert placed.sent == (f"{sid}:{auth_token}", auth_token)
    expected = base64.b64encode(f"{sid}:{auth_token}".encode()).decode()
    assert placed.headers["Authorization"] == f"Basic {expected}"
    # An API key's sid is a secret: only the account's sid was declared an identifier.
    fields = {
        "account_sid": Secret(sid),
        "api_key_sid": Secret("SK1"),
        "api_key_secret": Secret("k"),
    }
    check = twilio.match(fields).shape.check
    assert place(check.auth, check.path, fields).sent == ("SK1:k", "SK1", "k")
