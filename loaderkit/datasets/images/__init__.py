"""Image sources: ``image_folder`` and ``image_files``, decoded lazily where samples are fetched.

``image_folder(root, ...)`` reads torchvision's ``ImageFolder`` layout: every folder directly
under ``root`` is a class, classes sorted by name get indices 0, 1, ...; the images are the files
below each class folder (subfolders included) whose names end in one of :data:`IMG_EXTENSIONS`
(torchvision's list, compared lower-cased), sorted as torchvision sorts them. A sample is
``(image, class_index)``, as ``ImageFolder`` gives it. ``image_files(files, labels=None, ...)``
reads a list of files or glob patterns (matches sorted); a sample is ``(image, label)`` with
``labels``, else the bare image.

An image is a ``torch.uint8`` tensor laid out ``(C, H, W)`` (what ``torchvision.io`` decodes to
and what ``torchvision.transforms.v2`` works on; the ``vision`` collator stacks and normalizes a
batch of them at once). ``mode="RGB"`` (the default) converts every image as ``ImageFolder``'s
loader does (``PIL.Image.convert("RGB")``: grayscale repeated, alpha dropped, palette looked up,
CMYK converted, 16-bit values clipped to 255); ``"L"`` gives one channel, ``"RGBA"`` four. The
EXIF orientation is applied (``PIL.ImageOps.exif_transpose``), which ``ImageFolder`` does not do.

Decoding (:func:`decode_image`) happens in ``__getitem__``, in the worker: the dataset holds
only paths, sizes and labels, so it pickles cheaply. A file that cannot be read or decoded
(truncated, corrupt, not an image) raises a :class:`~loaderkit.DataError` naming the file; under
``with_error_policy("skip")`` the sample is skipped and counted like any other bad sample.

Fast decode: when a plan's transform starts with a step that shrinks the image (torchvision
``Resize`` or ``RandomResizedCrop``, v1 or v2, bare or first in a ``Compose``), the loader hands
it to :meth:`ImageDataset.loaderkit_prepare` and JPEG files are decoded at a reduced scale (PIL's
``draft``: DCT scaling by 1/2, 1/4 or 1/8), the smallest one at which that step still gets at
least what it makes (for a random crop: its smallest crop still covers the output). JPEGs
decoded whole use the faster of PIL and ``torchvision.io.decode_jpeg`` (which give the same
pixels; a file torchvision refuses goes to PIL), measured once when the loader is built, on
the dataset's first JPEG. ``decode_scale="full"`` turns reduced-scale decoding off,
``decoder="pil"`` or ``"torchvision"`` fixes the decoder; ``loader.explain()`` says which path
a plan uses.

Listing rules (both factories): only regular files are read. A file that is not one (a FIFO, a
device, a socket), a symlink whose target lies outside ``root`` (``image_folder``; pass
``follow_external_links=True`` to follow those), and any path under ``/proc``, ``/sys`` or
``/dev`` are refused; files without an image extension are left out. Both are recorded in
:attr:`ImageDataset.skipped` (``(path, reason)`` pairs) and counted in ``repr()`` and
``explain()``. A class folder without images is an error, as in torchvision, unless
``allow_empty=True``.

Identity (what a plan's fingerprint covers, and what loading a plan file checks): the sorted
file list with each file's size and modification time (and label); with
``hash_contents=True`` a sha256 of each file's bytes replaces the time, so copies and moves of
the folder keep it. The content hashes are computed when the identity is first needed and kept
for the process (per path, size, time and inode). A file added, removed or changed gives
another identity, and ``LoaderPlan.load`` of a plan made before refuses it (a ``PlanError``
saying the data changed and how many files it lists now against then). Each file is checked
against its listing when it is read (size and time; size alone with ``hash_contents``): one
changed after the dataset was made is a ``DataError`` naming it.

PIL and torch are imported when an image is decoded (or the decoder measured), never when this
package is: the plan layer imports it.
"""

from __future__ import annotations

from loaderkit.datasets.images.dataset import ImageDataset
from loaderkit.datasets.images.decode import decode_image
from loaderkit.datasets.images.decode_size import shrink_target
from loaderkit.datasets.images.factories import image_files, image_folder
from loaderkit.datasets.images.listing import IMG_EXTENSIONS
from loaderkit.datasets.images.options import IMAGE_MODES, Decoder, DecodeScale, ImageMode

__all__ = [
    "IMAGE_MODES",
    "IMG_EXTENSIONS",
    "DecodeScale",
    "Decoder",
    "ImageDataset",
    "ImageMode",
    "decode_image",
    "image_files",
    "image_folder",
    "shrink_target",
]
