"""The wrapper that plaintext credential values travel in through the code."""

from __future__ import annotations

import hmac
from typing import NoReturn

MASK = "********"


class Secret:
    """A plaintext value whose `str()` and `repr()` print a mask.

    `reveal()` is the only way to the text, so every use of plaintext is visible in the code.
    Pickling is refused: a Secret is never written to a cache, a session or a queue.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret wraps a str")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def encode(self) -> bytes:
        return self._value.encode("utf-8")

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self.encode(), other.encode())

    def __hash__(self) -> int:
        return hash(Secret)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")
