"""The ``multimodal`` collator: one registered collator per group of keys, one flat batch.

Options, as plain data (what a plan file stores)::

    {"collators": {
        "pixel_values": {"name": "vision", "options": {"normalize": "imagenet"}},
        "text": {"name": "text", "keys": ["input_ids", "attention_mask"],
                 "options": {"pad_token_id": 0}},
    }}

Each *entry* of ``collators`` names a registered collator (``name``), its ``options`` (default
none) and the sample ``keys`` it owns. Without ``keys``, an entry owns the keys its collator is
configured to read (its ``image_key`` or ``keys`` attribute: ``vision``'s ``image_key``, the
text collators' ``keys``), or else the key named like the entry. With ``keys``, every key the
collator reads must be among them. A key is owned by one entry at most. For every batch, each
entry's collator receives, per sample, the sub-mapping of its keys (in the samples' key order)
and must return a mapping; keys no entry owns go through the ``default`` collator. The results
are merged into one flat dict, ordered like the samples' keys (an entry's outputs sit where its
first key was); two entries producing the same output key is an error.

Context and device hooks are forwarded: entries whose collator has ``uses_context = True`` are
called with the batch context, and after the batch reached its device each entry's
``on_device`` is applied to the sub-mapping of the keys it owns.

Sub-collators are built when the multimodal collator is (at ``compile()`` to check their
options, and at ``build()``), and travel to workers inside it by pickling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loaderkit._validate import unknown_keys
from loaderkit.collators.base import (
    BatchContext,
    Collator,
    check_keys,
    check_mapping_option,
    check_names_option,
    data_error,
    option_error,
)
from loaderkit.collators.default import default_collate
from loaderkit.errors import DataError, PlanError, PlanTypeError, Problem

__all__ = ["ENTRY_FIELDS", "MultimodalCollator"]

ENTRY_FIELDS = ("name", "options", "keys")
"""The fields of one entry of the ``collators`` option."""

_PATH = "collator.options.collators"
_READ_KEY_ATTRIBUTES = ("image_key", "keys")
"""Attributes by which a built collator says which sample keys it reads (checked against the
keys its entry owns)."""


def _plain(value: object) -> object:
    """Options as plain data: mappings become dicts, tuples lists (as a plan file holds them)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _declared_reads(collate: object) -> list[str]:
    """The sample keys a built collator says it reads (``image_key``, ``keys``), if any."""
    reads: list[str] = []
    for attribute in _READ_KEY_ATTRIBUTES:
        value = getattr(collate, attribute, None)
        if isinstance(value, str):
            reads.append(value)
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            reads.extend(value)
    return reads


def _overrides_on_device(collate: object) -> bool:
    finish = getattr(type(collate), "on_device", None)
    return callable(finish) and finish is not Collator.on_device


def _entry(entry: str, spec: object) -> tuple[dict[str, Any], Callable[..., Any]]:
    """One entry checked and built: ({"name", "options", "keys"}, collator).

    Raises a PlanError holding the entry's problems, at paths under
    ``collator.options.collators.<entry>``.
    """
    from loaderkit.collators import collators as registry

    where = f"collators.{entry}"
    spec = check_mapping_option(where, spec, what="{'name': ..., 'options': {...}, 'keys': [...]}")
    found = unknown_keys(f"{_PATH}.{entry}", list(spec), ENTRY_FIELDS)
    if found:
        raise PlanError(found)
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise option_error(
            f"{where}.name",
            f"must name a registered collator (got {type(name).__name__} {name!r})",
            type_error=not isinstance(name, str),
        )
    if name not in registry:
        raise option_error(f"{where}.name", registry.unknown_message(name))
    options = check_mapping_option(
        f"{where}.options", spec.get("options", {}), what="of option names to values"
    )
    keys = spec.get("keys")
    if keys is not None:
        keys = check_names_option(f"{where}.keys", keys, what="sample keys")
    sub = _build_sub(registry.get(name), options, where)
    reads = _declared_reads(sub)
    if keys is None:
        keys = reads or [entry]
    unowned = [k for k in reads if k not in keys]
    if unowned:
        raise option_error(
            f"{where}.keys",
            f"entry {entry!r} owns {list(keys)} but its {name!r} collator reads {unowned}, "
            f"which it would never receive; declare every key it reads ('keys': "
            f"{list(dict.fromkeys([*keys, *unowned]))}), or set its options to read the "
            f"keys the entry owns",
        )
    return {"name": name, "options": _plain(options), "keys": list(keys)}, sub


def _build_sub(entry: Any, options: dict[str, Any], where: str) -> Callable[..., Any]:
    """Build one sub-collator; its option problems get paths under ``<where>.options``."""
    path = f"collator.options.{where}"
    found = entry.signature_problems(options)
    if found:
        raise PlanError(
            Problem(f"{path}.options.{o}" if o else f"{path}.options", m) for o, m in found
        )
    try:
        sub = entry.factory(**options)
    except PlanError as exc:
        problems = []
        for p in exc.problems:
            rest = p.path.removeprefix("collator.options").lstrip(".")
            problems.append(
                Problem(f"{path}.options.{rest}" if rest else f"{path}.options", p.message)
            )
        raise (PlanTypeError if isinstance(exc, PlanTypeError) else PlanError)(problems) from exc
    except (TypeError, ValueError) as exc:
        raise option_error(
            f"{where}.options", f"{entry.name!r} refused its options: {exc}"
        ) from exc
    if not callable(sub):
        raise option_error(f"{where}.name", f"{entry.name!r} did not give a callable")
    result: Callable[..., Any] = sub
    return result


class MultimodalCollator(Collator):
    """Compose registered collators per key (see the module docstring for the option shape)."""

    name = "multimodal"
    uses_context = True  # forwarded to the entries that use it

    def __init__(self, *, collators: Mapping[str, Mapping[str, Any]]) -> None:
        checked = check_mapping_option(
            "collators",
            collators,
            what="of entries {entry: {'name': ..., 'options': {...}, 'keys': [...]}}",
            nonempty=True,
        )
        problems: list[Problem] = []
        wrong_types = True  # all problems are of values of the wrong type: a PlanTypeError
        entries: dict[str, dict[str, Any]] = {}
        built: dict[str, Callable[..., Any]] = {}
        owner: dict[str, str] = {}
        for entry, spec in checked.items():
            try:
                resolved, sub = _entry(entry, spec)
            except PlanError as exc:
                problems.extend(exc.problems)
                wrong_types = wrong_types and isinstance(exc, PlanTypeError)
                continue
            taken = [k for k in resolved["keys"] if k in owner]
            for key in taken:
                problems.append(
                    Problem(
                        f"{_PATH}.{entry}.keys",
                        f"key {key!r} is already owned by entry {owner[key]!r}; a key belongs "
                        f"to one entry",
                    )
                )
            if taken:
                wrong_types = False
                continue
            owner.update(dict.fromkeys(resolved["keys"], entry))
            entries[entry] = resolved
            built[entry] = sub
        if problems:
            raise (PlanTypeError if wrong_types else PlanError)(problems)
        self.collators = entries
        self._built = built
        self._owner = owner

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MultimodalCollator) or type(self) is not type(other):
            return False
        return self.collators == other.collators

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Collate each entry's keys with its collator, the rest with ``default``; merge."""
        keys = check_keys(samples, collator=self.name)
        present = set(keys)
        results: dict[str | None, Mapping[str, Any]] = {}
        for entry, sub in self._built.items():
            own = set(self.collators[entry]["keys"])
            missing = sorted(own - present)
            if missing:
                raise data_error(
                    self.name,
                    f"entry {entry!r} owns keys {missing} the samples do not have (keys: {keys})",
                )
            mine = [k for k in keys if k in own]
            part = [{k: s[k] for k in mine} for s in samples]
            results[entry] = self._run(entry, sub, part, context)
        rest = [k for k in keys if k not in self._owner]
        if rest:
            results[None] = default_collate([{k: s[k] for k in rest} for s in samples])
        batch: dict[str, Any] = {}
        producer: dict[str, str | None] = {}
        done: set[str | None] = set()
        for key in keys:
            group = self._owner.get(key)
            if group in done:
                continue
            done.add(group)
            for out_key, value in results[group].items():
                if out_key in batch:
                    first = producer[out_key]
                    raise data_error(
                        self.name,
                        f"entries {first or 'default'!r} and {group or 'default'!r} both produce "
                        f"key {out_key!r}; give one of them other output keys",
                    )
                batch[out_key] = value
                producer[out_key] = group
        return batch

    def _run(
        self,
        entry: str,
        sub: Callable[..., Any],
        part: list[dict[str, Any]],
        context: BatchContext | None,
    ) -> Mapping[str, Any]:
        name = self.collators[entry]["name"]
        try:
            if getattr(sub, "uses_context", False):
                result = sub(part, context=context)
            else:
                result = sub(part)
        except DataError as exc:
            raise DataError(
                f"collator 'multimodal', entry {entry!r} ({name!r}): {exc.message}",
                collator=exc.collator or name,
            ) from exc
        except Exception as exc:
            raise DataError(
                f"collator 'multimodal', entry {entry!r} ({name!r}): {type(exc).__name__}: {exc}",
                collator=name,
            ) from exc
        if not isinstance(result, Mapping):
            raise DataError(
                f"collator 'multimodal': entry {entry!r} ({name!r}) returned a "
                f"{type(result).__name__}; an entry's collator must return a mapping of keys",
                collator=name,
            )
        return result

    def on_device(self, batch: Any) -> Any:
        """Apply each entry's ``on_device`` to the sub-mapping of the keys it owns."""
        if not isinstance(batch, Mapping):
            return batch
        out = dict(batch)
        for entry, sub in self._built.items():
            if not _overrides_on_device(sub):
                continue
            own = [k for k in self.collators[entry]["keys"] if k in batch]
            if not own:
                continue
            finished = sub.on_device({k: batch[k] for k in own})  # type: ignore[attr-defined]
            if not isinstance(finished, Mapping):
                raise data_error(
                    self.name,
                    f"on_device of entry {entry!r} returned a {type(finished).__name__}, not a "
                    f"mapping",
                )
            for key in own:
                if key not in finished:
                    del out[key]
            out.update(finished)
        return out


BUILTINS: list[tuple[str, type, str | None, str]] = [
    (
        "multimodal",
        MultimodalCollator,
        "multimodal",
        "compose registered collators per key (e.g. vision for images, text for tokens); "
        "the other keys go through default; one flat dict",
    ),
]
"""(registry name, collator class, modality, one-line description) of this module's collators."""
