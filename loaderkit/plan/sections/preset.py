"""The ``[preset]`` section: the record of the preset a builder or plan was made from.

A preset is a named function returning a :class:`~loaderkit.DataLoaderBuilder`; the builder it
returns remembers the preset's name and the options it was called with, and so do every builder
chained from it and the plan they compile to. The record is *information*: it is shown by
``repr(builder)`` and ``plan.explain()`` and written to plan files (``[preset]``), but it takes
no part in plan equality nor in the stream fingerprint. What a plan loads is decided by its
sections alone, whichever preset (or none) set them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._frozen import FrozenMap, freeze_value, thaw_value
from loaderkit._text import inert, shown
from loaderkit.errors import PlanTypeError, Problem
from loaderkit.plan.sections.base import Section, explain_row

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = [
    "RESET_CALLS",
    "SECTION",
    "PresetSpec",
    "preset_chain",
    "preset_line",
    "preset_notes",
    "preset_sections",
    "preset_spec",
    "preset_to_dict",
    "read_preset",
    "with_notes",
]

RESET_CALLS = {
    "with_batch_size": ".with_batch_size(1)",
    "with_shuffle": ".with_shuffle(False)",
    "with_seed": ".with_seed(0)",
    "with_collator": ".with_collator('default')",
    "with_workers": ".with_workers(0)",
    "with_device": ".with_device('cpu')",
    "with_distributed": ".with_distributed(enabled=False)",
    "with_error_policy": ".with_error_policy('raise')",
}
"""The call that puts a setting back to its default (what a builder repr leaves out), where
it reads better than ``.without(section)``, which :func:`preset_chain` writes for the others."""

_SOURCE_CALLS = frozenset({"with_dataset", "with_mixture"})
_METHOD = re.compile(r"^\.(\w+)\(")


@attrs.frozen
class PresetSpec:
    """The preset a builder was made from: its registry ``name`` and the ``options`` given.

    ``options`` are the keyword options of the call (plain data; defaults left out). ``head``
    (the call that rebuilds the preset's builder, e.g.
    ``loaderkit.presets.masked_lm(<list: 8 samples>, vocab_size=100)``) and ``calls`` (the
    ``with_*`` calls of that builder, as its repr shows them, each with the plan section it
    sets) are display only: they are not
    compared and not written to plan files, so a plan read from a file shows its preset in
    ``explain()`` while its builder's repr is the plain chain.
    """

    name: str
    options: FrozenMap = attrs.field(factory=FrozenMap)
    head: str = attrs.field(default="", eq=False)
    calls: tuple[tuple[str, str], ...] = attrs.field(default=(), eq=False)
    controls: tuple[tuple[str, str], ...] = attrs.field(default=(), eq=False)
    """Display only, like ``calls``: ``(section, "options ...; pass ...")``, the preset options
    that decide each section and how to change it (``loaderkit.presets.PRESET_OPTIONS``)."""

    def note(self, section: str, method: str) -> str:
        """Who set ``section`` (by the call ``method``): the preset and the options behind it.

        ``"with_checks was set by the preset image_classification (options
        image_key='pixel_values', checks=True; pass image_key=None for (image, label)
        tuples, or checks=False for no checks)"``.
        """
        found = dict(self.controls).get(section)
        options = f" ({found})" if found else ""
        return f"{method} was set by the preset {self.name}{options}"

    def describe(self) -> str:
        """``name(option=value, ...)``, how ``explain()`` shows the preset (lists as lists)."""
        opts = ", ".join(f"{inert(k)}={shown(thaw_value(v))}" for k, v in self.options.items())
        return f"{inert(self.name)}({opts})"


def preset_spec(name: object, options: object = None) -> PresetSpec:
    """Check a ``[preset]`` table read from a plan file (paths ``preset.name`` / ``.options``)."""
    if not isinstance(name, str) or not name.strip():
        raise PlanTypeError.single(
            "preset.name",
            f"must be the non-empty name of a preset (got {type(name).__name__} {name!r}); "
            f"see loaderkit.presets.names()",
        )
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise PlanTypeError.single(
            "preset.options",
            f"must be a table of option = value (got {type(options).__name__}); write "
            f"options = {{max_length = 512}} or leave it out",
        )
    frozen = freeze_value("preset.options", dict(options))
    assert isinstance(frozen, FrozenMap)
    return PresetSpec(name, frozen)


def preset_sections(spec: PresetSpec | None, calls: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The sections whose setting the preset made, each with its ``with_*`` method's name.

    ``calls`` are the builder's ``(section, call)`` pairs; a section is the preset's when it
    has calls and each is one of the calls the preset's builder had (a later ``with_*`` call
    that changed it, or ``without``, makes it the user's). The source (``dataset``) is left out:
    the user gave it.
    """
    if spec is None or not spec.calls:
        return {}
    made = {call for _, call in spec.calls}
    found: dict[str, list[str]] = {}
    for section, call in calls:
        found.setdefault(section, []).append(call)
    return {
        section: _method(mine[0])
        for section, mine in found.items()
        if section != "dataset" and all(call in made for call in mine)
    }


def preset_notes(spec: PresetSpec | None, calls: Sequence[tuple[str, str]]) -> dict[str, str]:
    """For each section the preset set (:func:`preset_sections`): who set it, and how.

    See :meth:`PresetSpec.note`. Empty without a preset, or for one read from a plan file.
    """
    if spec is None:
        return {}
    made = preset_sections(spec, calls)
    return {section: spec.note(section, method) for section, method in made.items()}


def with_notes(problem: Problem, notes: Mapping[str, str]) -> Problem:
    """``problem`` saying which preset set the sections it involves (its own, related).

    ``notes`` are :func:`preset_notes`; a problem no preset had a hand in is returned as it is.
    """
    sections = dict.fromkeys((problem.path.split(".", 1)[0], *problem.related))
    said = [notes[s] for s in sections if s in notes]
    if not said:
        return problem
    message = f"{problem.message}; {'; '.join(said)}"
    return Problem(problem.path, message, related=problem.related)


def _method(call: str) -> str:
    found = _METHOD.match(call)
    return found.group(1) if found else call


def preset_chain(spec: PresetSpec, calls: Sequence[tuple[str, str]]) -> list[str] | None:
    """The repr of a builder made from a preset, call by call: the preset call, then changes.

    ``calls`` are the builder's ``with_*`` calls as its plain repr shows them, each with the
    plan section it sets. A call the preset's builder did not have is appended as it is (a
    ``with_*`` call replaces the earlier setting); a setting of the preset that is now at its
    default is put back with :data:`RESET_CALLS`, else with ``.without(section)``. Returns
    ``None`` when the record holds no display (a plan read from a file): the caller then
    shows the plain chain.
    """
    if not spec.head:
        return None
    base = {call for _, call in spec.calls}
    out = [spec.head, *(call for _, call in calls if call not in base)]
    methods = {_method(call) for _, call in calls}
    for section, call in spec.calls:
        method = _method(call)
        if method in methods or (method in _SOURCE_CALLS and methods & _SOURCE_CALLS):
            continue
        out.append(RESET_CALLS.get(method, f".without({section!r})"))
    return out


def preset_to_dict(spec: PresetSpec) -> dict[str, Any]:
    """The ``[preset]`` table of a plan file: information only, never called on load."""
    return {"name": spec.name, "options": thaw_value(spec.options)}


def read_preset(reader: Reader, data: Mapping[str, Any]) -> PresetSpec | None:
    """Read the ``[preset]`` table: a name and options, recorded, never called."""
    if "preset" not in data:
        return None
    sec = reader.section(data, "preset", ("name", "options"))
    spec: PresetSpec | None = reader.attempt(
        lambda: preset_spec(sec.get("name"), sec.get("options"))
    )
    return spec


def preset_line(plan: LoaderPlan) -> str:
    """The ``preset`` line of ``explain()``: the preset call that made the plan."""
    assert plan.preset is not None
    return plan.preset.describe()


SECTION: Section[PresetSpec] = Section(
    name="preset",
    explain=explain_row("preset", preset_line, of="preset"),
    read=read_preset,
    to_dict=preset_to_dict,
    fingerprint="info",
    why="which [preset](presets.md) made the plan: neither compared nor hashed",
)
