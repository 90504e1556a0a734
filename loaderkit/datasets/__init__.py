"""Dataset sources: registered factories a plan file calls to make its dataset again.

A plan records a dataset by *binding* (the caller passes the object again when loading) and,
when the dataset came from :func:`load`, by its *source*: a factory name and its options, plain
data. ``LoaderPlan.load(path)`` then calls the factory again and needs no bindings::

    import loaderkit.datasets as lkd

    ds = lkd.load("tokens", n=1000, seed=3)           # any registered factory, by name
    ds = lkd.from_files("data/train.jsonl")           # local json/jsonl/csv/parquet/text files
    plan = DataLoaderBuilder().with_dataset(ds, name="train").with_batch_size(8).compile()
    plan.save("plans/train.toml")                     # [dataset.source] name + options
    again = LoaderPlan.load("plans/train.toml")       # calls the factory; no bindings needed

The API:

- ``register(name, factory=None, *, description="", paths=(), replace=False)``: register a
  factory ``(**options) -> dataset`` (as a call or a decorator). ``paths`` names the options
  that hold file paths (a string or a list of strings): :func:`load` makes relative ones
  absolute, ``plan.save(file)`` stores them relative to the file's folder when they lie inside
  it, and ``LoaderPlan.load(file)`` resolves relative ones against that folder.
- ``load(name, /, **options)``: call the factory and return its dataset, remembering the
  source. ``name`` is a registered name or a ``"module:qualname"`` reference to a factory.
  Options must be plain data (str, int, float, bool, None, lists and dicts of them); the
  factory receives them as given (lists stay lists).
- ``from_files(path_or_paths, format=None, *, split="train", cache_dir=None)``:
  ``load("hf_files", ...)`` with
  the format guessed from the suffix (``.json``/``.jsonl`` json, ``.csv``, ``.parquet``,
  ``.txt`` text; ``.gz``/``.bz2``/``.xz``/``.zst`` compression is looked through).
- ``source_of(dataset)``: the :class:`DatasetSource` the dataset remembers, or ``None``.
- ``flat(samples)``: a list's samples stored flat (one byte buffer plus offsets, a
  :class:`FlatSamples`), for a ``Dataset`` class of your own to hold so that its workers
  read it without copying it (:mod:`loaderkit.datasets.serialized`; a list given to
  ``with_dataset`` is stored so by itself, see ``storage=``).
- ``factories``: the :class:`~loaderkit.registry.Registry` (``names()``, ``describe()``,
  ``get()``); installed packages add factories through the entry-point group
  ``loaderkit.datasets``.

Built-in factories:

- ``hf_files(data_files, format=None, split="train", cache_dir=None)``: HF
  ``datasets.load_dataset(format, data_files=..., split=..., cache_dir=...)`` of local files
  (glob patterns allowed; each must be a regular file: devices, FIFOs, sockets, directories
  and ``/proc`` or ``/sys`` entries, or links to them, are refused). The dataset's identity is
  a sha256 of the files' bytes (with format and split), so moving or copying the files keeps
  it, and a changed file is noticed when a plan is loaded (each call reads the files once more
  to hash them, about a second per GB). HF writes an Arrow copy of the data (and lock files)
  into ``cache_dir``, or its own cache (``HF_DATASETS_CACHE``) when unset; ``cache_dir`` is a
  path option, not part of the stream fingerprint.
- ``image_folder(root, mode="RGB", allow_empty=False, follow_external_links=False,
  hash_contents=False, decode_scale="auto", decoder="auto")``: images in class folders
  (torchvision's ``ImageFolder`` layout), samples ``(uint8 CHW tensor, class index)``; and
  ``image_files(files, labels=None, ...)``: image files or glob patterns. Decoded lazily in the
  workers; identity is the file list with sizes and times (or content hashes). See
  :mod:`loaderkit.datasets.images` and ``docs/vision.md``.
- ``tokens(n=1000, vocab_size=1000, min_length=8, max_length=64, seed=0)``: ``n`` samples
  ``{"input_ids": [...]}`` of random lengths in ``[min_length, max_length]``, each a pure
  function of ``(seed, index)``: a small map-style dataset for examples and tests.

What a dataset remembers: the object :func:`load` returned, as long as it is unchanged. A
dataset derived from it (``ds.map(...)``, ``ds.with_format(...)``, a copy, a wrapper) is a new
object without a source: pass it by binding, or register a factory that makes it. A factory
returning a ``list``, ``dict`` or ``tuple`` gets it back as a subclass of that type that can
hold the source. HF datasets changed in place (``set_format``) lose their source as well.

Security (``docs/security.md``): loading a plan file only calls *registered* factories. A
``"module:qualname"`` source is your own code in :func:`load`, but a plan file naming one is
refused (register the factory under a name instead, or pass the dataset in bindings), whatever
the trust settings; inspecting a plan (``require_bindings=False``) calls no factory at all.

The plan layer imports this package; it never imports torch or ``datasets`` itself: factories
import what they need inside their bodies. The package is its parts: :mod:`.registry` (names),
:mod:`.provenance` (a dataset's source: load, rebuild, remember), :mod:`.paths` (path options),
:mod:`.synthetic` (``tokens``), :mod:`.files` (``hf_files``), :mod:`.images`,
:mod:`.serialized` (flat storage) and :mod:`.shortcuts` (``from_files``, ``image_folder``, ...).
"""

from __future__ import annotations

from loaderkit.datasets import images as _images
from loaderkit.datasets.files import FORMATS, hf_files
from loaderkit.datasets.provenance import DatasetSource, load, source_of
from loaderkit.datasets.registry import declare_paths, factories, register
from loaderkit.datasets.serialized import FlatSamples, flat
from loaderkit.datasets.shortcuts import from_files, image_files, image_folder
from loaderkit.datasets.synthetic import SyntheticTokens, tokens

__all__ = [
    "FORMATS",
    "DatasetSource",
    "FlatSamples",
    "SyntheticTokens",
    "factories",
    "flat",
    "from_files",
    "image_files",
    "image_folder",
    "load",
    "register",
    "source_of",
]

factories.register("hf_files", hf_files, origin="builtin")
declare_paths("hf_files", ("data_files", "cache_dir"))
factories.register("tokens", tokens, origin="builtin")
factories.register("image_folder", _images.image_folder, origin="builtin")
declare_paths("image_folder", ("root",))
factories.register("image_files", _images.image_files, origin="builtin")
declare_paths("image_files", ("files",))
