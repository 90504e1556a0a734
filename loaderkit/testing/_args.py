"""What the strategies share: hypothesis itself (with the install hint) and argument checks.

A bad argument to a strategy is hypothesis' ``InvalidArgument``.
"""

from __future__ import annotations

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "the strategies of loaderkit.testing need hypothesis, which is not installed; install "
        "it with: pip install 'loaderkit[test]' (or pip install hypothesis). The assert_* "
        "helpers work without it."
    ) from exc

__all__ = ["check_choice", "check_range", "require", "st"]


def require(ok: bool, message: str) -> None:
    """Raise hypothesis' ``InvalidArgument`` with ``message`` unless ``ok``."""
    if not ok:
        from hypothesis.errors import InvalidArgument

        raise InvalidArgument(message)


def check_range(low_name: str, low: int, high_name: str, high: int, minimum: int) -> None:
    """Both bounds are ints ``>= minimum`` and ``low <= high``."""
    for name, value in ((low_name, low), (high_name, high)):
        require(
            isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
            f"{name} must be an int >= {minimum} (got {value!r})",
        )
    require(low <= high, f"{low_name} must be <= {high_name} (got {low} > {high})")


def check_choice(name: str, value: object, choices: tuple[object, ...]) -> None:
    """``value`` is one of ``choices``."""
    require(value in choices, f"{name} must be one of {choices} (got {value!r})")
