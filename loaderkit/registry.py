"""Registries: names that plan files use for factories (collators, transforms, ...).

A plan file never holds code. It holds *names*: a registry name (``"default"``), a
``module:qualname`` reference, or the name of a *binding* that the caller supplies again when
loading. This module owns the first two:

- :class:`Registry` maps names to factories, lists them with descriptions, suggests the
  closest name for a typo and loads plugins from an entry-point group on first use.
- :func:`callable_ref` / :func:`resolve_ref` turn an importable function into
  ``"package.module:qualname"`` and back. Resolving never imports a module unless it is
  trusted (:func:`trust_modules`) or the caller passes ``allow_imports=True``: a plan file must
  not be a way to run code.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs

from loaderkit._checks import did_you_mean
from loaderkit.errors import LoaderkitError

__all__ = [
    "Registry",
    "RegistryEntry",
    "UnknownNameError",
    "callable_ref",
    "resolve_ref",
    "trust_modules",
    "trusted_modules",
]

F = TypeVar("F", bound=Callable[..., Any])


class UnknownNameError(LoaderkitError, LookupError):
    """A name is not in a registry; the message lists the closest name and how to register."""


@attrs.frozen
class RegistryEntry:
    """One registered factory."""

    name: str
    factory: Callable[..., Any]
    description: str = ""
    modality: str | None = None
    origin: str = "builtin"
    validate: bool = False

    def option_problems(self, options: dict[str, object]) -> list[tuple[str, str]]:
        """Signature problems, then what a ``validate`` factory says of the values.

        Returns ``(option, message)`` pairs; option ``""`` means the options as a whole.
        """
        problems = self.signature_problems(options)
        if problems or not self.validate:
            return problems
        from loaderkit.errors import PlanError

        try:
            self.factory(**options)
        except PlanError as exc:
            return [(p.path.removeprefix("collator.options."), p.message) for p in exc.problems]
        except (TypeError, ValueError) as exc:
            return [("", f"{self.name!r} refused its options: {exc}")]
        return []

    def signature_problems(
        self, options: dict[str, object], *, positional: Sequence[str] = ()
    ) -> list[tuple[str, str]]:
        """Return ``(option, message)`` for each option the factory's signature does not take.

        Also one for each required option missing. ``positional`` names parameters the caller
        passes by position (a preset's dataset): they are neither options nor missing.
        """
        try:
            signature = inspect.signature(self.factory)
        except (TypeError, ValueError):  # builtins without a signature accept anything
            return []
        params = signature.parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return []
        keyword = [
            name
            for name, p in params.items()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and name not in positional
        ]
        problems = []
        for option in options:
            if option not in keyword:
                accepted = ", ".join(keyword) if keyword else "no options"
                problems.append(
                    (
                        option,
                        f"{self.name!r} does not take option {option!r}"
                        f"{did_you_mean(option, keyword)}; it accepts: {accepted}",
                    )
                )
        required = [
            name
            for name, p in params.items()
            if p.default is inspect.Parameter.empty
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and name not in positional
        ]
        for name in required:
            if name not in options:
                problems.append((name, f"{self.name!r} needs option {name!r}; pass {name}=..."))
        return problems


class Registry(Generic[F]):
    """Names → factories for one kind of component (e.g. ``"collator"``).

    ``register`` works as a call or as a decorator. Entry points of the group
    ``entry_point_group`` are loaded the first time a name is looked up or listed; each entry
    point's value is a factory registered under the entry point's name.
    """

    def __init__(self, kind: str, *, entry_point_group: str | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._entries: dict[str, RegistryEntry] = {}
        self._lock = threading.Lock()
        self._plugins_loaded = entry_point_group is None

    @overload
    def register(
        self,
        name: str,
        factory: None = None,
        *,
        description: str = "",
        modality: str | None = None,
        replace: bool = False,
        origin: str = "user",
        validate: bool = False,
    ) -> Callable[[F], F]: ...

    @overload
    def register(
        self,
        name: str,
        factory: F,
        *,
        description: str = "",
        modality: str | None = None,
        replace: bool = False,
        origin: str = "user",
        validate: bool = False,
    ) -> F: ...

    def register(
        self,
        name: str,
        factory: F | None = None,
        *,
        description: str = "",
        modality: str | None = None,
        replace: bool = False,
        origin: str = "user",
        validate: bool = False,
    ) -> F | Callable[[F], F]:
        """Register ``factory`` under ``name``; without ``factory``, return a decorator.

        ``modality`` ("text", "vision", "audio", ...) lets ``with_task`` and ``"auto"`` find
        it. ``validate=True`` calls the factory with the plan's options at ``compile()`` so it
        can refuse bad values early (keep such factories cheap and free of side effects).
        Registering a taken name raises ``ValueError`` unless ``replace=True``.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{self.kind} names must be non-empty strings (got {name!r})")

        def decorate(fn: F) -> F:
            if not callable(fn):
                raise TypeError(f"{self.kind} {name!r}: the factory must be callable (got {fn!r})")
            doc = description or (inspect.getdoc(fn) or "").split("\n", 1)[0]
            entry = RegistryEntry(name, fn, doc, modality, origin, validate)
            with self._lock:
                if name in self._entries and not replace:
                    raise ValueError(
                        f"{self.kind} {name!r} is already registered "
                        f"({self._entries[name].origin}); pass replace=True to override it"
                    )
                self._entries[name] = entry
            return fn

        if factory is None:
            return decorate
        return decorate(factory)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (mostly for tests); unknown names are ignored."""
        with self._lock:
            self._entries.pop(name, None)

    def _load_plugins(self) -> None:
        if self._plugins_loaded or self.entry_point_group is None:
            return
        self._plugins_loaded = True
        for ep in importlib.metadata.entry_points(group=self.entry_point_group):
            if ep.name in self._entries:
                continue
            factory = ep.load()
            self.register(ep.name, factory, origin=f"entry point {ep.value}")

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._entries:
            self._load_plugins()
        return name in self._entries

    def get(self, name: str) -> RegistryEntry:
        """Return the entry for ``name`` or raise :class:`UnknownNameError` with a suggestion."""
        if name not in self:
            raise UnknownNameError(self.unknown_message(name))
        return self._entries[name]

    def unknown_message(self, name: str) -> str:
        """The message for an unknown ``name``: the suggestion, the known names, the fix."""
        self._load_plugins()
        known = ", ".join(repr(n) for n in sorted(self._entries)) or "none"
        return (
            f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)}; "
            f"known: {known}; register one with @loaderkit.register_{self.kind}({name!r})"
        )

    def names(self) -> list[str]:
        """All registered names, sorted."""
        self._load_plugins()
        return sorted(self._entries)

    def entries(self) -> Iterator[RegistryEntry]:
        """All entries, sorted by name."""
        self._load_plugins()
        for name in sorted(self._entries):
            yield self._entries[name]

    def describe(self) -> str:
        """A table of names, modalities and descriptions, one line each."""
        rows = [f"{e.name:<16} {e.modality or '-':<11} {e.description}" for e in self.entries()]
        return "\n".join(rows)


# -- module:qualname references ----------------------------------------------------------------

_trusted: set[str] = set()


def trust_modules(*prefixes: str) -> None:
    """Allow plan files to resolve ``module:qualname`` references under these packages.

    ``trust_modules("myproject")`` lets ``LoaderPlan.load`` resolve (and import if needed)
    ``"myproject.data:augment"`` without ``allow_imports=True``.
    """
    for prefix in prefixes:
        if not isinstance(prefix, str) or not prefix or prefix.startswith("."):
            raise ValueError(f"module prefixes must be absolute module names (got {prefix!r})")
        _trusted.add(prefix)


def trusted_modules() -> frozenset[str]:
    """The module prefixes plan files may import from without ``allow_imports=True``."""
    return frozenset(_trusted | {"loaderkit"})


def _is_trusted(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in trusted_modules())


def callable_ref(obj: object) -> str | None:
    """``"module:qualname"`` when ``obj`` can be found again by that path, else ``None``.

    Lambdas, closures, bound methods and objects defined in ``__main__`` have no stable path
    and return ``None`` (they are stored as bindings instead).
    """
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module == "__main__" or "<" in qualname:
        return None
    mod = sys.modules.get(module)
    if mod is None:
        return None
    target: object = mod
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            return None
    return f"{module}:{qualname}" if target is obj else None


def resolve_ref(ref: str, *, allow_imports: bool = False) -> object:
    """Return the object named by ``"module:qualname"``.

    The module must be trusted (:func:`trust_modules`) or ``allow_imports`` must be true;
    otherwise ``PermissionError`` says so and how to allow it. Raises ``LookupError`` when the
    reference does not resolve.
    """
    module, sep, qualname = ref.partition(":")
    if not sep or not module or not qualname:
        raise LookupError(f"{ref!r} is not a 'module:qualname' reference")
    if not (allow_imports or _is_trusted(module)):
        raise PermissionError(
            f"plan refers to {ref!r} but module {module!r} is not trusted; pass "
            f"allow_imports=True, call loaderkit.trust_modules({module.split('.')[0]!r}), or "
            f"supply the object in bindings"
        )
    try:
        target: object = importlib.import_module(module)
    except ImportError as exc:
        raise LookupError(f"cannot import module {module!r} for {ref!r}: {exc}") from exc
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise LookupError(f"module {module!r} has no attribute {qualname!r}") from None
    return target
