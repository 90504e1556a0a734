"""The plan sections, declared once each: the registry the generic walkers read.

Each module of this package declares one section of a plan (a
:class:`~loaderkit.plan.sections.base.Section`); :data:`SECTIONS` lists them in the order a
plan file writes them.

Adding a data-only section ``foo`` is:

1. ``foo.py`` here: its frozen spec, its constructor (called by the builder's ``with_foo``
   and, through ``read_foo``, by plan loading), ``foo_to_dict``, ``read_foo``, its own rules
   and ``SECTION = Section(...)`` declaring its fingerprint kind (with a ``stream`` hook only
   for what differs from its table), its row of the fingerprint table (``why=...``), the
   bindings its value refers to (``bindings=FooSpec.bound_names``, if any), its
   ``builder_calls`` (the ``.with_foo(...)`` calls ``repr(builder)`` shows for a value) and
   its ``explain`` rows (``explain_row("foo", foo_line, of="foo")`` for one line);
2. one line in :data:`SECTIONS` (and its import); its call and its row come last in
   ``repr(builder)`` and ``explain()`` unless :data:`BUILDER_CALL_ORDER` and
   :data:`EXPLAIN_ORDER` name it elsewhere;
3. the ``foo`` field of :class:`~loaderkit.plan.plan.LoaderPlan` (and its name in
   ``Setting``), and the builder's ``with_foo`` method, returning ``self._with(foo=spec)``
   (the builder's state starts from ``LoaderPlan``'s defaults: no field to add there);
4. :func:`fingerprint_table` pasted into ``docs/plan-format.md`` (a test compares them).

Files, the fingerprint, the reader, the builder's repr and ``explain()`` need no code: they
walk the declarations. The ``order`` and ``batches`` rows of ``explain()`` are the exceptions:
they combine several sections and are written in :mod:`loaderkit.plan.display`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from loaderkit.plan.sections import (
    batch,
    bucketing,
    cache,
    checks,
    collator,
    curriculum,
    dataset,
    device,
    distributed,
    error_policy,
    global_rngs,
    max_length,
    mixture,
    order,
    preset,
    sampling_weights,
    split,
    transform,
    workers,
)
from loaderkit.plan.sections.base import FingerprintRow, ReprContext, Section

__all__ = [
    "BUILDER_CALL_ORDER",
    "EXPLAIN_ORDER",
    "FILE_KEYS",
    "SECTIONS",
    "FingerprintRow",
    "Section",
    "bound_names",
    "fingerprint_table",
    "section_calls",
    "section_named",
    "with_fingerprint_table",
]

SECTIONS: tuple[Section[Any], ...] = (
    dataset.SECTION,
    batch.SECTION,
    order.SECTION,
    collator.SECTION,
    workers.SECTION,
    device.SECTION,
    distributed.SECTION,
    transform.SECTION,
    global_rngs.SECTION,
    bucketing.SECTION,
    sampling_weights.SECTION,
    curriculum.SECTION,
    mixture.SECTION,
    max_length.SECTION,
    checks.SECTION,
    split.SECTION,
    error_policy.SECTION,
    cache.SECTION,
    preset.SECTION,
)
"""Every plan section, in the order a plan file writes them."""


def section_named(name: str) -> Section[Any]:
    """The declaration of the section stored in ``LoaderPlan.<name>``."""
    for section in SECTIONS:
        if section.name == name:
            return section
    raise KeyError(name)


def bound_names(value_of: Callable[[str], object]) -> set[str]:
    """The bindings the sections refer to (:attr:`Section.bindings`).

    ``value_of(name)`` is each section's value; an unset section refers to none.
    """
    names: set[str] = set()
    for section in SECTIONS:
        value = value_of(section.name)
        if section.bindings is not None and value is not None:
            names.update(section.bindings(value))
    return names


def _in_order(
    names: tuple[str, ...], shown: Callable[[Section[Any]], bool]
) -> tuple[Section[Any], ...]:
    """The sections ``names`` lists, then the other ``shown`` ones in :data:`SECTIONS` order."""
    rest = (section for section in SECTIONS if shown(section) and section.name not in names)
    return (*map(section_named, names), *rest)


# fmt: off
_BUILDER_CALL_ORDER_NAMES = (
    "mixture", "dataset", "batch", "order", "collator", "transform", "global_rngs", "workers",
    "device", "bucketing", "sampling_weights", "curriculum", "error_policy", "cache",
    "max_length", "checks", "split", "distributed",
)
# fmt: on
BUILDER_CALL_ORDER: tuple[Section[Any], ...] = _in_order(
    _BUILDER_CALL_ORDER_NAMES, lambda section: section.builder_calls is not None
)
"""The sections with :attr:`Section.builder_calls`, in the order ``repr(builder)`` calls them
(the order of the ``with_*`` methods' use in a typical chain, not the file's; a section not
named there comes last). The source comes first: a mixture's call, which stands for its
combined dataset (that shows no call)."""

# fmt: off
_EXPLAIN_ORDER_NAMES = (
    "dataset", "preset", "split", "order", "batch", "collator", "bucketing", "sampling_weights",
    "curriculum", "mixture", "max_length", "checks", "transform", "global_rngs",
    "error_policy", "workers", "cache", "device", "distributed",
)
# fmt: on
EXPLAIN_ORDER: tuple[Section[Any], ...] = _in_order(
    _EXPLAIN_ORDER_NAMES, lambda section: section.explain is not None
)
"""The sections in the order ``explain()`` shows their rows (:attr:`Section.explain`; a
section not named there comes last); the rows of ``order`` and ``batch`` combine several
sections and are written in :mod:`loaderkit.plan.display`."""


def section_calls(
    value_of: Callable[[str], object], bound: Mapping[str, object]
) -> list[tuple[str, str]]:
    """The builder's ``with_*`` calls (:attr:`Section.builder_calls`), with the section each sets.

    The calls make the sections' values (``value_of(name)``) from ``DataLoaderBuilder()``, in
    :data:`BUILDER_CALL_ORDER`; ``bound`` are the builder's live objects. A section at its
    default has no call; ``order`` may have two; a mixture's call sets ``dataset``.
    """
    context = ReprContext(bound)
    calls: list[tuple[str, str]] = []
    for section in BUILDER_CALL_ORDER:
        value = value_of(section.name)
        if value is not None and section.builder_calls is not None:
            label = section.calls_set or section.name
            calls.extend((label, call) for call in section.builder_calls(value, context))
    return calls


FILE_KEYS: tuple[str, ...] = ("schema_version", *(section.key for section in SECTIONS))
"""The top-level keys of a plan file."""


def fingerprint_table() -> str:
    """The fingerprint table of ``docs/plan-format.md`` (Markdown), made from the declarations.

    ``tests/test_docs.py`` checks that the page holds exactly this table, so the page cannot
    drift from what :func:`~loaderkit.plan.fingerprint.stream_fields` hashes.
    """
    lines = ["| field | kind | why |", "| --- | --- | --- |"]
    lines.extend(
        f"| {row.field} | {row.kind} | {row.why} |" for section in SECTIONS for row in section.rows
    )
    return "\n".join(lines) + "\n"


def with_fingerprint_table(page: str) -> str:
    """``page`` (``docs/plan-format.md``'s Markdown) with its fingerprint table made anew.

    The table is the first one after the ``## The stream fingerprint`` heading. The docs build
    (``docs/_hooks.py``) renders the page through this, and ``tests/test_docs.py`` checks that
    the committed page already equals it, so neither the site nor the file can drift.
    """
    header = "| field | kind | why |\n| --- | --- | --- |\n"
    start = page.index(header, page.index("## The stream fingerprint"))
    end = page.index("\n\n", start) + 1
    return page[:start] + fingerprint_table() + page[end:]
