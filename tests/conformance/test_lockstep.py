"""Issue 21: loaderkit, torch's ``DataLoader`` and torchdata's ``StatefulDataLoader`` in lockstep.

The three loaders are built for one configuration (map-style or streamed, shuffled or not, 0
or 2 workers, persistent or not) over the same dataset, and one program drives them: the same
calls, in the same order, on each. A hypothesis ``RuleBasedStateMachine`` writes the programs
(``iter()``; ``next()`` once, twice or to the end of the loop on any iterator held; letting go
of one, a ``break``; ``state_dict()`` at any point; ``load_state_dict`` of a saved state into
fresh loaders (in the slow variant: fresh loaders in a fresh process); ``set_epoch``;
samples that start or stop failing to load). Each call's outcome from loaderkit is compared
with torch's and torchdata's. **The real loaders are the expectation**: nothing here says what
a loader should do. Where loaderkit differs, the difference must be a row of the table of
differences, ``loaderkit.testing.conformance.DIFFERENCES``, chosen by the *facts* of the
situation (``SITUATIONS``: what the calls before it were); a difference no row explains fails
the test, which prints the calls (the trace) that led there.

What is observed, and why it is honest:

- In dataset order (a map-style dataset without shuffling, every stream) batches compare as
  their sample ids.
- Shuffled, the orders differ by design (loaderkit's keyed permutation, torch's generator), so
  a batch is compared as *(epoch, batch index in the epoch)*. loaderkit's is read from
  ``Loader.batch_indices(epoch, i)``: the batch of sample ids is looked up among the first
  256 epochs' batches. torch and torchdata run their real ``RandomSampler`` (torch's, and
  torchdata's stateful one: what ``shuffle=True`` builds), given a generator of its own, as
  users do for reproducible runs; a batch is looked up among the first 256 permutations that
  generator draws (``torch.randperm``). The seeds are chosen so that every batch of these
  tables is distinct: a batch names one place. A counting sampler written here would be our
  model of when torch starts a sampler and what its state keeps; the real samplers are
  observed, not predicted. (The sampler is passed as ``sampler=`` rather than
  ``shuffle=True, generator=g``, which builds the same sampler but also draws the workers'
  base seed from ``g``, between the permutations.)
- A draw is not an epoch: torch's ``RandomSampler`` draws a second permutation when a pass
  reaches its end, torchdata's draws one at ``iter()`` (even for an iterator never advanced),
  workers prefetch into it. So epochs are compared as a *pairing*: the first time a draw and a
  loaderkit epoch come at the same batch index they are paired, and from then on a batch of
  that draw must come with that epoch and the other way round, in the run and in the runs
  resumed from its states (a state carries the pairing as it stood when it was taken). A
  batch index that differs, or a pairing broken, is a difference.
- ``set_epoch`` is called where the loader or its sampler has one, as Lightning, HF Trainer and
  Accelerate do: loaderkit's loader has it, torch's ``RandomSampler`` has none.
- ``iter()`` is compared too: torch with persistent workers returns the iterator the program
  already holds (the same object, reset).
- torch's ``DataLoader`` has no state: after the first load, loaderkit is compared with
  torchdata alone.

After a difference the table explains, the iterator it happened on is not compared for that
reference any more (the two passes went apart), nor the other iterators holding the same
object; a reference whose ``iter()`` raised (a torchdata bug) is not compared until the next
load. The habits the docs list (``HABITS``) are scripts of the same calls, each run on its
configurations: it must show exactly the differences it names, so each claim of
``docs/loader.md`` is measured here, and each row of the table is shown by one of them.

Cost: worker processes start slowly, so the machines with workers run a small share of the
examples (``ci`` profile: 40; ``nox -s slow``'s ``thorough``: 1000); the machines and habits
that load states in a fresh process are marked ``slow``. Every loader is closed at the end of
an example (no worker process is left), and the fresh process is killed when a call to it
takes longer than its timeout.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import gc
import io
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
import torch
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, get_worker_info
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import RandomSampler as StatefulRandomSampler

from loaderkit import DataLoaderBuilder
from loaderkit.testing.conformance import DIFFERENCES, HABITS, SITUATIONS, Difference, Habit

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),  # torchdata's
]

N = 29
BATCH = 6
PER_EPOCH = -(-N // BATCH)  # 5 batches, the last one of 5 samples
TORCH_SEED = 0
LOADERKIT_SEED = 5
ORDERS = 256
"""Shuffled orders the tables identify: torch's first draws, loaderkit's first epochs."""
EPOCHS = 4
"""``set_epoch`` draws 0 .. EPOCHS - 1 (passes go further by themselves)."""
MAX_HANDLES = 3
MAX_SAVED = 3
REFERENCES = ("torch", "torchdata")

BAD: set[int] = set()
"""Samples that fail to load now (main process only: the machines with workers keep it empty,
their workers could not see it change)."""


class Items(Dataset[int]):
    """Map-style: sample ``i`` is ``i``; a sample in :data:`BAD` raises ``ValueError``."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        if i in BAD:
            raise ValueError(f"sample {i} is corrupt")
        return i


class Stream(IterableDataset[int]):
    """0 .. N-1; in worker ``w`` of ``W``, the elements ``k`` with ``k % W == w``.

    torch's documented way for an ``IterableDataset`` not to be read once per worker. It says
    so to loaderkit (``splits_by_worker``), which then reads each worker's stream whole too.
    """

    splits_by_worker = True

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(worker, N, workers))


class UnsaidStream(IterableDataset[int]):
    """:class:`Stream` without ``splits_by_worker``: it splits itself without saying so."""

    __iter__ = Stream.__iter__


class WholeStream(IterableDataset[int]):
    """0 .. N-1 in every process: an ``IterableDataset`` that does not split itself."""

    def __iter__(self) -> Iterator[int]:
        return iter(range(N))


TAG = 1000
""":class:`ChangingStream` yields ``tag x TAG + k`` for its element ``k``."""


class ChangingStream(Stream):
    """:class:`Stream` that changes itself: it counts its passes, and tags elements with it.

    Element ``k`` of the pass read after ``p`` passes of this very object ended is
    ``p x TAG + k`` (issue 29): which object a loader reads each pass, the program's own one,
    a copy kept by a persistent worker or a fresh copy, is observed through the tags.
    """

    def __init__(self) -> None:
        self.passes = 0

    def __iter__(self) -> Iterator[int]:
        for k in super().__iter__():
            yield self.passes * TAG + k
        self.passes += 1


STREAMS: dict[str, type[IterableDataset[int]]] = {
    "split": Stream,
    "whole": WholeStream,
    "unsaid": UnsaidStream,
    "changing": ChangingStream,
}
STREAM_FACTS = {
    "split": (),
    "whole": ("a whole stream in each worker",),
    "unsaid": ("a stream split by worker, unsaid",),
    "changing": ("a stream that changes itself",),
}


@dataclass(frozen=True)
class Config:
    """One configuration the three loaders are built with."""

    kind: Literal["map", "stream"]
    shuffle: bool = False
    workers: int = 0
    persistent: bool = False
    stream: Literal["split", "whole", "unsaid", "changing"] = "split"
    """The stream's dataset: :class:`Stream`, :class:`WholeStream`, :class:`UnsaidStream` or
    :class:`ChangingStream`."""

    def __str__(self) -> str:
        if self.kind == "stream":
            what = {
                "split": "stream",
                "whole": "whole stream",
                "unsaid": "unsaid split stream",
                "changing": "changing stream",
            }
            kind = what[self.stream]
        else:
            kind = "map, shuffled" if self.shuffle else "map"
        workers = f"{self.workers} workers" + (", persistent" if self.persistent else "")
        return f"{kind}, {workers}"

    def dataset(self) -> Dataset[int]:
        return STREAMS[self.stream]() if self.kind == "stream" else Items()


def applies(row: Difference, config: Config) -> bool:
    """Whether ``row`` can happen with ``config`` (its dataset kind and workers)."""
    return (
        config.kind in row.kinds
        and config.workers in row.workers
        and (not config.workers or config.persistent in row.persistent)
    )


def _reference(config: Config, loader: Any, sampler: Any) -> Any:
    """``loader(dataset, ...)`` as the test sets it up for torch and torchdata alike.

    Shuffled map-style data gets ``sampler`` (a ``RandomSampler``) drawing from a generator
    of its own, seeded with :data:`TORCH_SEED`.
    """
    options: dict[str, Any] = {
        "batch_size": BATCH,
        "num_workers": config.workers,
        "persistent_workers": config.persistent,
    }
    if config.workers:
        options["multiprocessing_context"] = "fork"
    data = config.dataset()
    if config.kind != "stream" and config.shuffle:
        generator = torch.Generator().manual_seed(TORCH_SEED)
        options["sampler"] = sampler(data, generator=generator)
    return loader(data, **options)


def torch_loader(config: Config) -> DataLoader[Any]:
    """torch's ``DataLoader``: its ``RandomSampler`` draws from a generator of its own."""
    made: DataLoader[Any] = _reference(config, DataLoader, RandomSampler)
    return made


def torchdata_loader(config: Config) -> StatefulDataLoader[Any]:
    """torchdata's ``StatefulDataLoader``, with its stateful ``RandomSampler``."""
    made: StatefulDataLoader[Any] = _reference(config, StatefulDataLoader, StatefulRandomSampler)
    return made


def loaderkit_loader(config: Config) -> Any:
    """loaderkit's loader of the same dataset: a ``Loader`` or a ``StreamLoader``."""
    builder = DataLoaderBuilder().with_batch_size(BATCH).with_seed(LOADERKIT_SEED)
    builder = builder.with_dataset(config.dataset())
    if config.shuffle:
        builder = builder.with_shuffle()
    if config.workers:
        builder = builder.with_workers(
            config.workers, persistent=config.persistent, start_method="fork"
        )
    return builder.compile().build()


LOADERS = {"torch": torch_loader, "torchdata": torchdata_loader, "loaderkit": loaderkit_loader}


# -- what a next() gives ----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one call gave: a batch (its sample ids), ``StopIteration``, an exception; a state
    (``state_dict()``); an iterator (``iter()``: ``ids`` are the handles holding it already)."""

    kind: Literal["batch", "stop", "raise", "state", "iterator"]
    ids: tuple[int, ...] = ()
    types: tuple[str, ...] = ()
    """For an exception: the names of its classes (its own first, then its bases)."""
    message: str = ""

    @classmethod
    def of(cls, exc: Exception) -> Outcome:
        names = tuple(t.__name__ for t in type(exc).__mro__)
        return cls("raise", types=names, message=str(exc))

    def gives(self, what: str) -> bool:
        """Whether this is ``what`` (a :data:`~loaderkit.testing.conformance.Gives`).

        A ``DataError`` is a ``"batch"`` too: the batch that failed (it is consumed).
        """
        if what == "any":
            return True
        if what in ("new iterator", "same iterator"):
            return self.kind == "iterator" and bool(self.ids) == (what == "same iterator")
        if what == "batch" and "DataError" in self.types:
            return True
        if what in ("batch", "stop"):
            return self.kind == what
        return self.kind == "raise" and what in self.types


class Orders:
    """Which shuffled order, and which batch of it, a batch of sample ids is.

    ``orders`` are the first :data:`ORDERS` orders, each a list of batches; the batches of all
    of them must be distinct (the seeds are chosen so), so each batch names one place.
    """

    def __init__(self, orders: Iterator[list[tuple[int, ...]]]) -> None:
        self.places: dict[tuple[int, ...], tuple[int, int]] = {}
        for order, batches in zip(range(ORDERS), orders, strict=False):
            for index, batch in enumerate(batches):
                assert batch not in self.places, f"batch {batch} is in two orders: pick a seed"
                self.places[batch] = (order, index)

    def place(self, ids: tuple[int, ...]) -> tuple[int, int]:
        place = self.places.get(ids)
        assert place is not None, f"batch {ids} is in none of the first {ORDERS} orders"
        return place


def _chunks(order: list[int]) -> list[tuple[int, ...]]:
    return [tuple(order[i : i + BATCH]) for i in range(0, N, BATCH)]


@cache
def torch_orders() -> Orders:
    """The orders of torch's (and torchdata's) ``RandomSampler``: its generator's draws."""
    generator = torch.Generator().manual_seed(TORCH_SEED)
    draws = (_chunks(torch.randperm(N, generator=generator).tolist()) for _ in range(ORDERS))
    return Orders(draws)


@cache
def loaderkit_orders() -> Orders:
    """loaderkit's orders: epoch ``e``'s batches, as ``Loader.batch_indices`` gives them."""
    with loaderkit_loader(Config("map", shuffle=True)) as loader:
        epochs = [
            [tuple(loader.batch_indices(e, i)) for i in range(PER_EPOCH)] for e in range(ORDERS)
        ]
    return Orders(iter(epochs))


# -- one library's loader -----------------------------------------------------------------------


def _stop_workers(iterator: object) -> None:
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()


@dataclass(frozen=True)
class Failed:
    """What the program holds when ``iter(loader)`` itself raised."""

    error: Exception


class Side:
    """One library's loader and the iterators the program holds on it, by handle number."""

    def __init__(self, name: str, loader: Any) -> None:
        self.name = name
        self.loader = loader
        self.iterators: dict[int, Iterator[Any] | Failed] = {}

    def iterate(self, handle: int) -> None:
        try:
            self.iterators[handle] = iter(self.loader)
        except Exception as exc:  # noqa: BLE001 - the outcome of every next() on it
            self.iterators[handle] = Failed(exc)

    def next(self, handle: int) -> Outcome:
        iterator = self.iterators[handle]
        if isinstance(iterator, Failed):  # the program's iter() raised this
            failed = Outcome.of(iterator.error)
            return Outcome("raise", types=failed.types, message=f"from iter(): {failed.message}")
        try:
            batch = next(iterator)
        except StopIteration:
            return Outcome("stop")
        except Exception as exc:  # noqa: BLE001 - what the loader raised is the outcome
            return Outcome.of(exc)
        return Outcome("batch", tuple(int(i) for i in batch))

    def shares(self, a: int, b: int) -> bool:
        """Whether handles ``a`` and ``b`` hold the same iterator object."""
        return self.iterators[a] is self.iterators[b]

    def drop(self, handle: int) -> None:
        """The program lets go of the iterator (a ``break``)."""
        del self.iterators[handle]

    def set_epoch(self, epoch: int) -> bool:
        """What trainers do: the loader's ``set_epoch``, else its sampler's; False if neither."""
        for owner in (
            self.loader,
            getattr(self.loader, "sampler", None),
            getattr(getattr(self.loader, "batch_sampler", None), "sampler", None),
        ):
            method = getattr(owner, "set_epoch", None)
            if callable(method):
                method(epoch)
                return True
        return False

    def state_dict(self) -> Any:
        return copy.deepcopy(self.loader.state_dict())

    def load_state_dict(self, state: Any) -> None:
        self.loader.load_state_dict(copy.deepcopy(state))

    def close(self) -> None:
        """Stop every worker process: the iterators', the persistent ones."""
        iterators = list(self.iterators.values())
        self.iterators.clear()
        for iterator in iterators:
            _stop_workers(iterator)
            closer = getattr(iterator, "close", None)
            if callable(closer):
                closer()
        close = getattr(self.loader, "close", None)
        if callable(close):
            close()
        _stop_workers(getattr(self.loader, "_iterator", None))


# -- loaders in a fresh process (the slow variant) ----------------------------------------------

_SERVER = r"""
import base64, io, json, os, sys, traceback
protocol = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the loaders print must not reach the protocol
sys.path.insert(0, sys.argv[1])
import torch
from conformance import test_lockstep as lockstep

sides = {}
config = None

def serve(request):
    global config
    op = request["op"]
    if op == "load":
        config = lockstep.Config(**request["config"])
        for name, state in request["states"].items():
            if name == "torchdata":
                state = torch.load(io.BytesIO(base64.b64decode(state)), weights_only=False)
            side = sides[name] = lockstep.Side(name, lockstep.LOADERS[name](config))
            side.load_state_dict(state)
        return None
    side = sides[request["side"]]
    if op == "iterate":
        return side.iterate(request["handle"])
    if op == "next":
        return lockstep.outcome_to_json(side.next(request["handle"]))
    if op == "shares":
        return side.shares(request["a"], request["b"])
    if op == "drop":
        return side.drop(request["handle"])
    if op == "set_epoch":
        return side.set_epoch(request["epoch"])
    if op == "state_dict":
        return lockstep.state_to_json(side.name, side.state_dict())
    if op == "close":
        return side.close()
    raise ValueError(op)

for line in sys.stdin:
    try:
        reply = {"value": serve(json.loads(line))}
    except BaseException as exc:
        reply = {"error": traceback.format_exc()}
    protocol.write(json.dumps(reply) + "\n")
    protocol.flush()
"""
FRESH_PROCESS_TIMEOUT = 120.0
"""Seconds a call on the loaders of the fresh process may take (it is killed after)."""


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "kind": outcome.kind,
        "ids": outcome.ids,
        "types": outcome.types,
        "message": outcome.message,
    }


def outcome_from_json(data: dict[str, Any]) -> Outcome:
    return Outcome(data["kind"], tuple(data["ids"]), tuple(data["types"]), data["message"])


def state_to_json(name: str, state: Any) -> Any:
    """A loader's state as JSON: torchdata's (it holds tensors) as ``torch.save`` bytes."""
    if name != "torchdata":
        return state
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def state_from_json(name: str, data: Any) -> Any:
    if name != "torchdata":
        return data
    return torch.load(io.BytesIO(base64.b64decode(data)), weights_only=False)


class FreshProcess:
    """A new Python process holding fresh loaders a state was loaded into, driven by requests.

    Each request waits :data:`FRESH_PROCESS_TIMEOUT` seconds at most; then the process (and
    its workers) are killed and the test fails.
    """

    def __init__(self, config: Config, states: dict[str, Any]) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        tests = str(Path(__file__).resolve().parents[1])
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, tests],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,
        )
        fields = {
            "kind": config.kind,
            "shuffle": config.shuffle,
            "workers": config.workers,
            "persistent": config.persistent,
            "stream": config.stream,
        }
        encoded = {name: state_to_json(name, state) for name, state in states.items()}
        self.call({"op": "load", "config": fields, "states": encoded})

    def call(self, request: dict[str, Any]) -> Any:
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], FRESH_PROCESS_TIMEOUT)
        line = process.stdout.readline() if ready else ""
        if not line:
            self.kill()
            self.log.seek(0)
            log = self.log.read().decode(errors="replace")[-3000:]
            raise AssertionError(f"the fresh process did not answer {request['op']}:\n{log}")
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"the fresh process failed at {request['op']}:\n{reply['error']}")
        return reply["value"]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """End the process (its loaders closed first), within the timeout."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=FRESH_PROCESS_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class RemoteSide(Side):
    """A :class:`Side` whose loader lives in a :class:`FreshProcess`."""

    def __init__(self, name: str, process: FreshProcess) -> None:
        super().__init__(name, None)
        self.process = process

    def request(self, op: str, **fields: Any) -> Any:
        return self.process.call({"op": op, "side": self.name, **fields})

    def iterate(self, handle: int) -> None:
        self.request("iterate", handle=handle)

    def next(self, handle: int) -> Outcome:
        return outcome_from_json(self.request("next", handle=handle))

    def shares(self, a: int, b: int) -> bool:
        return bool(self.request("shares", a=a, b=b))

    def drop(self, handle: int) -> None:
        self.request("drop", handle=handle)

    def set_epoch(self, epoch: int) -> bool:
        return bool(self.request("set_epoch", epoch=epoch))

    def state_dict(self) -> Any:
        return state_from_json(self.name, self.request("state_dict"))

    def load_state_dict(self, state: Any) -> None:
        raise AssertionError("a fresh process is made with its states")

    def close(self) -> None:
        if self.process.process.poll() is None:
            self.request("close")


# -- the lockstep run ---------------------------------------------------------------------------


class Pairing:
    """Which of a reference's shuffled orders is which loaderkit epoch, as seen so far."""

    def __init__(self) -> None:
        self.epoch_of: dict[int, int] = {}
        self.order_of: dict[int, int] = {}

    def fits(self, order: int, epoch: int) -> bool:
        return self.epoch_of.get(order, epoch) == epoch and self.order_of.get(epoch, order) == order

    def pair(self, order: int, epoch: int, *, anew: bool = False) -> None:
        """Pair ``order`` with ``epoch``; ``anew``: forget what either was paired with."""
        if anew:
            self.order_of.pop(self.epoch_of.pop(order, -1), None)
            self.epoch_of.pop(self.order_of.pop(epoch, -1), None)
        self.epoch_of[order] = epoch
        self.order_of[epoch] = order


@dataclass(eq=False)
class Handle:
    """An iterator the program holds, on every loader."""

    number: int
    created: int
    started: int | None = None
    diverged: set[str] = field(default_factory=set)
    """The references no longer compared on it (a difference of the table happened)."""
    last: dict[str, Outcome] = field(default_factory=dict)
    resumed: tuple[str, ...] = ()
    """On the first pass after a load: the facts of the state it resumes."""
    begun: tuple[str, ...] = ()
    """Facts of its pass's start that hold for the whole pass."""


@dataclass(eq=False)
class Saved:
    """A ``state_dict()`` of each stateful loader, taken at one point of the trace."""

    number: int
    states: dict[str, Any]
    pairing: Pairing
    facts: tuple[str, ...]
    set_epoch_ever: bool
    config: Config
    """The configuration of the loaders it was taken from."""
    uncompared: bool
    """Whether torchdata's pass was not compared with loaderkit's when it was taken (after a
    difference of the table): their two states are of different positions."""


class UnexplainedDifferenceError(AssertionError):
    """loaderkit did what no row of the table of differences explains."""


class Lockstep:
    """The three loaders driven by the same calls; each ``next()`` compared."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.sides: dict[str, Side] = {}
        self.process: FreshProcess | None = None
        self.trace: list[str] = [f"build: {config}"]
        try:
            for name, make in LOADERS.items():
                self.sides[name] = Side(name, make(config))
        except BaseException:
            self.close()
            raise
        self.handles: list[Handle] = []
        self.saved: list[Saved] = []
        self.pairing = {ref: Pairing() for ref in REFERENCES}
        self.fired: list[str] = []
        self.clock = 0
        self.numbers = 0
        self.pass_started = 0
        """When the latest pass started (or the loaders were built or loaded)."""
        self.latest: Handle | None = None
        """The handle of the latest pass since the loaders were built or loaded."""
        self.set_epoch_at = -1
        self.set_epoch_ever = False
        """Whether ``set_epoch`` was called in this lineage (a loaded state's included)."""
        self.iter_at = -1
        self.made: list[Handle] = []
        """The handles made by ``iter()`` since the latest pass started (or a load)."""
        self.first_made: Handle | None = None
        self.first_started: Handle | None = None
        """The first handles made and advanced since the loaders were built or loaded."""
        self.newest: Handle | None = None
        """The handle of the latest ``iter()`` since the loaders were built or loaded."""
        self.loaded: Saved | None = None
        self.resume_facts: list[str] = []
        """The facts of the loaded state, for the loaders it was loaded into."""

    # -- the program's calls ------------------------------------------------------------------

    def iterate(self) -> Handle:
        """``iter(loader)`` on every loader."""
        if len(self.handles) == MAX_HANDLES:
            self.drop(self.handles[0])
        self.clock += 1
        self.iter_at = self.clock
        self.numbers += 1
        handle = Handle(self.numbers, self.clock)
        for side in self.sides.values():
            side.iterate(handle.number)
        self.handles.append(handle)
        self.made.append(handle)
        self.newest = handle
        self.first_made = self.first_made or handle
        if self.loaded is not None and self.loaded.uncompared and self.resuming():
            handle.diverged.add("torchdata")  # its resume is of another position
        self.trace.append(f"iter() -> #{handle.number}")
        mine = self.held("loaderkit", handle)
        assert not mine.ids, f"loaderkit's iter() gave the iterator of {mine.ids} again"
        for ref in REFERENCES:
            theirs = self.held(ref, handle)
            if ref in self.sides and theirs.ids:
                self.trace.append(f"    {ref}: the same iterator as #{theirs.ids}")
                self.judge(ref, None, theirs, mine, ["iter()", *self.config_facts()])
        return handle

    def held(self, name: str, handle: Handle) -> Outcome:
        """What ``iter()`` gave ``handle``: a new iterator, or the one other handles hold."""
        side = self.sides.get(name)
        if side is None:
            return Outcome("iterator")
        same = (
            h.number
            for h in self.handles
            if h is not handle and side.shares(h.number, handle.number)
        )
        return Outcome("iterator", tuple(same))

    def handle(self, which: int) -> Handle:
        """Handle ``which`` (modulo those held), or a new iterator if none is held."""
        if not self.handles or which >= MAX_HANDLES:
            return self.iterate()
        return self.handles[which % len(self.handles)]

    def advance(self, handle: Handle) -> Outcome:
        """``next()`` on ``handle``'s iterator of every loader; loaderkit's outcome compared."""
        facts = self.facts(handle)
        self.clock += 1
        if handle.started is None:
            handle.started = self.clock
            if self.loaded is not None and self.latest is None:
                handle.resumed = tuple(self.resume_facts)
            if "after an error" in facts:
                handle.begun = ("in a pass started after an error",)
            self.pass_started, self.latest = self.clock, handle
            self.first_started = self.first_started or handle
            self.made = []
        outcomes = {name: side.next(handle.number) for name, side in self.sides.items()}
        shown = " | ".join(f"{name} {self.show(name, o)}" for name, o in outcomes.items())
        self.trace.append(f"next(#{handle.number}) [{', '.join(facts)}]: {shown}")
        handle.last.update(outcomes)
        mine = outcomes["loaderkit"]
        for ref in REFERENCES:
            if ref not in outcomes:
                continue
            if ref in handle.diverged:
                self.diverge(ref, handle)  # its iterator may be another handle's too
                if outcomes[ref].message.startswith("from iter():"):
                    self.retire(ref)  # a loader whose iter() raises is broken, compared or not
                continue
            self.judge(ref, handle, outcomes[ref], mine, facts)
        return mine

    def drop(self, handle: Handle) -> None:
        """``break``: the program lets go of the iterator."""
        self.handles.remove(handle)
        for side in self.sides.values():
            side.drop(handle.number)
        if self.config.workers:
            gc.collect()  # finalize it now (its workers stop), not in a later step
        self.trace.append(f"break #{handle.number}")

    def set_epoch(self, epoch: int) -> None:
        """``set_epoch(epoch)`` where the loader (or its sampler) has one, as trainers do."""
        self.clock += 1
        self.set_epoch_at = self.clock
        self.set_epoch_ever = True
        called = [name for name, side in self.sides.items() if side.set_epoch(epoch)]
        others = [name for name in self.sides if name not in called]
        self.trace.append(f"set_epoch({epoch}): on {', '.join(called)}; {others} have none")

    def save(self) -> Saved | None:
        """``state_dict()`` of torchdata's and loaderkit's loaders.

        A reference whose ``state_dict()`` raises differs (a row must explain it); the state
        is then not kept (the program stopped there).
        """
        facts = ["state_dict()", *self.config_facts(), *self.resumed_facts()]
        mine = self.sides["loaderkit"].state_dict()
        states = {"loaderkit": json.loads(json.dumps(mine))}
        for name in ("torchdata",):
            if name not in self.sides:
                continue
            try:
                states[name] = self.sides[name].state_dict()
            except Exception as exc:  # compared with loaderkit's state
                theirs = Outcome.of(exc)
                self.trace.append(f"state_dict(): {name} {self.show(name, theirs)}")
                row = self.explain(name, theirs, Outcome("state"), facts)
                if row is None:
                    raise UnexplainedDifferenceError(
                        self.report(name, None, theirs, Outcome("state"), facts)
                    ) from exc
                self.fired.append(row.key)
                self.trace.append(f"    = difference {row.key!r} from {name}")
                self.retire(name)
                return None
        pairing = copy.deepcopy(self.pairing.get("torchdata", Pairing()))  # seen up to now
        saved = Saved(
            len(self.saved),
            states,
            pairing,
            self.state_facts(),
            self.set_epoch_ever,
            self.config,
            self.uncompared(),
        )
        if len(self.saved) < MAX_SAVED:
            self.saved.append(saved)
        self.trace.append(f"state_dict() -> state {saved.number} [{', '.join(saved.facts)}]")
        return saved

    def load(
        self, saved: Saved, *, fresh_process: bool = False, workers: int | None = None
    ) -> None:
        """``load_state_dict(state)`` into fresh loaders; torch's (it has no state) retires.

        ``fresh_process``: the fresh loaders live in a new process (see :class:`FreshProcess`);
        ``workers``: they have that many workers (not persistent) instead of the state's.
        """
        self.resume_facts = ["resumed", *(f"resumed {f}" for f in saved.facts)]
        self.config = saved.config
        if workers is not None and workers != saved.config.workers:
            self.config = dataclasses.replace(saved.config, workers=workers, persistent=False)
            self.resume_facts.append("resumed with another worker count")
        for handle in list(self.handles):
            self.drop(handle)
        self.close()
        self.sides = {}
        names = [name for name in ("torchdata", "loaderkit") if name in saved.states]
        if fresh_process:
            self.process = FreshProcess(self.config, {n: saved.states[n] for n in names})
            self.sides = {name: RemoteSide(name, self.process) for name in names}
        for name in [] if fresh_process else names:
            side = self.sides[name] = Side(name, LOADERS[name](self.config))
            side.load_state_dict(saved.states[name])
        self.pairing = {"torchdata": copy.deepcopy(saved.pairing)}
        self.clock += 1
        self.pass_started, self.latest, self.loaded = self.clock, None, saved
        self.made, self.newest = [], None
        self.first_made = self.first_started = None
        self.set_epoch_ever = saved.set_epoch_ever
        if saved.uncompared:
            self.pairing["torchdata"] = Pairing()  # its epochs are paired anew after the pass
        where = " in a fresh process" if fresh_process else ""
        where += f" ({self.config})" if workers is not None else ""
        self.trace.append(f"fresh loaders{where}, load_state_dict(state {saved.number})")
        if saved.uncompared:
            self.trace.append(
                "    (torchdata's state is of another position: its resumed pass is not compared)"
            )

    def close(self) -> None:
        """Close every loader (no worker process stays), and the fresh process if any."""
        try:
            for side in self.sides.values():
                side.close()
        finally:
            process, self.process = self.process, None
            if process is not None:
                process.close()

    # -- the facts of the trace ---------------------------------------------------------------

    def facts(self, handle: Handle) -> list[str]:
        """What is known, from the calls so far, about a ``next()`` on ``handle``."""
        facts = self._facts(handle)
        unknown = set(facts) - set(SITUATIONS)
        assert not unknown, f"facts missing from conformance.SITUATIONS: {unknown}"
        return facts

    def _facts(self, handle: Handle) -> list[str]:
        facts = self.config_facts()
        if handle.started is None:
            facts.append("a new pass")
            if self.set_epoch_at > self.pass_started:
                facts.append("after set_epoch")
            if self.set_epoch_ever:
                facts.append("since set_epoch")
            if any(h is not handle and h.started is None for h in self.made):
                facts.append("after an unadvanced iter()")
            first_made, first_started = self.first_made, self.first_started or handle
            if (
                self.loaded is not None
                and first_made is not first_started
                and handle in (first_made, first_started)
            ):
                facts.append("after a load, another iterator made first")
            latest = self.latest
            if latest is not None and latest.last.get("loaderkit", Outcome("stop")).gives(
                "DataError"
            ):
                facts.append("after an error")
                facts.append("in a pass started after an error")
            if self.loaded is not None and self.latest is None:  # the first pass after a load
                facts += self.resume_facts
            return facts
        if self.pass_started > handle.started:
            facts.append("superseded by a newer pass")
        if self.set_epoch_at > handle.started:
            facts.append("superseded by set_epoch")
        if self.iter_at > handle.started:
            facts.append("after a newer iter()")
        if handle.last.get("loaderkit", Outcome("stop")).gives("DataError"):
            facts.append("after an error")
        return facts + list(handle.begun) + list(handle.resumed)

    def config_facts(self) -> list[str]:
        """What is known about the dataset (a stream's facts)."""
        return list(STREAM_FACTS[self.config.stream]) if self.config.kind == "stream" else []

    def resuming(self) -> bool:
        """Whether the loaders were loaded and their second pass has not started."""
        return self.loaded is not None and (self.latest is None or bool(self.latest.resumed))

    def resumed_facts(self) -> list[str]:
        """Until the second pass of loaded loaders starts: the loaded state's facts."""
        return list(self.resume_facts) if self.resuming() else []

    def uncompared(self) -> bool:
        """Whether torchdata's position is not loaderkit's now (an earlier difference)."""
        latest, newest = self.latest, self.newest
        if latest is None:
            return self.loaded is not None and self.loaded.uncompared and "torchdata" in self.sides
        return any("torchdata" in h.diverged for h in (latest, newest) if h is not None)

    def state_facts(self) -> tuple[str, ...]:
        """What is known, from the calls so far, about a ``state_dict()`` taken now."""
        facts: list[str] = []
        latest = self.latest
        if self.loaded is not None and (latest is None or latest.resumed):
            facts.append("after a load")  # before the loaded loaders' second pass
        if latest is None and self.loaded is not None:  # the loaded state's position
            facts += [f for f in self.loaded.facts if f not in facts]
        elif latest is None:
            facts.append("before any pass")
        else:
            last = latest.last["loaderkit"]
            if last.kind == "stop" and self.set_epoch_at < latest.started:  # not superseded
                facts.append("after the pass ended")
            elif last.gives("DataError"):
                facts.append("after an error")
            else:
                facts.append("inside a pass")
            if latest not in self.handles:
                facts.append("after a break")
        if self.set_epoch_at > self.pass_started and "after set_epoch" not in facts:
            facts.append("after set_epoch")
        if self.newest is not None and self.newest is not latest:
            facts.append("with a newer iterator")
        return tuple(facts)

    # -- comparing ------------------------------------------------------------------------------

    def place(self, name: str, outcome: Outcome) -> tuple[int, int] | None:
        """(order, batch index) of a shuffled batch; ``None`` if not shuffled or not a batch."""
        if not self.config.shuffle or outcome.kind != "batch":
            return None
        orders = loaderkit_orders() if name == "loaderkit" else torch_orders()
        return orders.place(outcome.ids)

    def show(self, name: str, outcome: Outcome) -> str:
        if outcome.kind in ("stop", "state"):
            return "StopIteration" if outcome.kind == "stop" else "a state"
        if outcome.kind == "iterator":
            held = ", ".join(f"#{n}" for n in outcome.ids)
            return f"the iterator of {held}" if held else "a new iterator"
        if outcome.kind == "raise":
            first = (outcome.message.splitlines() or [""])[0]
            return f"{outcome.types[0]}({first[:100]!r})"
        place = self.place(name, outcome)
        if place is None:
            return str(list(outcome.ids))
        what = "epoch" if name == "loaderkit" else "draw"
        return f"({what} {place[0]}, batch {place[1]})"

    def verdict(
        self, ref: str, theirs: Outcome, mine: Outcome
    ) -> Literal["same", "epoch", "tags", "other"]:
        """``"same"``; ``"epoch"``: the same batch of another epoch than paired; ``"tags"``:
        the same elements of a :class:`ChangingStream`, tagged otherwise; ``"other"``."""
        if theirs.kind != mine.kind:
            return "other"
        if theirs.kind == "iterator":
            return "same" if theirs.ids == mine.ids else "other"
        if theirs.kind == "stop":
            return "same"
        if theirs.kind == "raise":  # loaderkit's DataError[ValueError] is a ValueError, and
            # its message holds the original one (which names the sample)
            same = theirs.types[0] in mine.types and theirs.message in mine.message
            return "same" if same else "other"
        their_place, my_place = self.place(ref, theirs), self.place("loaderkit", mine)
        if their_place is None or my_place is None:
            if theirs.ids == mine.ids:
                return "same"
            untagged = [tuple(i % TAG for i in o.ids) for o in (theirs, mine)]
            return "tags" if untagged[0] == untagged[1] else "other"
        if their_place[1] != my_place[1]:
            return "other"
        return "same" if self.pairing[ref].fits(their_place[0], my_place[0]) else "epoch"

    def judge(
        self, ref: str, handle: Handle | None, theirs: Outcome, mine: Outcome, facts: list[str]
    ) -> None:
        """Compare ``ref``'s outcome with loaderkit's; a difference must be a row of the table.

        After the difference: a reference whose ``iter()`` raised is not compared until the
        next load; the older handles of a reference's shared iterator, and the handle of any
        other difference, are not compared further, except an epoch paired otherwise under a
        row that ``renumbers`` (the pair is made anew and the pass goes on being compared).
        """
        verdict = self.verdict(ref, theirs, mine)
        their_place, my_place = self.place(ref, theirs), self.place("loaderkit", mine)
        if verdict == "same":
            if their_place is not None and my_place is not None:
                self.pairing[ref].pair(their_place[0], my_place[0])
            return
        row = self.explain(
            ref, theirs, mine, facts, only_epoch=verdict == "epoch", only_tags=verdict == "tags"
        )
        if row is None:
            raise UnexplainedDifferenceError(self.report(ref, handle, theirs, mine, facts))
        self.fired.append(row.key)
        self.trace.append(f"    = difference {row.key!r} from {ref}")
        if theirs.message.startswith("from iter():"):
            self.retire(ref)  # a loader whose iter() raises is broken
        elif theirs.kind == "iterator":  # what the newest pass reads, the older handles lose
            for other in self.handles:
                if other.number in theirs.ids:
                    other.diverged.add(ref)
        elif verdict == "epoch" and row.renumbers:
            assert their_place is not None and my_place is not None
            self.pairing[ref].pair(their_place[0], my_place[0], anew=True)
        elif verdict == "tags":
            pass  # the same elements in the same place: the pass goes on being compared
        else:
            assert handle is not None
            self.diverge(ref, handle)  # the rest of this pass is not compared

    def retire(self, ref: str) -> None:
        """Compare ``ref`` no more until the next load: its loader is broken (a row said so)."""
        self.sides.pop(ref).close()
        self.pairing.pop(ref, None)
        self.trace.append(f"    ({ref} is not compared until the next load)")

    def diverge(self, ref: str, handle: Handle) -> None:
        """Compare ``ref`` no more on ``handle``, nor on handles holding the same iterator."""
        side = self.sides[ref]
        for other in self.handles:
            if other is handle or side.shares(other.number, handle.number):
                other.diverged.add(ref)

    def applies(self, row: Difference, ref: str, facts: list[str]) -> bool:
        """Whether ``row`` is about ``ref``, this configuration and these facts."""
        return ref in row.references and applies(row, self.config) and set(row.when) <= set(facts)

    def explain(
        self,
        ref: str,
        theirs: Outcome,
        mine: Outcome,
        facts: list[str],
        *,
        only_epoch: bool = False,
        only_tags: bool = False,
    ) -> Difference | None:
        """The row of the table that explains this difference, if any: the most specific.

        ``only_epoch``: the difference is only the epoch (the same batch of another order);
        ``only_tags``: only the tags of a :class:`ChangingStream`'s elements (the same ones).
        """
        rows = [
            row
            for row in DIFFERENCES
            if self.applies(row, ref, facts)
            and (only_epoch or not row.only_epoch)
            and (only_tags or not row.only_tags)
            and mine.gives(row.loaderkit_gives)
            and theirs.gives(row.reference_gives)
        ]
        return max(rows, key=lambda row: len(row.when), default=None)

    def report(
        self, ref: str, handle: Handle | None, theirs: Outcome, mine: Outcome, facts: list[str]
    ) -> str:
        trace = "\n".join(f"  {line}" for line in self.trace)
        return (
            f"loaderkit differs from {ref} and no row of loaderkit.testing.conformance."
            f"DIFFERENCES explains it\n"
            f"  configuration: {self.config}\n"
            f"  {facts[0] if handle is None else f'next(#{handle.number})'} with the facts "
            f"[{', '.join(facts)}]\n"
            f"  {ref}: {self.show(ref, theirs)}\n"
            f"  loaderkit: {self.show('loaderkit', mine)}\n"
            f"the calls (trace):\n{trace}"
        )


def children() -> frozenset[int]:
    """The worker processes of this process alive now (their pids)."""
    return frozenset(p.pid for p in multiprocessing.active_children() if p.pid is not None)


def assert_no_workers_left(before: frozenset[int]) -> None:
    """Every loader was closed: no worker process started since ``before`` is alive.

    Workers left by earlier tests (torch's finish exiting in their own time) are not this
    run's; the grace is long because a loaded machine may take seconds to reap a process.
    """
    deadline = time.monotonic() + 20.0
    while children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert not left, f"worker processes left behind: {left}"


# -- the machine --------------------------------------------------------------------------------


class LockstepMachine(RuleBasedStateMachine):
    """Random programs of iteration calls, run on the three loaders at once."""

    config: ClassVar[Config]
    fresh_process: ClassVar[bool] = False
    """Whether a load may put the fresh loaders in a fresh process (the slow variant)."""

    def __init__(self) -> None:
        super().__init__()
        BAD.clear()
        self.before = children()
        self.run = Lockstep(self.config)

    @rule()
    def iterate(self) -> None:
        self.run.iterate()

    @rule(which=st.integers(0, MAX_HANDLES), steps=st.sampled_from((1, 1, 2, PER_EPOCH + 1)))
    def advance(self, which: int, steps: int) -> None:
        """``next()`` ``steps`` times on a held iterator, or on a new one (``which`` too big).

        ``PER_EPOCH + 1`` steps: the rest of a ``for`` loop, to its ``StopIteration``.
        """
        handle = self.run.handle(which)
        for _ in range(steps):
            self.run.advance(handle)

    @precondition(lambda self: bool(self.run.handles))
    @rule(which=st.integers(0, MAX_HANDLES - 1))
    def drop(self, which: int) -> None:
        self.run.drop(self.run.handles[which % len(self.run.handles)])

    @rule()
    def save(self) -> None:
        self.run.save()

    @precondition(lambda self: bool(self.run.saved))
    @rule(which=st.integers(0, MAX_SAVED - 1))
    def load(self, which: int) -> None:
        """A saved state into fresh loaders (in a fresh process in the slow variant)."""
        saved = self.run.saved[which % len(self.run.saved)]
        self.run.load(saved, fresh_process=self.fresh_process)
        if self.fresh_process:
            event("a load into a fresh process")

    @rule(epoch=st.integers(0, EPOCHS - 1))
    def set_epoch(self, epoch: int) -> None:
        self.run.set_epoch(epoch)

    @precondition(lambda self: self.config == Config("map") and self.run.process is None)
    @rule(sample=st.integers(0, N - 1))
    def corrupt(self, sample: int) -> None:
        """Sample ``sample`` fails to load from now on (until ``repair``), in every loader."""
        BAD.add(sample)
        self.run.trace.append(f"sample {sample} fails to load from now on")

    @precondition(lambda self: bool(BAD))
    @rule()
    def repair(self) -> None:
        BAD.clear()
        self.run.trace.append("every sample loads again")

    def teardown(self) -> None:
        BAD.clear()
        self.run.close()
        assert_no_workers_left(self.before)


def machine(
    config: Config,
    share: float,
    steps: int,
    *,
    fresh_process: bool = False,
    least: int = 1,
) -> Any:
    """The machine for ``config`` as a ``TestCase``: ``share`` of the profile's examples.

    ``ci`` (bounded for 2 cores) has 40 examples, the ``thorough`` profile of ``nox -s slow``
    1000; at least ``least``, of at most ``steps`` steps each. ``fresh_process``: loads may
    go into a fresh process; such a machine is marked ``slow``.
    """
    name = f"Lockstep_{str(config).replace(', ', '_').replace(' ', '_')}"
    attributes = {"config": config, "fresh_process": fresh_process}
    cls = type(name, (LockstepMachine,), attributes)
    case = cls.TestCase
    case.settings = settings(
        settings.default,
        max_examples=max(int(settings.default.max_examples * share), least),
        stateful_step_count=steps,
    )
    return pytest.mark.slow(case) if fresh_process else case


TestMapShuffled = machine(Config("map", shuffle=True), share=3, steps=30)
TestMap = machine(Config("map"), share=1, steps=30)
TestStream = machine(Config("stream"), share=1, steps=30)
TestMapShuffledPersistentWorkers = machine(
    Config("map", shuffle=True, workers=2, persistent=True), share=0.1, steps=15
)
TestMapShuffledWorkers = machine(Config("map", shuffle=True, workers=2), share=0.03, steps=12)
TestStreamPersistentWorkers = machine(
    Config("stream", workers=2, persistent=True), share=0.05, steps=12
)
TestStreamWorkers = machine(Config("stream", workers=2), share=0.02, steps=12)
TestChangingStream = machine(Config("stream", stream="changing"), share=0.5, steps=30)
TestChangingStreamPersistentWorkers = machine(
    Config("stream", workers=2, persistent=True, stream="changing"), share=0.02, steps=12
)
TestFreshProcessMapShuffled = machine(
    Config("map", shuffle=True), share=0.03, steps=20, fresh_process=True, least=3
)
TestFreshProcessStreamWorkers = machine(
    Config("stream", workers=2), share=0.01, steps=15, fresh_process=True, least=2
)


# -- the habits of the docs ---------------------------------------------------------------------

CONFIGS = {
    str(config): config
    for config in (
        Config("map"),
        Config("map", shuffle=True),
        Config("stream"),
        Config("map", shuffle=True, workers=2),
        Config("map", shuffle=True, workers=2, persistent=True),
        Config("stream", workers=2),
        Config("stream", workers=2, persistent=True),
        Config("stream", workers=2, stream="whole"),
        Config("stream", workers=2, stream="unsaid"),
        Config("stream", stream="changing"),
        Config("stream", workers=2, stream="changing"),
        Config("stream", workers=2, persistent=True, stream="changing"),
    )
}


def run_script(config: Config, script: tuple[str, ...], *, fresh_process: bool = False) -> Lockstep:
    """Run a habit's steps (see :class:`~loaderkit.testing.conformance.Habit`) in lockstep.

    ``fresh_process``: each ``load`` puts the fresh loaders in a fresh process.
    """
    before = children()
    run = Lockstep(config)
    made: list[Handle] = []
    try:
        for step in script:
            name, _, argument = step.partition(":")
            if step == "iter":
                made.append(run.iterate())
            elif step == "next":
                run.advance(run.handles[-1])
            elif step == "next*":  # to the end of the loop
                handle = run.handles[-1]
                for _ in range(2 * PER_EPOCH + 2):
                    if run.advance(handle).kind == "stop":
                        break
            elif step.startswith("next@"):
                run.advance(made[int(step.removeprefix("next@")) - 1])
            elif step == "break":
                run.drop(run.handles[-1])
            elif name == "set_epoch":
                run.set_epoch(int(argument))
            elif step == "save":
                run.save()
            elif name == "load":  # "load:2": into loaders with 2 workers
                workers = int(argument) if argument else None
                run.load(run.saved[-1], fresh_process=fresh_process, workers=workers)
            elif name == "corrupt":
                BAD.add(int(argument))
                run.trace.append(f"sample {argument} fails to load from now on")
            elif step == "repair":
                BAD.clear()
                run.trace.append("every sample loads again")
            else:
                raise ValueError(f"not a step: {step!r}")
    finally:
        BAD.clear()
        run.close()
    assert_no_workers_left(before)
    return run


ROWS = {row.key: row for row in DIFFERENCES}
HABIT_RUNS = [
    pytest.param(habit, CONFIGS[name], id=f"{habit.habit[:40]} | {name}")
    for habit in HABITS
    for name in habit.configs
]


@pytest.mark.parametrize(("habit", "config"), HABIT_RUNS)
def test_each_habit_shows_exactly_its_differences(habit: Habit, config: Config) -> None:
    """The docs' claim for each habit, as the three loaders measure it."""
    run = run_script(config, habit.script)
    expected = {key for key in habit.differences if applies(ROWS[key], config)}
    trace = "\n".join(f"  {line}" for line in run.trace)
    assert set(run.fired) == expected, f"{habit.habit} on {config}:\n{trace}"
    assert any(line.startswith("next(") for line in run.trace)  # it compared batches


RESUME_RUNS = [
    pytest.param(habit, CONFIGS[name], id=f"{habit.habit[:40]} | {name}")
    for habit in HABITS
    if "load" in habit.script
    for name in habit.configs
]


@pytest.mark.slow
@pytest.mark.parametrize(("habit", "config"), RESUME_RUNS)
def test_each_resume_habit_is_the_same_in_a_fresh_process(habit: Habit, config: Config) -> None:
    """A state loaded in a new process resumes as in this one: its differences are the same."""
    run = run_script(config, habit.script, fresh_process=True)
    expected = {key for key in habit.differences if applies(ROWS[key], config)}
    trace = "\n".join(f"  {line}" for line in run.trace)
    assert set(run.fired) == expected, f"{habit.habit} on {config}:\n{trace}"
    assert any("in a fresh process" in line for line in run.trace)


def test_the_table_and_the_habits_agree() -> None:
    """Every row is shown by a habit, every name they use exists: no dead or stale data."""
    assert len(ROWS) == len(DIFFERENCES), "two rows have one key"
    for row in DIFFERENCES:
        assert set(row.when) <= set(SITUATIONS), (row.key, set(row.when) - set(SITUATIONS))
        shown = [
            habit
            for habit in HABITS
            if row.key in habit.differences
            and any(applies(row, CONFIGS[name]) for name in habit.configs)
        ]
        assert shown, f"no habit shows the difference {row.key!r}"
    for habit in HABITS:
        assert set(habit.differences) <= set(ROWS), habit.habit
        assert set(habit.configs) <= set(CONFIGS), habit.habit
        for key in habit.differences:  # each difference it names shows on one of its configs
            assert any(applies(ROWS[key], CONFIGS[name]) for name in habit.configs), key


def test_a_difference_no_row_explains_fails_with_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its row, a difference fails the suite, and the failure shows the calls."""
    monkeypatch.setattr(sys.modules[__name__], "DIFFERENCES", ())
    before = children()
    script = ("iter", "next", "set_epoch:1", "next")
    with pytest.raises(UnexplainedDifferenceError) as failure:
        run_script(Config("map", shuffle=True), script)
    message = str(failure.value)
    assert "next(#1) with the facts [superseded by set_epoch]" in message
    assert "loaderkit: RuntimeError(" in message
    assert "set_epoch(1): on loaderkit" in message  # the trace
    assert_no_workers_left(before)
