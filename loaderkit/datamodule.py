"""``DataModule``: the train, val, test and predict loaders of a set of plans, built once.

It has the methods a Lightning ``LightningDataModule`` has (``prepare_data``, ``setup``,
``train_dataloader`` ... ``predict_dataloader``, ``state_dict`` / ``load_state_dict``,
``teardown``), so a trainer that calls them by name can use it, and plain training loops can
too. Lightning's own ``Trainer`` wants an instance of its class: ``DataModule.to_lightning()``
gives one that delegates every hook here (a ``DataModule`` given to ``Trainer.fit`` as it is
raises a ``TypeError`` that says so). Lightning is imported by that method only; torch is
imported only when a loader is built.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loaderkit._text import shown
from loaderkit.errors import PlanError, PlanTypeError, ResumeError
from loaderkit.order.split import SplitName, split_sizes
from loaderkit.plan.plan import LoaderPlan

if TYPE_CHECKING:
    from loaderkit.runtime.loader import Loader

__all__ = ["DATAMODULE_STATE_VERSION", "DataModule", "EvalLoader"]

DATAMODULE_STATE_VERSION = 1
"""The version of ``DataModule.state_dict()``'s format."""

_STAGES = ("val", "test", "predict")


class EvalLoader:
    """An evaluation loader: every iteration is one whole pass, from the first batch.

    Every pass of a :class:`~loaderkit.Loader` is whole already (each ``iter()`` starts a
    new pass from its first batch, even after a pass was cut short, as a sanity check does);
    an evaluation loader also makes every pass epoch 0 (``set_epoch(0)`` before it, and again
    when it ends), so that even a shuffled evaluation plan reads the same batches in the same
    order every time, instead of the next epoch's order. Everything else (``len``,
    ``explain()``, ``plan``, ``split``, ``close()``) is the loader's.
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        loader = self.loader
        loader.set_epoch(0)
        yield from loader
        loader.set_epoch(0)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __repr__(self) -> str:
        return f"EvalLoader({self.loader!r})"


class DataModule:
    """The loaders of a training run, from plans: ``DataModule(train, val, test, predict)``.

    ``train`` is a :class:`~loaderkit.LoaderPlan`; ``train_dataloader()`` builds it (its
    train part when it has a split); like any loader, each iteration of it is the next pass
    (epoch), and after ``load_state_dict`` the next pass resumes the saved one.
    ``val``, ``test`` and ``predict`` are plans too, or ``None``: then, if the train plan has
    a split with a val (test) part, ``val_dataloader()`` (``test_dataloader()``) reads that
    part through ``train.for_eval()``: every sample once, in order, nothing random. A given
    plan that has a split reads its part named like the stage (``"val"``, ``"test"``;
    ``"test"`` for predict); one without reads its whole dataset. Evaluation loaders are
    :class:`EvalLoader`: each iteration is one full pass.

    Every loader is built once, on first request, and reused. ``state_dict()`` holds the
    train loader's state (evaluation loaders need none: every pass starts afresh), and
    ``load_state_dict()`` continues the train stream exactly; ``set_epoch(e)`` makes the
    train loader's next pass epoch ``e``. :attr:`stages` lists the stages with a loader.
    """

    prepare_data_per_node = True
    """Lightning reads this; there is nothing to prepare (``prepare_data`` does nothing)."""

    def __init__(
        self,
        train: LoaderPlan,
        val: LoaderPlan | None = None,
        test: LoaderPlan | None = None,
        predict: LoaderPlan | None = None,
    ) -> None:
        for name, plan in (("train", train), ("val", val), ("test", test), ("predict", predict)):
            if not isinstance(plan, LoaderPlan) and (name == "train" or plan is not None):
                raise PlanTypeError.single(
                    f"datamodule.{name}",
                    f"must be a LoaderPlan{'' if name == 'train' else ' or None'} (got "
                    f"{type(plan).__name__}); call .compile() on the builder",
                )
        self.train_plan = train
        self.plans: dict[str, LoaderPlan | None] = {"val": val, "test": test, "predict": predict}
        self._train: Loader | None = None
        self._eval: dict[str, EvalLoader] = {}
        self._for_eval: LoaderPlan | None = None

    # -- the Lightning hooks that have nothing to do here ----------------------------------

    def prepare_data(self) -> None:
        """Nothing to download or write: plans hold their datasets already."""

    def setup(self, stage: str | None = None) -> None:
        """Nothing to set up: loaders are built on first request."""

    def teardown(self, stage: str | None = None) -> None:
        """Stop the worker processes of every loader built (they stay usable)."""
        for loader in self._loaders():
            loader.close()

    # -- loaders ------------------------------------------------------------------------------

    def train_dataloader(self) -> Loader:
        """The train loader (built on the first call, then the same object)."""
        if self._train is None:
            self._train = self.train_plan.build()
        return self._train

    def val_dataloader(self) -> EvalLoader:
        """The val loader; see the class docstring for where it comes from."""
        return self._eval_loader("val")

    def test_dataloader(self) -> EvalLoader:
        """The test loader; see the class docstring for where it comes from."""
        return self._eval_loader("test")

    def predict_dataloader(self) -> EvalLoader:
        """The loader of the ``predict`` plan (its test part, if it has a split)."""
        return self._eval_loader("predict")

    def _source(self, stage: str) -> tuple[LoaderPlan, SplitName]:
        """The plan an evaluation stage reads and the part of its split to build."""
        part: SplitName = "val" if stage == "val" else "test"  # predict reads the test part
        given = self.plans[stage]
        if given is not None:
            return given, "train" if given.split is None else part
        split = self.train_plan.split
        n = self.train_plan.dataset.length or 0
        _, n_val, n_test = (0, 0, 0) if split is None else split_sizes(n, split.val, split.test)
        if stage == "predict" or (n_val if stage == "val" else n_test) < 1:
            fix = (
                f"DataModule(train, {stage}=plan)"
                if stage == "predict"
                else f"DataModule(train, {stage}=plan), or give the train plan a {stage} part "
                f"with .with_split({stage}=...)"
            )
            raise PlanError.single(
                f"datamodule.{stage}", f"no {stage} loader: there is no {stage} plan; pass {fix}"
            )
        if self._for_eval is None:
            self._for_eval = self.train_plan.for_eval()
        return self._for_eval, part

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this data module has a loader for, in order: always ``"train"``.

        ``"val"`` / ``"test"`` when a plan was given for them or the train plan's split has
        that part, ``"predict"`` when a predict plan was given. ``to_lightning()`` offers
        Lightning only these, so a model with a ``validation_step`` and no val loader trains
        without validation, as Lightning does with its own data modules.
        """
        found = ["train"]
        for stage in _STAGES:
            try:
                self._source(stage)
            except PlanError:
                continue
            found.append(stage)
        return tuple(found)

    def _eval_loader(self, stage: str) -> EvalLoader:
        found = self._eval.get(stage)
        if found is None:
            plan, part = self._source(stage)
            found = self._eval[stage] = EvalLoader(plan.build(split=part))
        return found

    def _loaders(self) -> list[Loader]:
        built = [] if self._train is None else [self._train]
        return built + [e.loader for e in self._eval.values()]

    # -- state --------------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Make the train loader's next pass ``epoch``, from its first batch.

        Evaluation loaders need no epoch: every pass starts at epoch 0.
        """
        self.train_dataloader().set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """What continues the run exactly: the train loader's state (JSON-serializable)."""
        return {
            "loaderkit_datamodule": DATAMODULE_STATE_VERSION,
            "train": self.train_dataloader().state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``, what :meth:`state_dict` returned.

        The train loader's next batch is the one after the last delivered (the train loader is
        built if it was not yet). Raises :class:`~loaderkit.ResumeError` for a state of
        another plan or split.
        """
        if not isinstance(state, Mapping) or "train" not in state:
            raise ResumeError(
                "not a loaderkit DataModule state: pass what DataModule.state_dict() returned "
                "(a dict with 'loaderkit_datamodule' and 'train')"
            )
        version = state.get("loaderkit_datamodule")
        if version != DATAMODULE_STATE_VERSION:
            raise ResumeError(
                f"DataModule state format {shown(version)} is not the one this loaderkit reads "
                f"({DATAMODULE_STATE_VERSION})"
            )
        self.train_dataloader().load_state_dict(state["train"])

    def to_lightning(self) -> Any:
        """A ``lightning.pytorch.LightningDataModule`` of this data module, for ``Trainer.fit``.

        Every hook (the dataloaders, ``state_dict`` / ``load_state_dict``, ``setup``,
        ``teardown``) delegates to this object, available as the result's ``.data``. Lightning
        stores this data module's state in its checkpoints and always loads it back, and it
        sees that the train loader is stateful and stores (and, restarting inside an epoch,
        reloads) its state too, so ``Trainer.fit(..., ckpt_path=...)`` continues after the
        checkpoint's last batch, taken inside an epoch or at its end, resumed by epochs or
        by steps. The train loader Lightning gets is wrapped
        (:func:`~loaderkit.integrations.lightning.for_lightning`): a map-style one is told
        its epoch by ``trainer.current_epoch`` (a
        :class:`~loaderkit.integrations.lightning.LightningTrainLoader`), a streamed one
        leaves the batch Lightning reads ahead out of its state (a
        :class:`~loaderkit.integrations.lightning.LightningStreamLoader`). Only the loaders
        of :attr:`stages` are defined on the result: without a val loader Lightning skips
        validation (as with any data module that has no ``val_dataloader``). Needs Lightning
        (``lightning`` or ``pytorch_lightning``) installed.
        """
        return _lightning_class(frozenset(self.stages))(self)

    # -- what Lightning reaches for when given this object instead of to_lightning()'s ------

    @property
    def trainer(self) -> None:
        """Always ``None``: a ``DataModule`` is not attached to a Lightning ``Trainer``."""
        return None

    @trainer.setter
    def trainer(self, trainer: object) -> None:
        raise TypeError(
            f"{type(trainer).__name__} was given a loaderkit DataModule, which is not a "
            f"LightningDataModule; pass datamodule=dm.to_lightning() (it delegates every hook "
            f"to this DataModule)"
        )

    def on_exception(self, exception: BaseException) -> None:
        """Nothing to clean up; defined so that Lightning reports the first error it met."""

    def __repr__(self) -> str:
        given = [s for s in _STAGES if self.plans[s] is not None]
        extra = "".join(f", {s}=..." for s in given)
        return f"DataModule(train={self.train_plan!r}{extra})"


@functools.cache
def _lightning_class(stages: frozenset[str] = frozenset(("train", *_STAGES))) -> type[Any]:
    """The ``LightningDataModule`` subclass wrapping a :class:`DataModule` with ``stages``.

    Made once per set of stages. The loader hooks of the other stages are left undefined:
    Lightning looks at which hooks a data module overrides to decide what to run.
    """
    pl: Any
    try:
        pl = importlib.import_module("lightning.pytorch")
    except ImportError:
        try:
            pl = importlib.import_module("pytorch_lightning")
        except ImportError as exc:
            raise ImportError(
                "DataModule.to_lightning() needs Lightning; install it with `pip install "
                "lightning` (or pass the DataModule's loaders to your own loop)"
            ) from exc

    class LoaderkitDataModule(pl.LightningDataModule):  # type: ignore[misc]
        """A Lightning data module whose hooks are those of a loaderkit ``DataModule``."""

        def __init__(self, data: DataModule) -> None:
            super().__init__()
            self.data = data
            self.prepare_data_per_node = data.prepare_data_per_node
            self._train: Any = None  # the train loader as Lightning gets it

        def prepare_data(self) -> None:
            self.data.prepare_data()

        def setup(self, stage: str) -> None:
            self.data.setup(stage)

        def teardown(self, stage: str) -> None:
            self.data.teardown(stage)

        def train_dataloader(self) -> Any:
            # a streamed loader is wrapped (Lightning reads it one batch ahead), a map-style
            # one is told its epoch by the trainer's current_epoch: see for_lightning
            from loaderkit.integrations.lightning import (
                LightningStreamLoader,
                LightningTrainLoader,
            )
            from loaderkit.runtime.stream.loader import StreamLoader

            loader = self.data.train_dataloader()
            if self._train is None or self._train.loader is not loader:
                if isinstance(loader, StreamLoader):
                    self._train = LightningStreamLoader(loader, lambda: self.trainer)
                else:
                    self._train = LightningTrainLoader(loader, lambda: self.trainer)
            return self._train

        def state_dict(self) -> dict[str, Any]:
            state = self.data.state_dict()
            if self._train is not None and self._train is not self.data.train_dataloader():
                state["train"] = self._train.state_dict()  # without the batch read ahead
            return state

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            self.data.load_state_dict(state_dict)
            if self._train is not None and self._train is not self.data.train_dataloader():
                self._train.load_state_dict(state_dict["train"])

        def __repr__(self) -> str:
            return f"{self.data!r}.to_lightning()"

    def val_dataloader(self: Any) -> Any:
        return self.data.val_dataloader()

    def test_dataloader(self: Any) -> Any:
        return self.data.test_dataloader()

    def predict_dataloader(self: Any) -> Any:
        return self.data.predict_dataloader()

    for hook in (val_dataloader, test_dataloader, predict_dataloader):
        if hook.__name__.removesuffix("_dataloader") in stages:
            setattr(LoaderkitDataModule, hook.__name__, hook)
    return LoaderkitDataModule
