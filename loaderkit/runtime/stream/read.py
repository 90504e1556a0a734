"""How a stream is read: its hooks, the seeded reading, the shuffle buffer, the even gate.

The pieces a :class:`~loaderkit.runtime.stream.producer.Producer` reads its shard with, and
the item it sends to the main process (:class:`StreamItem`); see
:mod:`loaderkit.runtime.stream.loader` for the order they make.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from loaderkit.errors import DataError, NotBuiltYetError, PlanError
from loaderkit.runtime.fetch.global_rngs import seed_globals
from loaderkit.runtime.records import Skipped

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "SHARD_HOOK",
    "WORKER_SPLIT",
    "EvenGate",
    "StreamItem",
    "StreamProbe",
    "buffer_shuffle",
    "hf_resume_caveat",
    "is_stateful",
    "refuse_unsupported",
    "resume_mode",
    "same_streams",
    "seeded_elements",
    "sharding_of",
    "stream_length",
]


SHARD_HOOK = "shard"
"""The method a torch ``IterableDataset`` may define to read one shard itself:
``dataset.shard(num_shards, index)`` returns an iterable of shard ``index``'s elements."""

WORKER_SPLIT = "splits_by_worker"
"""The attribute a torch ``IterableDataset`` sets to say how it treats worker processes.

``True``: it splits itself by ``torch.utils.data.get_worker_info()`` (the pattern torch's
documentation teaches), so each worker's stream is taken whole (and split across ranks by
element). ``False``: it yields the whole stream in every process (checking that is skipped).
Unset: the stream is read by element, and with 2 or more workers the producers compare the
first elements they read; if they differ, the pass stops with a ``DataError`` naming this
attribute instead of delivering part of the data."""

_DRAWS = 4096
"""Buffer-shuffle indices drawn at a time."""

_END: Any = object()


def seeded_elements(
    opened: Callable[[], Iterable[Any]],
    seed: int,
    epoch: int,
    stream: tuple[str | int, ...],
    position: Callable[[int], int],
    start: int,
) -> Iterator[Any]:
    """The elements of ``opened()``, the global RNGs seeded by position before each is read.

    ``opened()`` and its ``iter()`` run with them seeded by ``stream`` (which stream it is:
    the same for every producer that reads the same one); the ``n``-th element read (counting
    from ``start``) with them seeded by its stream position ``position(n)``.
    """
    seed_globals(seed, "stream-global-rng", epoch, "iter", *stream)
    it = iter(opened())
    for n in itertools.count(start):
        seed_globals(seed, "stream-global-rng", epoch, position(n))
        item = next(it, _END)
        if item is _END:
            return
        yield item


class EvenGate:
    """Whether the other ranks' producers of the same worker id have a batch ``j`` too.

    ``even_batches`` for a stream: a producer delivers its batch ``j`` only if every other
    rank's producer of its worker id has one (at least ``j x batch_size + 1`` elements, or
    ``(j + 1) x batch_size`` with ``drop_last``), so every rank's producer ``w`` delivers as
    many batches as the shortest one, and every rank as many as the others. The other ranks'
    shards are read here (elements counted, not transformed) as far as needed.
    """

    def __init__(
        self, peers: list[tuple[int, Callable[[], Iterable[Any]]]], size: int, drop_last: bool
    ) -> None:
        self.peers = peers
        self.size = size
        self.drop_last = drop_last
        self.streams: list[Iterator[Any] | None] = [None] * len(peers)
        self.counts = [0] * len(peers)

    def allows(self, j: int) -> bool:
        """Whether every peer has a batch ``j`` (their shards read as far as needed)."""
        need = (j + 1) * self.size if self.drop_last else j * self.size + 1
        for i, (rank, make) in enumerate(self.peers):
            stream = self.streams[i]
            if stream is None:
                stream = self.streams[i] = iter(make())
            while self.counts[i] < need:
                try:
                    item = next(stream, _END)
                except Exception as exc:
                    raise DataError(
                        f"element {self.counts[i]} of rank {rank}'s shard could not be read "
                        f"while counting it (even_batches: a rank delivers a batch only if "
                        f"every rank has one): {type(exc).__name__}: {exc}"
                    ) from exc
                if item is _END:
                    return False
                self.counts[i] += 1
        return True


class StreamItem(NamedTuple):
    """What a producer sends: a batch, its end, or a failure (as text, to cross processes)."""

    worker: int
    batch: Any = None
    positions: tuple[int, ...] = ()
    """The stream positions of the batch's samples (the ones the skip policy kept)."""
    end: bool = False
    error: str | None = None
    sample_index: int | None = None
    collator: str | None = None
    consumed: bool = False
    """A failed batch (``error``) that used up its place in the producer's shard (it failed in
    the transform or the collator): it counts as delivered, and the producer goes on with its
    next batch. A failed read is not consumed: a resume reads it again."""
    trimmed: int = 0
    """On a producer's end item: the elements of its shard it did not deliver because another
    rank's producer of the same worker id ran out first (``even_batches``)."""
    dropped: bool = False
    """Every element of the batch was skipped: there is no batch, only its records."""
    skipped: tuple[Skipped, ...] = ()
    """The elements of the batch the skip policy dropped."""
    requested: int = 0
    """How many elements the batch was made from (the kept and the skipped)."""
    digest: tuple[int, str] | None = None
    """On a producer's first item, when streams are compared: (elements, sha256) of the first
    elements its stream yielded (``None``: not compared, or not comparable)."""
    state: dict[str, Any] | None = None
    """The producer's resume state right after the batch's last element was read:
    ``{"read": elements its iterator had yielded, "source": the source's state_dict()}``
    (only for a stateful source read without a buffer shuffle)."""
    original_type: type[BaseException] | None = None
    """With ``error``: the type of the exception the data raised, if pickle can name it."""
    cause: BaseException | None = None
    """With ``error``: that exception, if it survives pickling."""
    local: int = -1
    """The producer's number for the batch: its batches of the epoch count from 0."""
    changed: tuple[str, ...] = ()
    """On a producer's end item: how the dataset changed itself while the producer read it
    (``"epoch: 0 -> 1"``; see :mod:`loaderkit.runtime.stream.changes`)."""


def buffer_shuffle(items: Iterable[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    """Shuffle ``items`` through a buffer of ``size``: each output is a random buffer slot.

    The buffer is filled first; then every new item replaces the one sent out; at the end the
    rest of the buffer comes out in a random order. The same ``rng`` state gives the same
    order.
    """
    it = iter(items)
    buffer = list(itertools.islice(it, size))
    draws: list[int] = []
    for item in it:
        if not draws:
            draws = rng.integers(0, size, _DRAWS).tolist()[::-1]
        slot = draws.pop()
        out = buffer[slot]
        buffer[slot] = item
        yield out
    for slot in rng.permutation(len(buffer)).tolist():
        yield buffer[slot]


class StreamProbe:
    """A digest of the first ``limit`` elements a producer's stream yields.

    Elements are digested by value (tensors and arrays by dtype, shape and bytes; containers
    recursively; numbers, strings and bytes by type and value); a stream with any other
    element among the first is not compared (``value()`` is ``None``).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.used = False
        self.comparable = True
        self.hash = hashlib.sha256()

    def wrap(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items`` unchanged, digesting the first ``limit`` of them as they are read."""
        self.used = True
        for item in items:
            if self.count < self.limit:
                self.count += 1
                if self.comparable:
                    self.comparable = _digest(item, self.hash)
            yield item

    def value(self) -> tuple[int, str] | None:
        """(elements digested, hex digest), or ``None`` when not comparable or not read."""
        if not self.used or not self.comparable:
            return None
        return self.count, self.hash.hexdigest()


def _digest(value: Any, into: Any) -> bool:
    """Feed ``value`` to the hash ``into``; ``False`` if it holds something not digestible."""
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        into.update(f"{type(value).__name__}:{value!r};".encode())
        return True
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous()
        into.update(f"tensor:{value.dtype}:{tuple(value.shape)};".encode())
        flat = value.reshape(-1)  # a 0-d tensor cannot be viewed as bytes
        into.update(flat.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
        return True
    if isinstance(value, np.ndarray):
        into.update(f"array:{value.dtype}:{value.shape};".encode())
        into.update(np.ascontiguousarray(value).tobytes())
        return True
    if isinstance(value, Mapping):
        into.update(f"map:{len(value)};".encode())
        return all(_digest(k, into) and _digest(v, into) for k, v in value.items())
    if isinstance(value, list | tuple):
        into.update(f"seq:{len(value)};".encode())
        return all(_digest(v, into) for v in value)
    return False


def same_streams(items: Iterator[StreamItem], producers: int) -> Iterator[StreamItem]:
    """``items``, once every producer's first item showed that they read the same stream.

    Raises :class:`DataError` when two producers' first elements differ: the source yields
    another stream in each worker (it splits itself by ``get_worker_info``, or draws from a
    per-worker RNG), and reading it by element would deliver part of the data.
    """
    firsts: dict[int, StreamItem] = {}
    held: list[StreamItem] = []
    for item in items:
        held.append(item)
        firsts.setdefault(item.worker, item)
        if len(firsts) == producers:
            break
    digests = {w: i.digest for w, i in sorted(firsts.items()) if i.digest is not None}
    if len(set(digests.values())) > 1:
        a = min(digests)
        b = next(w for w, d in digests.items() if d != digests[a])
        da, db = digests[a], digests[b]
        raise DataError(
            f"the iterable dataset yields a different stream in each worker: worker {a}'s "
            f"first {da[0]} element(s) differ from worker {b}'s first {db[0]}. Read by "
            f"element (element k to shard k mod shards), every worker must see the whole "
            f"stream, else only part of the data is delivered. If the dataset splits itself "
            f"with torch.utils.data.get_worker_info() (torch's documented pattern), set "
            f"{WORKER_SPLIT} = True on it (each worker's stream is then taken whole), or "
            f"define {SHARD_HOOK}(num_shards, index); if it draws from a per-worker RNG, "
            f"make its stream the same in every process; if its first elements only look "
            f"different (e.g. sets), set {WORKER_SPLIT} = False",
            worker_id=b,
        )
    yield from held
    yield from items


def is_stateful(data: object) -> bool:
    """Whether ``data`` defines both ``state_dict()`` and ``load_state_dict(state)``."""
    return callable(getattr(data, "state_dict", None)) and callable(
        getattr(data, "load_state_dict", None)
    )


def hf_resume_caveat(data: object) -> str | None:
    """Why HF's own ``state_dict()`` would not resume ``data`` exactly, or ``None``.

    HF documents two cases where its resume is not exact: a shuffle buffer
    (``IterableDataset.shuffle``: the buffer's content is not in the state, so it is refilled
    with other data) and a batched ``map()`` over arrow-formatted data (a batch may be skipped).
    Both are found by walking the dataset's chain of example iterables.
    """
    root = getattr(data, "_ex_iterable", None)
    if root is None:
        return "this datasets version's IterableDataset cannot be inspected for a shuffle buffer"
    todo: list[Any] = [root]
    while todo:
        node = todo.pop()
        if type(node).__name__ == "BufferShuffledExamplesIterable":
            return (
                "its own shuffle buffer (IterableDataset.shuffle(buffer_size=...)) is not in "
                "HF's state_dict(): HF would refill the buffer with other data"
            )
        if getattr(node, "batched", False) and getattr(
            getattr(node, "formatting", None), "is_table", False
        ):
            return "a batched map() over arrow-formatted data may skip a batch in HF's resume"
        child = getattr(node, "ex_iterable", None)
        if child is not None:
            todo.append(child)
        todo.extend(getattr(node, "ex_iterables", None) or ())
    return None


def stream_length(data: Any, name: str, sharding: str, producers: int) -> int:
    """The dataset's ``len()``, if it fixes the batches per epoch; else ``TypeError``.

    ``data`` is bound as ``name`` and read with ``sharding`` by ``producers`` per rank.
    """
    head = f"a StreamLoader has no len() here: dataset {name!r} is streamed (iterable) and "
    tail = "; count batches while iterating, or pass a map-style dataset"
    if sharding == "hf":
        why = (
            "an HF IterableDataset has no length (its rows are known only once read, "
            "and it is split into shards by HF across ranks and workers)"
        )
    elif sharding == "hook":
        why = f"it is read through its {SHARD_HOOK}() hook, so the sizes of its shards are its own"
    elif sharding == "worker" and producers > 1:
        why = (
            f"it splits itself by worker ({WORKER_SPLIT} = True), into parts whose sizes "
            f"only its __iter__ knows"
        )
    elif not hasattr(type(data), "__len__"):
        why = (
            f"{type(data).__name__} defines no __len__, so its number of batches is "
            f"only known once an epoch was read"
        )
    else:
        sized: Any = data
        try:
            return len(sized)
        except Exception as exc:  # a failing __len__: the count is unknown, as torch says
            kind = type(sized).__name__
            why = f"len() of {kind} failed ({type(exc).__name__}: {exc})"
            raise TypeError(head + why + tail) from exc
    raise TypeError(head + why + tail)


def refuse_unsupported(plan: LoaderPlan) -> None:
    """Raise :class:`NotBuiltYetError` for what a stream cannot follow: schedules by step."""
    name = plan.dataset.binding
    why = (
        f"the producers of a stream make their batches independently, ahead of delivery "
        f"and without a length to plan from, so where the iterable dataset {name!r} is "
        f"made there is no global step to look the value up by"
    )
    if plan.batch.scheduled and plan.batch.by == "step":
        raise NotBuiltYetError(
            f"batch.by: a batch size scheduled by step is not supported for streams: "
            f"{why}; schedule it by epoch (with_batch_size([...], by='epoch')), or pass "
            f"a map-style dataset"
        )
    if plan.max_length is not None and plan.max_length.by == "step":
        raise NotBuiltYetError(
            f"max_length.by: a max_length scheduled by step is not supported for streams: "
            f"{why}; schedule it by epoch (with_max_length([...], by='epoch')), or pass a "
            f"map-style dataset"
        )


def resume_mode(plan: LoaderPlan, data: Any, sharding: str) -> tuple[bool, str]:
    """Whether resumes load saved source states, and if not, why they replay.

    ``data`` is what the producers read, with ``sharding`` (``"hf"``, ``"hook"``, ...).
    """
    if plan.order.shuffle and plan.order.buffer_size is not None:
        return False, (
            "the buffer shuffle has read ahead of the delivered batches, and the buffer's "
            "content is not in any source state"
        )
    if sharding == "hf":
        caveat = hf_resume_caveat(data)
        return (False, f"the HF dataset: {caveat}") if caveat else (True, "")
    if is_stateful(data):
        return True, ""
    return False, (
        f"{type(data).__name__} defines no state_dict() / load_state_dict() to continue from"
    )


def sharding_of(plan: LoaderPlan, data: Any, world_size: int, rank: int) -> tuple[str, Any]:
    """How the stream ``data`` is split into shards, and what the producers then read.

    ``"hf"``: an HF ``IterableDataset``, split across ranks by HF (the result is this rank's
    split); ``"hook"``: the dataset's :data:`SHARD_HOOK`; ``"worker"``: it splits itself by
    worker (:data:`WORKER_SPLIT` is ``True``); ``"element"``: read by element.
    """
    sharding: str
    if plan.dataset.kind == "hf_iterable":
        sharding = "hf"
        if world_size > 1:
            from datasets.distributed import split_dataset_by_node

            data = split_dataset_by_node(data, rank=rank, world_size=world_size)
    elif callable(getattr(data, SHARD_HOOK, None)):
        sharding = "hook"
    else:
        split = getattr(data, WORKER_SPLIT, None)
        if split is not None and not isinstance(split, bool):
            raise PlanError.single(
                "dataset",
                f"{type(data).__name__}.{WORKER_SPLIT} must be True (it splits itself by "
                f"torch.utils.data.get_worker_info()), False (it yields the whole stream in "
                f"every worker) or unset (got {split!r})",
            )
        sharding = "worker" if split else "element"
    return sharding, data
