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

import contextlib
import contextvars
import importlib
import importlib.metadata
import inspect
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs

from loaderkit._text import shown
from loaderkit._validate import did_you_mean
from loaderkit.errors import LoaderkitError

__all__ = [
    "PluginNotImportedError",
    "Registry",
    "RegistryEntry",
    "UnknownNameError",
    "callable_ref",
    "no_plugin_imports",
    "parse_ref",
    "resolve_ref",
    "trust_modules",
    "trusted_modules",
]

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRIES: weakref.WeakSet[Registry[Any]] = weakref.WeakSet()
"""Every registry loaderkit keeps: what a reference into loaderkit may resolve to."""


class UnknownNameError(LoaderkitError, LookupError):
    """A name is not in a registry; the message lists the closest name and how to register."""


class PluginNotImportedError(LoaderkitError, LookupError):
    """A name is a plugin's, and plugins are not imported now (see :func:`no_plugin_imports`)."""


_NO_PLUGIN_IMPORTS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "loaderkit_no_plugin_imports", default=False
)


@contextlib.contextmanager
def no_plugin_imports() -> Iterator[None]:
    """Within the block, no registry imports an entry-point plugin.

    Looking up a plugin's name that nothing imported yet raises
    :class:`PluginNotImportedError` instead: inspecting a plan (``require_bindings=False``)
    checks such names when the plan is loaded to build (``docs/security.md``).
    """
    token = _NO_PLUGIN_IMPORTS.set(True)
    try:
        yield
    finally:
        _NO_PLUGIN_IMPORTS.reset(token)


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
    ``entry_point_group`` are plugins: their *names* are known from the installed packages'
    metadata without importing anything, and an entry point is loaded (its module imported)
    only when its own name is looked up with :meth:`get` or all entries are listed. Each entry
    point's value is a factory registered under the entry point's name.
    """

    def __init__(self, kind: str, *, entry_point_group: str | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._entries: dict[str, RegistryEntry] = {}
        self._lock = threading.Lock()
        self._plugins: dict[str, importlib.metadata.EntryPoint] | None = (
            {} if entry_point_group is None else None
        )
        _REGISTRIES.add(self)

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

    def _plugin_names(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The group's entry points by name, read from package metadata (nothing imported)."""
        if self._plugins is None:
            group = self.entry_point_group
            found = {} if group is None else importlib.metadata.entry_points(group=group)
            self._plugins = {ep.name: ep for ep in found}
        return self._plugins

    def _load_plugin(self, name: str) -> None:
        ep = self._plugin_names().get(name)
        if ep is None or name in self._entries:
            return
        if _NO_PLUGIN_IMPORTS.get():
            raise PluginNotImportedError(
                f"{self.kind} {name!r} comes from the entry point {ep.value!r}, which is "
                f"imported only when the plan is loaded to build, not to inspect it"
            )
        try:
            factory = ep.load()
        except Exception as exc:  # any import failure of a plugin is reported
            raise UnknownNameError(
                f"{self.kind} {name!r} comes from the entry point {ep.value!r}, which failed to "
                f"load: {type(exc).__name__}: {exc}; reinstall or fix the package that "
                f"provides it"
            ) from exc
        with self._lock:
            if name not in self._entries:  # a registration in the meantime wins
                doc = (inspect.getdoc(factory) or "").split("\n", 1)[0]
                self._entries[name] = RegistryEntry(
                    name, factory, doc, None, f"entry point {ep.value}"
                )

    def _load_plugins(self) -> None:
        for name in list(self._plugin_names()):
            self._load_plugin(name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return name in self._entries or name in self._plugin_names()

    def loaded(self, name: str) -> RegistryEntry | None:
        """The entry for ``name`` if it is registered and loaded, without importing a plugin."""
        return self._entries.get(name)

    def get(self, name: str) -> RegistryEntry:
        """Return the entry for ``name`` or raise :class:`UnknownNameError` with a suggestion.

        A plugin registered by entry point is imported here, the first time its name is used.
        """
        if name not in self:
            raise UnknownNameError(self.unknown_message(name))
        self._load_plugin(name)
        return self._entries[name]

    def unknown_message(self, name: str) -> str:
        """The message for an unknown ``name``: the suggestion, the known names, the fix."""
        names = self.names()
        known = ", ".join(repr(n) for n in names) or "none"
        return (
            f"unknown {self.kind} {name!r}{did_you_mean(name, names)}; "
            f"known: {known}; register one with @loaderkit.register_{self.kind}({name!r})"
        )

    def names(self) -> list[str]:
        """All registered names (plugins included, without importing them), sorted."""
        return sorted(set(self._entries) | set(self._plugin_names()))

    def entries(self) -> Iterator[RegistryEntry]:
        """All entries, sorted by name (plugins are imported to list them)."""
        self._load_plugins()
        for name in sorted(self._entries):
            yield self._entries[name]

    def describe(self) -> str:
        """A table of names, modalities and descriptions, one line each."""
        rows = [f"{e.name:<16} {e.modality or '-':<11} {e.description}" for e in self.entries()]
        return "\n".join(rows)


# -- module:qualname references ----------------------------------------------------------------

_trusted: set[str] = set()

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_OWN_PACKAGE = "loaderkit"


def trust_modules(*prefixes: str) -> None:
    """Allow plan files to resolve ``module:qualname`` references under these packages.

    ``trust_modules("myproject")`` lets ``LoaderPlan.load`` resolve (and import if needed)
    ``"myproject.data:augment"`` without ``allow_imports=True``. Trusting a package means
    trusting every class and function *defined* in it: a plan file may then make loaderkit
    call them. What the package merely imports (``os``, ``subprocess``, ...) stays out of
    reach (see :func:`resolve_ref`).
    """
    for prefix in prefixes:
        if not isinstance(prefix, str) or not _is_module_name(prefix):
            raise ValueError(
                f"module prefixes must be absolute dotted module names such as 'myproject' "
                f"(got {prefix!r})"
            )
        _trusted.add(prefix)


def trusted_modules() -> frozenset[str]:
    """The module prefixes plan files may import from without ``allow_imports=True``.

    Only what :func:`trust_modules` added: loaderkit's own modules are not on the list (a
    plan reaches loaderkit's objects through its registries, by name).
    """
    return frozenset(_trusted)


def _is_module_name(name: str) -> bool:
    return all(_IDENTIFIER.match(part) for part in name.split("."))


def _is_trusted(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in _trusted)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


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


def parse_ref(ref: object) -> tuple[str, str]:
    """Split ``"module:qualname"`` into its two parts; ``LookupError`` if it is not one.

    Both parts must be dotted Python identifiers (no spaces, no ``<locals>``, no leading
    dot), at most 512 characters in all.
    """
    if not isinstance(ref, str) or len(ref) > 512:
        raise LookupError(f"{_short(ref)} is not a 'module:qualname' reference")
    module, sep, qualname = ref.partition(":")
    if not sep or not _is_module_name(module) or not _is_module_name(qualname):
        raise LookupError(
            f"{ref!r} is not a 'module:qualname' reference (dotted Python names on both "
            f"sides of one colon, e.g. 'mypackage.data:tokenize')"
        )
    return module, qualname


def _short(value: object) -> str:
    return shown(value, 80)


def _registered(target: object) -> bool:
    """True when ``target`` is the factory of an entry of any registry loaderkit keeps."""
    return any(
        entry.factory is target
        for registry in list(_REGISTRIES)
        for entry in list(registry._entries.values())
    )


def resolve_ref(ref: str, *, allow_imports: bool = False) -> object:
    """Return the class or function named by ``"module:qualname"``, never running its code.

    The rules (``docs/security.md``):

    - the module must be trusted (:func:`trust_modules`) or ``allow_imports`` must be true;
      otherwise ``PermissionError`` says so and how to allow it, and nothing is imported;
    - loaderkit's own modules are not trusted by default (``allow_imports`` or
      :func:`trust_modules` naming part of loaderkit opens them): a reference into ``loaderkit``
      resolves only to an object loaderkit registers (a collator, transform or dataset
      factory), which a plan can name by its registry name as well, and such a reference
      never imports a loaderkit module (one not imported yet holds nothing registered);
    - ``qualname`` is walked with :func:`inspect.getattr_static` (no property, descriptor or
      module ``__getattr__`` runs), only through classes: a step through a module object or
      any other value is refused;
    - the object found must be a class or a function *defined* in that module or below it
      (its ``__module__``), not something the module imported (``os.system``, a module, an
      instance).

    Raises ``LookupError`` when the reference does not resolve or breaks a rule other than
    trust.
    """
    module, qualname = parse_ref(ref)
    own = _within(module, _OWN_PACKAGE) and not (allow_imports or _is_trusted(module))
    if not (own or allow_imports or _is_trusted(module)):
        raise PermissionError(
            f"plan refers to {ref!r} but module {module!r} is not trusted; pass "
            f"allow_imports=True, call loaderkit.trust_modules({module.split('.')[0]!r}), or "
            f"supply the object in bindings"
        )
    if own and module not in sys.modules:  # what loaderkit registers is imported already
        raise LookupError(
            f"plan refers to {ref!r}, but loaderkit registers nothing in {module!r} (a module "
            f"not imported is not imported for a plan); name loaderkit's collators, transforms "
            f"and dataset factories by their registry names"
        )
    try:
        target: object = importlib.import_module(module)
    except ImportError as exc:
        raise LookupError(f"cannot import module {module!r} for {ref!r}: {exc}") from exc
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        try:
            found = inspect.getattr_static(target, part)
        except AttributeError:
            raise LookupError(f"module {module!r} has no attribute {qualname!r}") from None
        if isinstance(found, staticmethod):
            found = found.__func__
        last = i == len(parts) - 1
        kind_ok = inspect.isclass(found) or (
            last and (inspect.isfunction(found) or inspect.isbuiltin(found))
        )
        if not kind_ok:
            where = ".".join(parts[: i + 1])
            what = "a module" if inspect.ismodule(found) else f"a {type(found).__name__}"
            allowed = "a class or a function" if last else "a class"
            raise LookupError(
                f"{ref!r}: {where!r} is {what}, not {allowed}; a reference names a class or "
                f"function defined in its module, reached only through classes"
            )
        target = found
    defined = getattr(target, "__module__", None)
    if not isinstance(defined, str) or not _within(defined, module):
        raise LookupError(
            f"{ref!r}: {qualname!r} is defined in {defined!r}, not in {module!r}; refer to it "
            f"where it is defined ('{defined}:{getattr(target, '__qualname__', qualname)}'), "
            f"under the same trust rules"
        )
    if own and not _registered(target):
        raise PermissionError(
            f"plan refers to {ref!r}, which loaderkit does not register; loaderkit's own "
            f"modules are reachable only through its registries (collators, transforms, "
            f"dataset factories, by name): use the registry name, or pass the object in "
            f"bindings"
        )
    return target
