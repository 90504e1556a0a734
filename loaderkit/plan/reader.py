"""The generic reader of plan data: problems with paths, bindings, callables, value sources.

:func:`~loaderkit.plan.serde.plan_from_dict` walks the sections of
:data:`loaderkit.plan.sections.SECTIONS` and calls each one's ``read`` hook with a
:class:`Reader`; the pieces several sections share (a table with its unknown keys refused, a
binding, a callable given by name, ``module:qualname`` or binding, a per-sample value source)
are read here. Trust is decided here too: a ``ref`` resolves only under
:func:`~loaderkit.registry.resolve_ref`'s rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from loaderkit._frozen import freeze_value
from loaderkit._text import shown
from loaderkit._validate import check_bool, check_str, unknown_keys
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.specs import CallableSpec, LengthSource
from loaderkit.registry import PluginNotImportedError, resolve_ref

__all__ = ["Reader", "value_fn"]

S = TypeVar("S")


class Reader:
    """Reads the sections of plan data, collecting problems so that one load reports all.

    Each section's ``read`` hook (:attr:`~loaderkit.plan.sections.base.Section.read`) takes
    the reader and the whole plan data, reports problems here with their paths, and returns
    the section's spec (``None`` when unset or unreadable). ``values`` holds the sections read
    so far (a mixture checks the dataset read before it).
    """

    def __init__(
        self,
        bindings: Mapping[str, object] | None,
        allow_imports: bool,
        require_bindings: bool,
        base_dir: Path | None = None,
        confine: Path | None = None,
    ) -> None:
        self.problems: list[Problem] = []
        self.given = dict(bindings or {})
        self.used: dict[str, object] = {}
        self.unbound: list[str] = []
        self.wanted: list[str] = []
        self.allow_imports = allow_imports
        self.require_bindings = require_bindings
        self.base_dir = base_dir
        self.confine = confine
        self.call_factories = True
        """False once the data is known to be refused: no dataset factory is called then."""
        self.values: dict[str, Any] = {}
        """The sections read so far, by name."""

    def attempt(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, or ``None`` with its ``PlanError``'s problems reported."""
        try:
            return fn()
        except PlanError as exc:
            self.problems.extend(exc.problems)
            return None

    def section(self, data: Mapping[str, Any], name: str, known: tuple[str, ...]) -> dict[str, Any]:
        """The known keys of table ``name`` of ``data``; unknown keys are reported with a hint."""
        value = data.get(name, {})
        if not isinstance(value, Mapping):
            self.problems.append(
                Problem(name, f"must be a table/object (got {type(value).__name__} {shown(value)})")
            )
            return {}
        self.problems.extend(unknown_keys(name, value, known))
        return {k: v for k, v in value.items() if k in known}

    def bind(self, path: str, name: str) -> object | None:
        """The object given for binding ``name`` (read at ``path``), or ``None``: unbound."""
        self.wanted.append(name)
        if name in self.given:
            self.used[name] = self.given[name]
            return self.given[name]
        if self.require_bindings:
            self.problems.append(
                Problem(
                    path,
                    f"the plan refers to a live object bound as {name!r} and none was given; "
                    f"pass bindings={{{name!r}: ...}} (or require_bindings=False to inspect "
                    f"the plan without building it)",
                )
            )
        else:
            self.unbound.append(name)
        return None

    def read_callable(
        self,
        data: Mapping[str, Any],
        path: str,
        kind_fn: Callable[..., tuple[CallableSpec, object | None]],
    ) -> CallableSpec | None:
        """Read a callable's table at ``path``: a registry name, a reference or a binding.

        A ``name`` is checked by ``kind_fn``; a ``ref`` resolves only under the trust rules.
        """
        extra = ("options",) if path == "collator" else ("accepts_rng",)
        sec = self.section(data, path, ("name", "ref", "binding", "label", "reason", *extra))
        sources = [k for k in ("name", "ref", "binding") if k in sec]
        if len(sources) != 1:
            self.problems.append(
                Problem(
                    path,
                    f"needs exactly one of 'name', 'ref' or 'binding' (got "
                    f"{', '.join(sources) or 'none'})",
                )
            )
            return None
        source = sources[0]
        try:
            value = check_str(f"{path}.{source}", sec[source])
            label = check_str(f"{path}.label", sec.get("label", ""), nonempty=False)
            accepts_rng = check_bool(f"{path}.accepts_rng", sec.get("accepts_rng", False))
        except PlanError as exc:
            self.problems.extend(exc.problems)
            return None
        options = sec.get("options", {})
        if not isinstance(options, Mapping):
            self.problems.append(
                Problem(f"{path}.options", f"must be a table (got {type(options).__name__})")
            )
            return None
        if options and source != "name":
            self.problems.append(
                Problem(
                    f"{path}.options",
                    f"options are only taken with registry names (got {sorted(options)} with "
                    f"{source} {value!r}); drop them",
                )
            )
            return None
        if source == "name" and ":" in value:  # a registry name never holds a colon
            self.problems.append(
                Problem(
                    f"{path}.name",
                    f"{shown(value, 60)} is a 'module:qualname' reference, not a registry "
                    f"name; write it as ref = {shown(value, 60)} (resolved only under the trust "
                    f"rules)",
                )
            )
            return None
        if source == "name":
            return self._read_named(sec, path, value, options, accepts_rng, kind_fn)
        recorded = CallableSpec(source, value, accepts_rng=accepts_rng, label=label)
        if source == "ref" and value not in self.given:
            self.wanted.append(value)
            try:
                obj: object | None = resolve_ref(value, allow_imports=self.allow_imports)
            except (PermissionError, LookupError) as exc:
                if not self.require_bindings and isinstance(exc, PermissionError):
                    self.unbound.append(value)
                    return recorded
                self.problems.append(Problem(f"{path}.ref", str(exc)))
                return None
            self.used[value] = obj
        else:
            obj = self.bind(path, value)
            if obj is None:
                return recorded
        result = self.attempt(lambda: kind_fn(*((obj, {}) if path == "collator" else (obj,))))
        if result is None:
            return None
        live: CallableSpec = result[0]
        return attrs.evolve(recorded, accepts_rng=live.accepts_rng)

    def _read_named(
        self,
        sec: Mapping[str, Any],
        path: str,
        value: str,
        options: Mapping[str, Any],
        accepts_rng: bool,
        kind_fn: Callable[..., tuple[CallableSpec, object | None]],
    ) -> CallableSpec | None:
        """The registry name ``value`` of the callable at ``path``, checked by ``kind_fn``."""
        args: tuple[Any, ...] = (value, options) if path == "collator" else (value,)
        try:
            result = self.attempt(lambda: kind_fn(*args))
        except PluginNotImportedError:  # inspecting: a plugin's name is checked to build
            frozen = self.attempt(lambda: freeze_value(f"{path}.options", dict(options)))
            if frozen is None:
                return None
            result = (CallableSpec("registry", value, frozen, accepts_rng=accepts_rng),)
        reason = sec.get("reason", "")
        if not isinstance(reason, str):
            self.problems.append(
                Problem(f"{path}.reason", f"must be a string (got {type(reason).__name__})")
            )
            return None
        if result is None:
            return None
        named: CallableSpec = result[0]
        return attrs.evolve(named, reason=reason)

    def values_source(
        self, table: object, path: str, make: Callable[[object], LengthSource]
    ) -> LengthSource | None:
        """Read a per-sample value source: ``column``, ``array`` + ``digest``, ``ref``, ``binding``.

        ``make(value)`` checks a column name or bound values the way the builder does.
        """
        if not isinstance(table, Mapping):
            self.problems.append(
                Problem(
                    path,
                    f"must be a table with 'column', 'array', 'ref' or 'binding' (got "
                    f"{type(table).__name__})",
                )
            )
            return None
        if "column" in table:
            self.problems.extend(unknown_keys(path, table, ("column",)))
            column: LengthSource | None = self.attempt(lambda: make(table["column"]))
            return column
        if "array" in table:
            self.problems.extend(unknown_keys(path, table, ("array", "digest")))
            name = table["array"]
            values = self.bind(path, name) if isinstance(name, str) else None
            if values is None:
                digest = table.get("digest")
                if isinstance(name, str) and isinstance(digest, str) and not self.require_bindings:
                    return LengthSource("array", name, digest=digest)  # unbound: data only
                return None
            source: LengthSource | None = self.attempt(lambda: make(values))
            if source is None:
                return None
            if table.get("digest") not in (None, source.digest):
                self.problems.append(
                    Problem(
                        path,
                        f"the values bound to {name!r} are not the ones the plan was made for "
                        f"(digest {source.digest[:12]}, plan {str(table['digest'])[:12]}); bind "
                        f"the same values or compile a new plan",
                    )
                )
            return attrs.evolve(source, name=name)
        fn = self.read_callable({path: table}, path, value_fn)
        return None if fn is None else LengthSource("callable", fn=fn)

    def values_section(
        self,
        data: Mapping[str, Any],
        name: str,
        source_key: str,
        field: str,
        options: tuple[str, ...],
        make: Callable[..., tuple[S, object | None]],
    ) -> S | None:
        """Read table ``name``: a per-sample value source at ``source_key``, and ``options``.

        ``make(value, **options)`` is the section's constructor (the builder's ``with_*``
        checks): it checks the options, and the source once read (a column name or the bound
        values); the source goes to the spec's attribute ``field``.
        """
        if name not in data:
            return None
        sec = self.section(data, name, (source_key, *options))
        given = {k: sec[k] for k in options if k in sec}
        base = self.attempt(lambda: make("placeholder", **given))
        source = self.values_source(
            sec.get(source_key), f"{name}.{source_key}", lambda v: getattr(make(v)[0], field)
        )
        if base is None or source is None:
            return None
        chosen: S = attrs.evolve(base[0], **{field: source})
        return chosen


def value_fn(fn: object) -> tuple[CallableSpec, object | None]:
    """Check a per-sample function read from a file: it must be callable."""
    if not callable(fn):
        raise PlanTypeError.single(
            "plan", f"a per-sample function must be callable (got {type(fn).__name__})"
        )
    return CallableSpec("binding", "value"), fn
