"""The demo dataset that ships with loaderkit: a small text corpus and a word tokenizer.

``loaderkit demo`` (and the tests and docs of the command-line interface) run on it, so
nothing is downloaded. ``corpus.txt`` holds 800 short English documents, one per line
(about 110 KB, 19,000 words): original sentences drawn once from a small seeded template
grammar, with lengths from 5 to 132 words so that length bucketing has something to do.

- :class:`WordTokenizer` splits text into lower-case words and punctuation and maps them to
  ids from a vocabulary built from the corpus (ids 0-3 are ``<pad>``, ``<unk>``, ``<bos>``,
  ``<eos>``). It is deterministic: the vocabulary is the corpus's sorted word list.
- :class:`DemoText` is a map-style dataset whose sample ``i`` is
  ``{"input_ids": [<bos>, ..., <eos>]}``, the token ids of line ``i``, ready for the ``text``
  and ``causal_lm`` collators.
- :func:`demo_text` is its factory, registered as the dataset factory ``"demo_text"`` of
  :mod:`loaderkit.datasets` (through this package's ``loaderkit.datasets`` entry point, or by
  :func:`ensure_registered`), so a plan made from :func:`load_demo_text` records it and
  ``LoaderPlan.load(path)`` makes the dataset again without bindings.

Nothing here imports torch: the dataset is plain Python lists.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from loaderkit._validate import check_int
from loaderkit.errors import PlanTypeError

__all__ = [
    "CORPUS_FILE",
    "DATASET_NAME",
    "SPECIAL_TOKENS",
    "DemoText",
    "WordTokenizer",
    "corpus_lines",
    "demo_text",
    "ensure_registered",
    "load_demo_text",
]

CORPUS_FILE = "corpus.txt"
"""The name of the bundled corpus inside the ``loaderkit.demo`` package."""

DATASET_NAME = "demo_text"
"""The name of :func:`demo_text` in the registry of dataset factories."""

SPECIAL_TOKENS = ("<pad>", "<unk>", "<bos>", "<eos>")
"""The first ids of the vocabulary: padding (0), unknown word (1), start (2), end (3)."""

_WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")


@functools.cache
def corpus_lines() -> tuple[str, ...]:
    """The documents of the bundled corpus, one per line, read once per process."""
    text = resources.files(__name__).joinpath(CORPUS_FILE).read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line.strip())


class WordTokenizer:
    """A deterministic word-level tokenizer over a fixed vocabulary.

    Text is lower-cased and split into words (letters, digits, apostrophes) and single
    punctuation marks. Ids follow :data:`SPECIAL_TOKENS`, then the vocabulary in the order
    given; a word outside it becomes ``<unk>`` (1).

    Args:
        vocabulary: the words, without the special tokens; ``None`` builds it from the
            bundled corpus (every word it contains, sorted).

    """

    def __init__(self, vocabulary: Sequence[str] | None = None) -> None:
        if vocabulary is None:
            vocabulary = sorted({w for line in corpus_lines() for w in self.split(line)})
        words = [*SPECIAL_TOKENS, *vocabulary]
        self._ids = {word: i for i, word in enumerate(words)}
        if len(self._ids) != len(words):
            raise ValueError("the vocabulary repeats a word or holds a special token")
        self._words = tuple(words)

    pad_token_id = 0
    unk_token_id = 1
    bos_token_id = 2
    eos_token_id = 3

    @staticmethod
    def split(text: str) -> list[str]:
        """The words and punctuation marks of ``text``, lower-cased."""
        return _WORD.findall(text.lower())

    @property
    def vocab_size(self) -> int:
        """The number of ids, special tokens included."""
        return len(self._words)

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """The ids of ``text``, framed by ``<bos>`` and ``<eos>`` unless told otherwise."""
        unk = self.unk_token_id
        ids = [self._ids.get(word, unk) for word in self.split(text)]
        if add_special_tokens:
            return [self.bos_token_id, *ids, self.eos_token_id]
        return ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """The words of ``ids`` joined by spaces (special tokens dropped unless told otherwise)."""
        special = len(SPECIAL_TOKENS) if skip_special_tokens else 0
        return " ".join(self._words[i] for i in ids if i >= special)

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"


def _check_limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    path = f"dataset.source.options.{name}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanTypeError.single(path, f"must be an int or None (got {value!r})")
    return check_int(path, value, minimum=1, fix="drop it to keep everything")


class DemoText:
    """The bundled corpus as a map-style dataset of token ids.

    Sample ``i`` is ``{"input_ids": [...]}``: line ``i`` of the corpus encoded by a
    :class:`WordTokenizer` (with ``<bos>`` and ``<eos>``), cut to ``max_length`` ids.

    Args:
        num_samples: keep the first ``num_samples`` documents (default: all 800).
        max_length: cut every sample to at most this many ids (default: keep them whole).

    """

    def __init__(self, num_samples: int | None = None, max_length: int | None = None) -> None:
        self.num_samples = _check_limit("num_samples", num_samples)
        self.max_length = _check_limit("max_length", max_length)
        self.tokenizer = WordTokenizer()
        lines = corpus_lines()
        if self.num_samples is not None:
            lines = lines[: self.num_samples]
        self._ids = [self.tokenizer.encode(line)[: self.max_length] for line in lines]

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": list(self._ids[index])}

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        ids = self._ids
        return [{"input_ids": list(ids[i])} for i in indices]

    @property
    def num_tokens(self) -> int:
        """The number of ids in the whole dataset."""
        return sum(len(ids) for ids in self._ids)

    def __repr__(self) -> str:
        return (
            f"DemoText({len(self)} samples, {self.num_tokens:,} tokens, "
            f"vocab_size={self.tokenizer.vocab_size})"
        )


def demo_text(num_samples: int | None = None, max_length: int | None = None) -> DemoText:
    """Loaderkit's bundled demo corpus (800 short documents) as token ids."""
    return DemoText(num_samples=num_samples, max_length=max_length)


def ensure_registered() -> None:
    """Register :func:`demo_text` as the dataset factory ``"demo_text"`` if it is not yet.

    An installed loaderkit registers it through its ``loaderkit.datasets`` entry point the
    first time a plan names it; this covers a copy whose entry points are not installed.
    """
    from loaderkit import datasets

    if DATASET_NAME not in datasets.factories:
        datasets.register(DATASET_NAME, demo_text)


def load_demo_text(num_samples: int | None = None, max_length: int | None = None) -> DemoText:
    """:func:`demo_text` through ``loaderkit.datasets.load``: the dataset remembers its source.

    A plan compiled from it records ``[dataset.source] name = "demo_text"`` and the options,
    so the saved plan file loads with no bindings.
    """
    from loaderkit import datasets

    ensure_registered()
    options: dict[str, int] = {}
    if num_samples is not None:
        options["num_samples"] = num_samples
    if max_length is not None:
        options["max_length"] = max_length
    dataset: DemoText = datasets.load(DATASET_NAME, **options)
    return dataset
