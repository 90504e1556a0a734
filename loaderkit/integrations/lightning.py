"""Lightning with loaderkit loaders: epochs, checkpoints, and the two wrappers that need them.

A loader (map-style or streamed) has what Lightning reads on a torch ``DataLoader`` to tell it
its epoch: a ``sampler`` whose ``set_epoch`` Lightning calls before every training epoch
(:attr:`~loaderkit.runtime.loader.Loader.sampler`). Lightning also stores the loader's
``state_dict()`` in its checkpoints and reloads it when it restarts inside an epoch. So
map-style loaders (``plan.build()`` of a dataset with a length) go to ``Trainer.fit``
directly, and a :class:`~loaderkit.DataModule` through
:meth:`~loaderkit.DataModule.to_lightning`; a run resumed with ``fit(..., ckpt_path=...)``
continues the uninterrupted run's batches, from a checkpoint taken inside an epoch or at its
end (the table of docs/integrations.md, "Lightning").

Lightning tells the sampler ``epoch_progress.current.processed``, which is
``trainer.current_epoch`` except after a restart by steps (``max_steps``) from a checkpoint
taken at an epoch's end (``every_n_epochs``, ``on_train_epoch_end``, ``last.ckpt``): there
Lightning re-enters the finished epoch, reads one batch past its end, and counts one epoch
ahead of the one it trains (a torch ``DataLoader`` with a ``DistributedSampler`` is off the
same way). A loader's sampler, called by Lightning's fit loop, takes the epoch from that
loop's ``trainer.current_epoch`` (:func:`~loaderkit.runtime.passes.epoch_sampler.calling_trainer`);
a :class:`LightningTrainLoader` takes it from a trainer named outright.

A loader without a length (a ``StreamLoader``) needs a wrapper, which :func:`for_lightning`
makes: Lightning's fetcher reads it one batch ahead, to find out before the step whether it is
the epoch's last. The loader's own state then counts that batch, and a run resumed from the
checkpoint would skip it. A :class:`LightningStreamLoader`'s state is the position after the
batches Lightning has *trained on*, and it reads Lightning's progress counters where
Lightning's own calls leave the stream in the wrong place (see the class).

``DataModule.to_lightning()`` gives Lightning both by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from loaderkit.integrations._lookahead import LoaderView, LookaheadLoader
from loaderkit.runtime.passes.epoch_sampler import EpochSampler, calling_trainer

__all__ = ["LightningStreamLoader", "LightningTrainLoader", "for_lightning"]

_LOG = logging.getLogger("loaderkit")


class _Dropped:
    """A pass of a :class:`LightningStreamLoader` not read to its end, and where it stands."""

    def __init__(self, ready: int | None, before: dict[str, Any]) -> None:
        self.ready = ready  # Lightning's count of the batches its loop took, at the start
        self.read = 0  # the batches the pass delivered
        self.before_last = before  # the stream's state before the last of them


def _progress(trainer: Any, counter: str) -> int | None:
    """A progress counter of the trainer's fit loop (``fit_loop.<counter>``), if it has one."""
    value = getattr(trainer, "fit_loop", None)
    for name in counter.split("."):
        value = getattr(value, name, None)
    return value if isinstance(value, int) else None


def _ready(trainer: Any) -> int | None:
    """Lightning's count of the training batches its loop took, if there is a trainer."""
    return _progress(trainer, "epoch_loop.batch_progress.total.ready")


class LightningStreamLoader(LookaheadLoader):
    """A streamed loader whose state leaves out the batch Lightning has read ahead.

    Iterates exactly like the wrapped loader. While a pass runs (from its second batch on),
    ``state_dict()`` is the loader's state before its last delivered batch (the one
    Lightning's fetcher holds, not yet trained on); otherwise it is the loader's own.
    ``set_epoch``, ``load_state_dict``, ``close`` and everything else are the loader's.

    With a trainer (``trainer``, a getter; else the trainer of the Lightning loop that
    calls ``iter()``), two of Lightning's counters set the stream right where Lightning's
    calls alone would not:

    - the first pass, unless a state was loaded, is the epoch Lightning is about to train
      (``fit_loop.epoch_progress.current.processed``): a run resumed by epochs from a
      checkpoint at an epoch's end, which Lightning does not reload and reads a batch of
      before it sets the epoch, starts with that epoch rather than epoch 0;
    - a new pass after one Lightning dropped: if the batches delivered outnumber those
      Lightning's loop took (``fit_loop.epoch_loop.batch_progress.total.ready``), the one
      read ahead and never trained (the finished epoch re-entered after a restart from a
      checkpoint taken after validation) is given back, and the new pass starts with it. A
      pass cut short after trained batches (``limit_train_batches``) gives nothing back;
    - while a pass runs, the same count says whether Lightning read a batch ahead: with
      ``limit_train_batches`` it does not, and ``state_dict()`` is then after every
      delivered batch; and a state loaded at the end of an epoch so cut short starts the
      epoch Lightning names next, not the untrained rest of its own.

    Lightning's own ``sampler.set_epoch(e)``, before every epoch, follows the stream:

    - once Lightning reloaded a state (it restarted inside an epoch, or by steps): ignored;
      the loaded position goes on, then the next epochs (Lightning's count can run one ahead
      after such a restart, see the module docstring);
    - else, while a pass runs (Lightning's fetcher starts the first pass, and reads a batch
      of it ahead, before it tells the epoch): kept if it reads epoch ``e``; otherwise the
      pass goes on with epoch ``e`` from its first batch, after the batch already read
      ahead, which belonged to the other epoch (logged as a warning; with a trainer, the
      first pass's rule above has already started the right epoch);
    - else: the loader's ``set_epoch(e)``.
    """

    _own = ("loader", "_trainer", "_fitting")

    def __init__(self, loader: Any, trainer: Callable[[], Any] | None = None) -> None:
        super().__init__(loader)
        self._trainer = trainer  # the trainer's getter; else found on the stack
        self._fitting: Any = None  # the trainer of the running pass (None: none known)
        self._running = False  # a pass of this wrapper is in progress
        self._loaded = False  # a state was loaded: the stream's position decides the epochs
        self._started = False  # a pass was asked for (Lightning's first iter() is a check)
        self._switch: int | None = None  # the epoch the running pass goes on with
        self._dropped: _Dropped | None = None  # the last pass, while not read to its end

    @property
    def sampler(self) -> EpochSampler:
        """Where Lightning sets the epoch, by the rule of the class docstring."""
        return EpochSampler(self, self._lightning_epoch)

    def _lightning_epoch(self, epoch: int) -> None:
        if self._loaded and not self._cut_short(epoch):
            return
        if not self._running:
            self.set_epoch(epoch)
        elif self.loader.epoch != epoch:
            self._switch = epoch

    def _cut_short(self, epoch: int) -> bool:
        """Whether Lightning cuts its epochs short and ``epoch`` is past the stream's.

        With ``limit_train_batches`` (an int: Lightning's ``num_training_batches`` is a
        number rather than infinity for a stream), an epoch ends after that many batches;
        a state loaded in an epoch so ended has a rest Lightning will not train, so the
        epoch Lightning names next starts afresh.
        """
        limit = getattr(self._fitting, "num_training_batches", None)
        return isinstance(limit, int) and epoch > self.loader.epoch

    def state_dict(self) -> dict[str, Any]:
        """The position after the batches Lightning's loop has taken.

        While a pass runs, Lightning has usually read one batch ahead (the held state is
        before it); with a trainer known, its count of the batches taken tells when it has
        not (``limit_train_batches`` makes the epoch's length known, so nothing is read
        ahead): then the position is after every delivered batch.
        """
        dropped = self._dropped
        if self._held is not None and dropped is not None and dropped.ready is not None:
            taken = _ready(self._fitting)
            if taken is not None and taken - dropped.ready == dropped.read:
                state: dict[str, Any] = self.loader.state_dict()
                return state
        return super().state_dict()

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Continue from ``state`` (the loader's own); Lightning's epochs follow it from now."""
        super().load_state_dict(state, strict=strict)
        self._loaded = True

    def __iter__(self) -> Iterator[Any]:
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is None:  # none named (or not attached yet): the calling loop's
            trainer = calling_trainer()
        self._fitting = trainer
        self._rewind_untrained(trainer)
        if not self._started and not self._loaded:
            # a run resumed by epochs from an epoch's end: Lightning does not reload the
            # loader's state, and reads the first batch ahead before it tells the epoch
            first = _progress(trainer, "epoch_progress.current.processed")
            if first is not None and first != self.loader.epoch:
                self.loader.set_epoch(first)
        self._started = True
        return self._pass(_ready(trainer))

    def _rewind_untrained(self, trainer: Any) -> None:
        """Give back the batch Lightning read ahead in a pass it dropped without training it.

        A run resumed from a checkpoint taken after the epoch's validation re-enters the
        finished epoch: Lightning's fetcher reads a batch of the stream ahead, the loop trains
        none and asks for a new pass. Lightning's count of the batches its loop took
        (``batch_progress.total.ready``) tells that apart from a pass cut short after a
        trained batch (``limit_train_batches``): the stream goes back to before the batches
        read and not taken.
        """
        dropped, self._dropped = self._dropped, None
        taken = _ready(trainer)
        if dropped is None or taken is None or dropped.ready is None:
            return
        untaken = dropped.read - (taken - dropped.ready)
        if untaken == 1:
            self.loader.load_state_dict(dropped.before_last)
        elif untaken > 1:
            _LOG.warning(
                "loaderkit: Lightning dropped %d batches of this stream it had read and not "
                "trained on; the stream goes on after them",
                untaken,
            )

    def _pass(self, ready: int | None) -> Iterator[Any]:
        self._held = None
        self._switch = None
        previous: dict[str, Any] | None = None
        self._running = True
        dropped = _Dropped(ready, self.loader.state_dict())
        self._dropped = dropped
        try:
            batches = iter(self.loader)
            while True:
                if self._switch is not None:  # Lightning named another epoch: go on with it
                    _LOG.warning(
                        "loaderkit: Lightning read a batch of epoch %d of this stream ahead "
                        "before it set epoch %d (it did not reload the loader's state); that "
                        "batch is trained, then epoch %d from its start. Give Lightning "
                        "DataModule.to_lightning() for an exact resume",
                        self.loader.epoch,
                        self._switch,
                        self._switch,
                    )
                    self.loader.set_epoch(self._switch)
                    self._switch = None
                    batches = iter(self.loader)
                    previous = self.loader.state_dict()
                    dropped.before_last = previous
                try:
                    before = self.loader.state_dict() if previous is None else previous
                    batch = next(batches)
                except StopIteration:
                    break
                self._held = previous  # after the batch before this one
                dropped.before_last, dropped.read = before, dropped.read + 1
                previous = self.loader.state_dict()
                yield batch
        finally:
            self._running = False
        self._held = None  # the pass ended: Lightning trains on what it holds first
        if self._dropped is dropped:
            self._dropped = None

    def __repr__(self) -> str:
        return f"for_lightning({self.loader!r})"


class LightningTrainLoader(LoaderView):
    """A map-style loader that Lightning tells its epoch by ``trainer.current_epoch``.

    Iterates exactly like the wrapped loader; ``len``, ``state_dict`` / ``load_state_dict``,
    ``set_epoch`` and every other attribute are the loader's. Only :attr:`sampler`, where
    Lightning sets the epoch before every training epoch, differs: its ``set_epoch`` uses
    the trainer's ``current_epoch`` (the number Lightning passes when there is no trainer)
    rather than the number Lightning passes, which runs one ahead after a restart by steps
    from a checkpoint taken at an epoch's end (see the module docstring). A loaded state at
    that epoch's end then resumes as its empty rest, which is what Lightning's restarted
    epoch reads, and the next epoch follows. A loader passed as it is does the same when
    Lightning's fit loop is the caller (it finds that loop's trainer on the call stack);
    this wrapper names the trainer outright.
    """

    _own = ("loader", "_trainer")

    def __init__(self, loader: Any, trainer: Callable[[], Any]) -> None:
        super().__init__(loader)
        self._trainer = trainer

    @property
    def sampler(self) -> EpochSampler:
        """Where Lightning sets the epoch: the loader's ``set_epoch(trainer.current_epoch)``."""
        return EpochSampler(self.loader, self._trainer_epoch)

    def _trainer_epoch(self, epoch: int) -> None:
        current = getattr(self._trainer(), "current_epoch", None)
        self.loader.set_epoch(epoch if current is None else int(current))


def for_lightning(loader: Any, trainer: Any = None) -> Any:
    """The loader to give Lightning's ``Trainer.fit``.

    - a streamed loader (no length, so Lightning reads it one batch ahead): a
      :class:`LightningStreamLoader`, so that checkpoints resume exactly;
    - a map-style loader with ``trainer`` (the ``Trainer`` that will fit on it): a
      :class:`LightningTrainLoader`, told its epoch by ``trainer.current_epoch``;
    - a map-style loader without ``trainer``: ``loader`` itself. Its
      :attr:`~loaderkit.runtime.loader.Loader.sampler` finds the trainer of the Lightning
      loop that calls it (:func:`~loaderkit.runtime.passes.epoch_sampler.calling_trainer`), so every
      resume is exact with it too; ``trainer`` only names it outright.

    A stream's wrapper asks ``trainer`` (else the calling loop's trainer) how many batches
    Lightning's loop took, to give back a batch Lightning read ahead and dropped untrained,
    and which epoch a run resumed by epochs starts with (see :class:`LightningStreamLoader`).
    """
    from loaderkit.runtime.stream.loader import StreamLoader

    if isinstance(loader, StreamLoader):
        return LightningStreamLoader(loader, None if trainer is None else (lambda: trainer))
    if trainer is not None:
        return LightningTrainLoader(loader, lambda: trainer)
    return loader
