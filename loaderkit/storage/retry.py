"""Bounded retries with backoff: what a remote store does when a request fails in passing.

A store's single attempt raises :class:`Retry` for what may pass (a connection reset, a
timeout, a ``500``, a ``503 SlowDown``, a body shorter than asked) and any other error for what
will not (a missing object, refused credentials, a changed version). :func:`with_retries` makes
``retries + 1`` attempts at most, waiting between them ``backoff * 2**i`` seconds (at most
``max_backoff``; the second half of each wait drawn at random, so that many readers do not retry
in step), then raises a :class:`~loaderkit.storage.base.StorageError` naming the URL, the
number of attempts, each failure and the fix. Every attempt is itself bounded in time by the
store (connect and read timeouts), so a request ends, in the worst case, after
``(retries + 1) * (attempt bound) + sum(waits)`` seconds.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import TypeVar

import attrs

from loaderkit._text import shown
from loaderkit.storage.base import StorageError

__all__ = ["Retry", "RetryPolicy", "with_retries"]

T = TypeVar("T")

_JITTER = random.Random(os.urandom(8))
"""The waits' randomness: a private generator (a seeded global RNG stays untouched)."""


class Retry(Exception):  # noqa: N818 - an instruction to the retry loop, not a failure
    """One attempt failed in a way that may pass: try again (after a wait)."""


@attrs.frozen
class RetryPolicy:
    """How often, and after which waits, a failed request is tried again."""

    retries: int = 4
    """Attempts after the first (``0``: one attempt only)."""
    backoff: float = 0.2
    """Seconds of the first wait; each next wait doubles."""
    max_backoff: float = 10.0
    """The longest wait, in seconds."""

    def wait(self, failed: int) -> float:
        """Seconds to wait after the ``failed``-th failure (1-based)."""
        cap = min(self.max_backoff, self.backoff * 2 ** (failed - 1))
        return float(cap / 2 + _JITTER.uniform(0, cap / 2))


def with_retries(url: str, what: str, attempt: Callable[[], T], policy: RetryPolicy, fix: str) -> T:
    """``attempt()``'s result, trying again on :class:`Retry`; a ``StorageError`` when all fail."""
    failures: list[str] = []
    attempts = policy.retries + 1
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except Retry as e:
            failures.append(str(e) or type(e).__name__)
        if number < attempts:
            time.sleep(policy.wait(number))
    seen = "; ".join(f"{i}: {shown(f, 160)}" for i, f in enumerate(failures, 1))
    raise StorageError(f"{shown(url)}: {what} failed {attempts} time(s) in a row ({seen}); {fix}")
