"""The ``[dataset]`` section: the dataset a plan reads (and each source of a mixture)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loaderkit._checks import thaw_value
from loaderkit.datasets import DatasetSource, relative_to
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import DatasetSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["SECTION", "dataset_to_dict", "source_table"]


def dataset_to_dict(ds: DatasetSpec) -> dict[str, Any]:
    """The ``[dataset]`` table of a plan file (and of each ``[[mixture.sources]]``)."""
    out: dict[str, Any] = {"binding": ds.binding, "kind": ds.kind, "type": ds.type_name}
    if ds.length is not None:
        out["length"] = ds.length
    if ds.identity is not None:
        out["identity"] = ds.identity
    if ds.columns:
        out["columns"] = list(ds.columns)
    if ds.features:
        out["features"] = list(ds.features)
    if ds.source is not None:
        out["source"] = source_table(ds.source)
    return out


def source_table(source: DatasetSource, folder: Path | None = None) -> dict[str, Any]:
    """The ``[dataset.source]`` table: ``name`` or ``ref``, and ``options``.

    With ``folder`` (the folder of the file being written), path options that lie inside it
    are written relative to it.
    """
    if folder is not None:
        source = relative_to(source, folder)
    key = "ref" if source.is_ref else "name"
    return {key: source.name, "options": thaw_value(source.options)}


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    ds = plan.dataset
    data: dict[str, Any] = {
        "binding": ds.binding,
        "kind": ds.kind,
        "type": ds.type_name,
        "length": ds.length,
        "identity": ds.identity,
        "columns": list(ds.columns),
    }
    if ds.source is not None:  # absent otherwise: older fingerprints are unchanged
        data["source"] = ds.source.without_paths()  # where the files are is not what they hold
    return {"dataset": data}


SECTION: Section[DatasetSpec] = Section(
    name="dataset",
    key="dataset",
    to_dict=dataset_to_dict,
    fingerprint="stream",
    stream=_stream,
    execution_only=("features",),
    rows=(
        FingerprintRow(
            "dataset identity",
            "stream",
            "binding name, kind, type, length, columns; HF datasets' own fingerprint",
        ),
        FingerprintRow(
            "dataset source",
            "stream",
            "(only when set) the factory's name and options, path options left out (see "
            "[dataset sources](#dataset-sources))",
        ),
    ),
)
