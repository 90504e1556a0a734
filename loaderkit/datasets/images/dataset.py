"""The dataset the image factories return: :class:`ImageDataset`, decoded where it is read."""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from loaderkit.datasets.images.decode import JPEG_MAGIC, decode_bytes, read_regular
from loaderkit.datasets.images.decode_size import Target, jpeg_size, may_draft, shrink_target
from loaderkit.datasets.images.options import OPTION, Decoder, DecodeScale, ImageMode
from loaderkit.errors import PlanError, data_error

__all__ = ["ImageDataset"]

_HASHES: dict[tuple[str, int, int, int], str] = {}
"""(real path, size, mtime_ns, inode) -> sha256 of the file: content hashes kept per process."""


def _content_hash(path: str) -> str:
    info = os.stat(path)
    key = (os.path.realpath(path), int(info.st_size), int(info.st_mtime_ns), int(info.st_ino))
    found = _HASHES.get(key)
    if found is None:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        found = _HASHES[key] = digest.hexdigest()
    return found


class ImageDataset:
    """Map-style dataset of image files, decoded in ``__getitem__`` (see the package docstring).

    Made by :func:`image_folder` or :func:`image_files`. ``classes``, ``class_to_idx``,
    ``samples`` and ``targets`` are as in torchvision's ``ImageFolder``.
    """

    __module__ = "loaderkit.datasets.images"  # its public home: plans record the type by it

    def __init__(
        self,
        *,
        factory: str,
        root: str,
        paths: Sequence[str],
        sizes: Sequence[int],
        mtimes: Sequence[int],
        labels: Sequence[int] | None,
        classes: Sequence[str],
        skipped: Sequence[tuple[str, str]],
        mode: ImageMode,
        decode_scale: DecodeScale,
        decoder: Decoder,
        hash_contents: bool,
    ) -> None:
        self.factory = factory
        self.root = root
        self.paths = tuple(paths)
        self.sizes = tuple(sizes)
        self.mtimes = tuple(mtimes)
        self.labels = None if labels is None else tuple(labels)
        self.classes = list(classes)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.skipped: tuple[tuple[str, str], ...] = tuple(skipped)
        """What the listing left out: ``(path relative to the root, reason)``."""
        self.mode = mode
        self.decode_scale = decode_scale
        self.decoder = decoder
        self.hash_contents = hash_contents
        self.target: Target | None = None
        """What the plan's first transform step resizes to (set by :meth:`loaderkit_prepare`)."""
        self.full_decoder: Literal["pil", "torchvision"] = "pil"
        self.decode_note = "PIL, full size (no transform seen yet)"
        self._identity: str | None = None

    # torchvision's ImageFolder attributes
    @property
    def targets(self) -> list[int]:
        """The label of every sample (``ImageFolder.targets``); ``[]`` without labels."""
        return [] if self.labels is None else list(self.labels)

    @property
    def samples(self) -> list[tuple[str, int]]:
        """``(path, label)`` of every sample (``ImageFolder.samples``)."""
        labels = self.labels if self.labels is not None else (-1,) * len(self.paths)
        return list(zip(self.paths, labels, strict=True))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        path = self.paths[index]
        listed = (self.sizes[index], None if self.hash_contents else self.mtimes[index])
        try:
            data = read_regular(path, listed)
            image = decode_bytes(data, self.mode, self.target, self.full_decoder)[0]
        except Exception as exc:  # any read or decode failure names the file
            raise data_error(
                f"image {os.path.relpath(path, self.root)!r} (in {self.root!r}) cannot be "
                f"read: {type(exc).__name__}: {exc}; replace or remove the file, or skip "
                f"bad samples with with_error_policy('skip')",
                exc,
            ) from exc
        if self.labels is None:
            return image
        return image, self.labels[index]

    # -- identity ---------------------------------------------------------------------------

    @property
    def _fingerprint(self) -> str:
        """The dataset's identity (the plan's ``dataset.identity``): the listing, hashed."""
        if self._identity is None:
            digest = hashlib.sha256(f"{self.factory}\0{self.mode}\0".encode())
            labels = self.labels if self.labels is not None else (-1,) * len(self.paths)
            for path, size, mtime, label in zip(
                self.paths, self.sizes, self.mtimes, labels, strict=True
            ):
                stamp = _content_hash(path) if self.hash_contents else str(mtime)
                shown = os.path.relpath(path, self.root)
                digest.update(f"{shown}\0{size}\0{stamp}\0{label}\n".encode())
            digest.update("\0".join(self.classes).encode())
            self._identity = f"{len(self.paths)} files, {digest.hexdigest()[:32]}"
        return self._identity

    # -- the loader's hooks -----------------------------------------------------------------

    def loaderkit_prepare(self, transform: Callable[..., Any] | None) -> ImageDataset:
        """A copy decoding for ``transform`` (called by the loader at build, in the main process).

        Sets the reduced-scale target from the transform's first step (unless
        ``decode_scale="full"``) and, with ``decoder="auto"``, measures PIL against
        torchvision's ``decode_jpeg`` on the first JPEG and keeps the faster.
        """
        import copy

        prepared = copy.copy(self)
        target, note = self._scale_choice(transform)
        sample = self._first_jpeg()
        if target is not None:
            prepared.target = target
            size = None if sample is None else jpeg_size(sample)
            if size is not None:
                fits = may_draft(target, size)
                note += (
                    f" (the first JPEG, {size[0]}x{size[1]}, "
                    f"{'is drafted' if fits else 'is too small: decoded whole'})"
                )
        notes = [note]
        prepared.full_decoder, why = self._choose_decoder(sample)
        notes.append(f"whole JPEGs: {why}")
        prepared.decode_note = f"{self.mode}; " + "; ".join(notes)
        return prepared

    def _scale_choice(self, transform: Callable[..., Any] | None) -> tuple[Target | None, str]:
        """The reduced-scale target for ``transform`` (``None``: full size) and why."""
        found = shrink_target(transform) if transform is not None else None
        if found is not None and self.decode_scale == "auto":
            return found[0], f"reduced-scale JPEGs for {found[1]}, the transform's first step"
        if found is not None:
            return None, f"full size (decode_scale='full', though {found[1]} shrinks)"
        if transform is None:
            return None, "full size (no transform)"
        return None, "full size (the transform's first step does not shrink the image)"

    def loaderkit_plan_explain(self, transform: Callable[..., Any] | None) -> str:
        """The decode path a plan with ``transform`` takes, for ``plan.explain()``.

        Reads no file and measures nothing: which whole-JPEG decoder is faster is measured
        when the loader is built (``loader.explain()`` says what was chosen, with timings).
        """
        _target, note = self._scale_choice(transform)
        fixed = self._fixed_decoder()
        decoder = (
            "the faster of PIL and torchvision.io.decode_jpeg, measured on the first JPEG at "
            "build()"
            if fixed is None
            else fixed[1]
        )
        return f"{self.mode}; {note}; whole JPEGs: {decoder}"

    def _fixed_decoder(self) -> tuple[Literal["pil", "torchvision"], str] | None:
        """The whole-JPEG decoder the options fix, and why (``None``: chosen by measuring)."""
        if self.mode != "RGB":
            return "pil", f"PIL (mode {self.mode!r})"
        if self.decoder == "pil":
            return "pil", "PIL (decoder='pil')"
        if self.decoder == "torchvision":
            return "torchvision", "torchvision.io.decode_jpeg (decoder='torchvision')"
        return None

    def _choose_decoder(self, sample: bytes | None) -> tuple[Literal["pil", "torchvision"], str]:
        fixed = self._fixed_decoder()
        if fixed is not None and fixed[0] == "pil":
            return fixed
        try:
            import torchvision.io  # noqa: F401
        except ImportError:
            if fixed is not None:
                raise PlanError.single(
                    f"{OPTION}.decoder",
                    "'torchvision' needs torchvision installed; pip install torchvision or "
                    "pass decoder='auto'",
                ) from None
            return "pil", "PIL (torchvision is not installed)"
        if fixed is not None:
            return fixed
        if sample is None:
            return "pil", "PIL (no readable JPEG among the first files to measure on)"
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as in a worker
        try:
            pil_s = _best_time(lambda: decode_bytes(sample, "RGB", None, "pil"))
            tv_s = _best_time(lambda: decode_bytes(sample, "RGB", None, "torchvision"))
        except Exception:  # noqa: BLE001 - torchvision cannot read what PIL reads: use PIL
            return "pil", "PIL (torchvision failed on the first JPEG)"
        finally:
            torch.set_num_threads(threads)
        chosen: Literal["pil", "torchvision"] = "torchvision" if tv_s < pil_s else "pil"
        name = "torchvision.io.decode_jpeg" if chosen == "torchvision" else "PIL"
        return chosen, (
            f"{name}, measured faster (PIL {pil_s * 1e3:.2f} ms, torchvision "
            f"{tv_s * 1e3:.2f} ms on the first JPEG)"
        )

    def _first_jpeg(self) -> bytes | None:
        """The bytes of the first JPEG PIL decodes, among the first 16 files."""
        for path in self.paths[:16]:
            try:
                data = read_regular(path)
            except OSError:
                continue
            if data.startswith(JPEG_MAGIC):
                try:
                    decode_bytes(data, "RGB", None, "pil")
                except Exception:  # noqa: BLE001 - a bad file is no sample to measure on
                    continue
                return data
        return None

    def loaderkit_explain(self) -> str:
        """One line for ``loader.explain()``: the files, what was left out, the decode path."""
        left = ""
        if self.skipped:
            counts: dict[str, int] = {}
            for _path, reason in self.skipped:
                counts[reason.split(" (")[0]] = counts.get(reason.split(" (")[0], 0) + 1
            left = "; left out: " + ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))
        return f"{len(self):,} images{left}; decode {self.decode_note}"

    def __repr__(self) -> str:
        classes = f", {len(self.classes)} classes" if self.classes else ""
        left = f", {len(self.skipped)} files left out" if self.skipped else ""
        return f"ImageDataset({self.factory}: {len(self):,} images{classes}{left}, {self.root!r})"


def _best_time(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
