"""``calling_trainer``: the Lightning trainer whose loop calls, found on the stack, or None."""

from __future__ import annotations

from typing import Any

from loaderkit.runtime.passes.epoch_sampler import EpochSampler, calling_trainer


class _Loader:
    def __init__(self) -> None:
        self.epoch = 0
        self.told: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.told.append(epoch)
        self.epoch = epoch


def test_outside_lightning_there_is_no_trainer_and_set_epoch_is_as_given() -> None:
    assert calling_trainer() is None
    loader = _Loader()
    EpochSampler(loader).set_epoch(4)
    assert loader.told == [4]


class _Trainer:
    current_epoch = 2


def _loop_class(module: str) -> type[Any]:
    """A class that looks like one of Lightning's loops to the stack search (by its module)."""

    class _FitLoop:
        trainer = _Trainer()

        def on_advance_start(self, sampler: EpochSampler, epoch: int) -> None:
            sampler.set_epoch(epoch)  # as Lightning's _set_sampler_epoch does

    _FitLoop.__module__ = module
    return _FitLoop


def test_called_by_a_lightning_loop_set_epoch_takes_the_trainers_current_epoch() -> None:
    for module in ("lightning.pytorch.loops.fit_loop", "pytorch_lightning.loops.fit_loop"):
        loader = _Loader()
        _loop_class(module)().on_advance_start(EpochSampler(loader), 3)
        assert loader.told == [2]  # Lightning's count ran one ahead; the trainer's is used


def test_another_callers_self_is_not_taken_for_a_trainer() -> None:
    loader = _Loader()
    _loop_class("mytrainer.loops")().on_advance_start(EpochSampler(loader), 3)
    assert loader.told == [3]


def test_a_set_epoch_rule_of_its_own_gets_the_number_as_given() -> None:
    loader = _Loader()
    told: list[int] = []
    _loop_class("lightning.pytorch.loops.fit_loop")().on_advance_start(
        EpochSampler(loader, told.append), 3
    )
    assert told == [3]
