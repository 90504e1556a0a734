"""The registry of dataset factories: names, and which options of each hold file paths.

``register`` adds a factory (a call or a decorator); ``factories`` is the
:class:`~loaderkit.registry.Registry` a plan's ``[dataset.source]`` name is looked up in;
:func:`path_options` says which options of a registered factory hold paths (made absolute by
``load``, stored relative to a plan file's folder, confined to it when a file is loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from loaderkit.registry import Registry

__all__ = ["factories", "path_options", "register"]

F = TypeVar("F", bound=Callable[..., Any])

factories: Registry[Callable[..., Any]] = Registry(
    "dataset", entry_point_group="loaderkit.datasets"
)
"""The registry of dataset factories, by name."""

_PATH_OPTIONS: dict[str, tuple[str, ...]] = {}
"""Registered name -> the options of its factory that hold file paths."""


def path_options(name: str) -> tuple[str, ...]:
    """The options of the factory registered as ``name`` that hold file paths (else none)."""
    return _PATH_OPTIONS.get(name, ())


def declare_paths(name: str, paths: Sequence[str]) -> None:
    """Record that the options ``paths`` of the factory ``name`` hold file paths."""
    _PATH_OPTIONS[name] = tuple(paths)


@overload
def register(
    name: str,
    factory: None = None,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> Callable[[F], F]: ...


@overload
def register(
    name: str,
    factory: F,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> F: ...


def register(
    name: str,
    factory: F | None = None,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> F | Callable[[F], F]:
    """Register a dataset factory ``(**options) -> dataset`` under ``name``.

    Works as a call or as a decorator: ``@loaderkit.datasets.register("wiki")``. ``paths``
    names the options holding file paths (a string or a list of strings). The description
    defaults to the first line of the factory's docstring. A taken name raises ``ValueError``
    unless ``replace=True``.
    """
    if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
        raise TypeError(f"paths must be a sequence of option names (got {paths!r})")

    def decorate(fn: F) -> F:
        factories.register(name, fn, description=description, replace=replace)
        declare_paths(name, paths)
        return fn

    if factory is None:
        return decorate
    return decorate(factory)
