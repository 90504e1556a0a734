"""The built-in ``tokens`` factory: synthetic token sequences, a pure function of (seed, index)."""

from __future__ import annotations

from loaderkit._limits import LIMITS
from loaderkit.errors import PlanError

__all__ = ["SyntheticTokens", "tokens"]


class SyntheticTokens:
    """``n`` samples ``{"input_ids": [...]}``, each a pure function of ``(seed, index)``."""

    __module__ = "loaderkit.datasets"  # its public home: plans record the type by this name

    def __init__(
        self, n: int, vocab_size: int, min_length: int, max_length: int, seed: int
    ) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.min_length = min_length
        self.max_length = max_length
        self.seed = seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        import numpy as np

        if not -self.n <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} samples")
        rng = np.random.default_rng([self.seed, index % self.n])
        length = int(rng.integers(self.min_length, self.max_length + 1))
        return {"input_ids": rng.integers(1, self.vocab_size, size=length).tolist()}

    def __repr__(self) -> str:
        return (
            f"SyntheticTokens(n={self.n}, vocab_size={self.vocab_size}, min_length="
            f"{self.min_length}, max_length={self.max_length}, seed={self.seed})"
        )


def tokens(
    n: int = 1000,
    vocab_size: int = 1000,
    min_length: int = 8,
    max_length: int = 64,
    seed: int = 0,
) -> SyntheticTokens:
    """Synthetic token sequences of random lengths, for examples and tests."""
    lowest = (
        ("n", n, 0),
        ("vocab_size", vocab_size, 2),
        ("min_length", min_length, 1),
        ("max_length", max_length, 1),
        ("seed", seed, 0),
    )
    for key, value, low in lowest:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PlanError.single(
                f"dataset.source.options.{key}", f"must be an int >= {low} (got {value!r})"
            )
    if n > LIMITS.dataset_length:
        raise PlanError.single(
            "dataset.source.options.n", f"must be <= {LIMITS.dataset_length:,} (got {n:,})"
        )
    if min_length > max_length:
        raise PlanError.single(
            "dataset.source.options.min_length",
            f"is {min_length} but max_length is {max_length}; make min_length <= max_length",
        )
    return SyntheticTokens(n, vocab_size, min_length, max_length, seed)
