"""Each failure kind of the outbound client carries its refusal in one table
(`services.broker.answers.FAILURE_PROBLEMS`): every kind has its line, and its status, code and
detail are the agent's answer."""

from __future__ import annotations

import pytest

from providers.http.failures import Failure
from services.broker.answers import FAILURE_PROBLEMS, failure
from services.exceptions import ProblemError

EXPECTED = {
    Failure.TIMEOUT: (504, "upstream_timeout", "The provider did not answer in time."),
    Failure.TOO_LARGE: (
        502,
        "upstream_too_large",
        "The provider's answer is larger than credvault passes on.",
    ),
    Failure.UNAVAILABLE: (502, "upstream_unavailable", "The provider could not be reached."),
    Failure.ADDRESS_REFUSED: (
        502,
        "upstream_unavailable",
        "The provider's address is not a public one.",
    ),
    Failure.BAD_ANSWER: (502, "upstream_bad_answer", None),
}


def test_every_failure_kind_has_its_refusal():
    assert set(FAILURE_PROBLEMS) == set(Failure)


@pytest.mark.parametrize("kind", list(Failure))
def test_a_failure_kind_carries_its_status_code_and_detail(kind: Failure):
    refusal = failure(kind)
    assert isinstance(refusal, ProblemError)
    status, code, detail = EXPECTED[kind]
    assert (refusal.status_code, refusal.default_code) == (status, code)
    assert str(refusal.detail) == (detail or str(refusal.default_detail))
