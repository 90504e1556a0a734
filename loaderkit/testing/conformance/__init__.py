"""Where loaderkit's loaders behave unlike torch's and torchdata's, and where they do not.

Data, read by the conformance suite (``tests/conformance/test_lockstep.py``) and rendered in
``docs/loader.md``. The suite drives torch's ``DataLoader``, torchdata's ``StatefulDataLoader``
and a loaderkit loader over the same dataset with the same calls, in lockstep, and compares
what each call gives. The real loaders are the expectation; a difference the suite observes
must be a row of :data:`DIFFERENCES`, or the test fails and prints the calls that led there.

- :data:`DIFFERENCES`: each difference, the *situation* it happens in (facts about the calls
  made before it, named in :data:`SITUATIONS`), what each loader does, and why loaderkit
  differs: on purpose, or because the reference has a bug (:attr:`Difference.reference_bug`).
- :data:`HABITS`: the habits of training code the docs list, each a script the suite runs on
  the three loaders; it must show exactly the differences the habit names (none: loaderkit
  does what torch and torchdata do).

Pure data (no torch): the docs build renders :func:`habits_table` and
:func:`differences_table`, and ``tests/test_docs.py`` checks that the committed Markdown
equals them.

The package's modules: :mod:`.differences` (the situations and the rows of differences),
:mod:`.habits` (the habits and their scripts), :mod:`.tables` (the Markdown tables the docs
show).
"""

from __future__ import annotations

from loaderkit.testing.conformance.differences import (
    DIFFERENCES,
    SITUATIONS,
    Difference,
)
from loaderkit.testing.conformance.differences import (
    Gives as Gives,
)
from loaderkit.testing.conformance.differences import (
    Reference as Reference,
)
from loaderkit.testing.conformance.habits import HABITS, Habit
from loaderkit.testing.conformance.tables import (
    differences_table,
    habits_table,
    with_conformance_tables,
)

__all__ = [
    "DIFFERENCES",
    "HABITS",
    "SITUATIONS",
    "Difference",
    "Habit",
    "differences_table",
    "habits_table",
    "with_conformance_tables",
]
