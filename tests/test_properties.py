"""Property tests (hypothesis): the rules hold for every input, not just the examples."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from providers.identifiers import SERVICE_PATTERN, InvalidIdentifier, normalize_service
from services import bearer_tokens
from services.api.parsing import loads_strict, parse_credential_input
from services.crypto import DecryptionError, Place, open_value, seal_value
from services.exceptions import MalformedJSON, ProblemError
from services.masking import Secret
from services.models import AuditAction, AuditEvent, AuditOutcome
from services.rates import parse_rate
from services.storage.dialects import SQLite
from services.times import rfc3339
from tests.support.helpers import Api

# A data key and its reference, as a sealed value's `key_id` names it.
DATA_KEY = AESGCM(b"P" * 32)
DATA_KEY_ID = "dk_0123456789abcdef.1"


def seal(value: Secret, place: Place) -> tuple[str, bytes]:
    return DATA_KEY_ID, seal_value(DATA_KEY, DATA_KEY_ID, value, place)


def open_sealed(key_id: str, blob: bytes, place: Place) -> Secret:
    return open_value(DATA_KEY, key_id, blob, place, row="a row")


FAST = settings(max_examples=300, deadline=None)

places = st.builds(
    Place,
    account_id=st.integers(1, 2**40),
    service=st.from_regex(SERVICE_PATTERN, fullmatch=True),
    key_name=st.from_regex(r"[a-z][a-z0-9_]{0,63}", fullmatch=True),
    generation=st.integers(1, 2**40),
)


# --- service identifiers -------------------------------------------------------------------


@FAST
@given(st.text(max_size=80))
def test_normalization_is_idempotent_and_yields_the_pattern_or_refuses(raw):
    try:
        normalized = normalize_service(raw)
    except InvalidIdentifier:
        return
    assert SERVICE_PATTERN.fullmatch(normalized)
    assert normalize_service(normalized) == normalized


@FAST
@given(st.from_regex(SERVICE_PATTERN, fullmatch=True), st.sampled_from([" ", "\t", "\u3000"]))
def test_surrounding_whitespace_and_case_do_not_change_the_identifier(service, space):
    assert normalize_service(f"{space}{service.upper()}{space}") == service


# --- the strict JSON reader ----------------------------------------------------------------


@FAST
@given(st.binary(max_size=512))
def test_the_reader_refuses_or_parses_any_bytes_without_crashing(raw):
    try:
        document = loads_strict(raw)
    except MalformedJSON:
        return
    with contextlib.suppress(ProblemError):
        parse_credential_input(document)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@FAST
@given(json_values)
def test_any_json_document_is_read_or_refused_with_a_problem(document):
    raw = json.dumps(document).encode()
    try:
        parse_credential_input(loads_strict(raw))
        status = 200
    except ProblemError as refused:
        status = refused.status_code
    assert status in (200, 400)


@FAST
@given(st.text(min_size=1, max_size=10), st.text(max_size=10), st.text(max_size=10))
def test_duplicate_member_names_are_always_refused(name, first, second):
    raw = (
        "{"
        + f"{json.dumps(name)}: {json.dumps(first)}, {json.dumps(name)}: {json.dumps(second)}"
        + "}"
    )
    with pytest.raises(MalformedJSON):
        loads_strict(raw.encode())


@pytest.mark.django_db
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=300) | st.builds(lambda d: json.dumps(d).encode(), json_values))
def test_the_api_never_answers_500_to_any_body(alice_api: Api, settings, raw):
    settings.CREDVAULT_RATE_LIMIT = settings.CREDVAULT_TEST_RATE_LIMIT = parse_rate("1000000/min")
    for method, path in (
        ("PUT", "/api/v1/services/credentials"),
        ("POST", "/api/v1/services/test"),
    ):
        response = alice_api.raw(method, path, raw)
        assert response.status_code in (200, 201, 400, 413, 415), response.content
        assert response["Content-Type"] in ("application/json", "application/problem+json")


# --- tokens --------------------------------------------------------------------------------


@FAST
@given(st.integers(0, 45), st.sampled_from(bearer_tokens.BASE62), st.sampled_from(["cvt", "cva"]))
def test_every_single_character_change_is_caught(position, replacement, kind):
    token = bearer_tokens.generate(kind).plaintext
    index = len(kind) + 1 + position
    assume(token[index] != replacement)
    changed = token[:index] + replacement + token[index + 1 :]
    assert not bearer_tokens.is_well_formed(changed, kind)


@FAST
@given(st.text(max_size=60))
def test_random_text_is_almost_never_a_well_formed_token(text):
    if bearer_tokens.is_well_formed(text):
        # Only a text of the exact shape with a matching checksum passes.
        assert text.startswith("cvt_")
        assert text[-6:] == bearer_tokens.checksum(text[4:44])


# --- sealing -------------------------------------------------------------------------------


@FAST
@given(st.text(min_size=1, max_size=300), places)
def test_seal_then_open_returns_the_value(value, place):
    key_id, blob = seal(Secret(value), place)
    assert open_sealed(key_id, blob, place).reveal() == value


@FAST
@given(st.text(min_size=1, max_size=50), places, places)
def test_a_ciphertext_opens_only_at_its_place(value, place, other):
    assume(place != other)
    key_id, blob = seal(Secret(value), place)
    with pytest.raises(DecryptionError):
        open_sealed(key_id, blob, other)


@FAST
@given(st.text(min_size=1, max_size=50), places, st.data())
def test_any_flipped_bit_is_detected(value, place, data):
    key_id, blob = seal(Secret(value), place)
    position = data.draw(st.integers(0, len(blob) - 1))
    bit = data.draw(st.integers(0, 7))
    tampered = bytearray(blob)
    tampered[position] ^= 1 << bit
    with pytest.raises(DecryptionError):
        open_sealed(key_id, bytes(tampered), place)


@FAST
@given(st.datetimes(min_value=datetime(2000, 1, 1)))
def test_datetimes_read_back_from_sqlite_are_aware_utc(moment):
    aware = moment.replace(tzinfo=UTC)
    assert SQLite.read_datetime(aware) == aware
    assert SQLite.read_datetime(moment) == aware  # naive UTC
    assert SQLite.read_datetime(moment.isoformat(sep=" ")) == aware  # as text
    assert SQLite.read_datetime(None) is None


@FAST
@given(
    moment=st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1)),
    offset_minutes=st.integers(-14 * 60, 14 * 60),
)
def test_rfc3339_is_the_strftime_form_the_chain_was_built_on(moment, offset_minutes):
    """Every audit digest covers this text: the fast form must equal the original one."""
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    assume(datetime(1970, 1, 2, tzinfo=UTC) < aware < datetime(9998, 12, 31, tzinfo=UTC))
    assert rfc3339(aware) == aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


json_text = st.text(max_size=40)


@FAST
@given(
    seq=st.integers(1, 2**53),
    token_prefix=json_text,
    agent_name=json_text,
    service=json_text,
    target=json_text,
    request_id=st.one_of(json_text, st.just('"seq":0'), st.just('x","seq":0,"y')),
    account_id=st.integers(1, 2**63 - 1),
    status=st.integers(100, 599),
    action=st.sampled_from(AuditAction),
    outcome=st.sampled_from(AuditOutcome),
    occurred_at=st.datetimes(timezones=st.just(UTC)),
)
def test_the_canonical_form_splits_around_its_seq(
    seq,
    token_prefix,
    agent_name,
    service,
    target,
    request_id,
    account_id,
    status,
    action,
    outcome,
    occurred_at,
):
    """The databases hash `before + seq + after`, split from the one canonical form rendered
    with the pending seq: it must be the canonical form, whatever the values hold."""
    from services.audit import canonical
    from services.storage.queries import SEQ_PENDING, split_at_seq

    event = AuditEvent(
        account_id=account_id,
        seq=SEQ_PENDING,
        occurred_at=occurred_at,
        token_prefix=token_prefix,
        agent_name=agent_name,
        action=action,
        service=service,
        target=target,
        outcome=outcome,
        status=status,
        request_id=request_id,
    )
    before, after = split_at_seq(canonical(event))
    event.seq = seq
    assert before + str(seq) + after == canonical(event)
