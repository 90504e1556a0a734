r"""Untrusted text made inert: the one place a value from a plan, a state or a dataset is shown.

A plan file, a saved loader state and a dataset's samples are untrusted: any string they hold
can reach a terminal through an error message or the command line's output. Every such text
goes through :func:`inert` (one line) or :func:`inert_lines` (a message of several lines),
which escape each character ``str.isprintable()`` refuses (C0 and C1 controls such as ESC,
CSI and BEL, DEL, bidi overrides and other format characters, line and paragraph separators,
unassigned and surrogate code points) the way ``repr`` does (``\x1b``, ``\u202e``) and cut
the text at a bound, with a marker saying how much was cut (``... [+49,999,800 characters]``).
:func:`shown` is the ``repr`` of any value through the same bound (a huge integer by its
size: ``str()`` of 5,000 digits raises), and :func:`listed` the first :data:`LISTED` items
of a long list with a count of the rest. ``docs/security.md`` ("Text and input bounds")
documents the bounds.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol

__all__ = [
    "LINE_CHARS",
    "LISTED",
    "MESSAGE_CHARS",
    "SHOWN_CHARS",
    "inert",
    "inert_lines",
    "listed",
    "sample_list",
    "shown",
]

SHOWN_CHARS: Final = 200
"""Characters of one value shown in a message or a report (its ``repr``, escaped)."""

LINE_CHARS: Final = 2000
"""Characters of one line of a message or of a report (a backstop behind :data:`SHOWN_CHARS`)."""

LISTED: Final = 50
"""Items of a list shown in a message (problems of a plan, differences of a state)."""

MESSAGE_CHARS: Final = 200_000
"""Characters of a whole message (its lines each bounded by :data:`LINE_CHARS`)."""


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _cut(count: int) -> str:
    return f"... [+{count:,} character{'s' if count != 1 else ''}]" if count else ""


def _escape(text: str, limit: int) -> tuple[str, int]:
    """``text`` escaped and cut, and how many of its characters were cut.

    Cut so that the text and its marker (:func:`_cut`) together hold at most ``limit``
    characters (when ``limit`` leaves room for the marker): an inert text of at most
    ``limit`` characters is its own :func:`inert`.
    """
    if len(text) <= limit and text.isprintable():
        return text, 0
    out: list[str] = []
    size = 0
    room = max(limit - len(_cut(len(text))), 0)  # the marker is at most this long
    kept = 0  # characters of text that fit in ``room``
    for index, char in enumerate(text):
        piece = char if char.isprintable() else _escaped(char)
        size += len(piece)
        if size > limit:
            return "".join(out[:kept]), len(text) - kept
        out.append(piece)
        if size <= room:
            kept = index + 1
    return "".join(out), 0


def inert(text: str, limit: int = SHOWN_CHARS) -> str:
    r"""``text`` safe to print on one line: non-printable characters escaped, at most ``limit``.

    Every character ``str.isprintable()`` refuses (newline and tab included) is written as
    ``repr`` writes it (``\n``, ``\x1b``, ``\u202e``, ``\U000e0001``); a text longer
    than ``limit`` characters once escaped is cut and ends with a marker saying how many
    characters of ``text`` were left out, the two together at most ``limit`` characters
    (for a ``limit`` longer than the marker). Backslashes are kept as they are (a Windows
    path stays readable). Costs O(``limit``), whatever the length of ``text``.
    """
    escaped, cut = _escape(text, limit)
    return escaped + _cut(cut)


def inert_lines(text: str, limit: int = LINE_CHARS) -> str:
    r"""``text`` with each line through :func:`inert` (at most ``limit`` characters a line).

    The newlines a message is made of are kept; every other control character is escaped.
    ``\r\n`` and a lone ``\r`` are not line breaks here: ``\r`` is escaped (it would
    overwrite the start of the line on a terminal). The whole is cut at
    :data:`MESSAGE_CHARS` characters of ``text``, with the marker.
    """
    if len(text) <= limit and text.isprintable():
        return text
    head = text[:MESSAGE_CHARS]
    lines = "\n".join(inert(line, limit) for line in head.split("\n"))
    return lines + _cut(len(text) - len(head))


def _int_text(value: int) -> str | None:
    """A huge integer by its size (``None`` for one that prints as itself)."""
    if abs(value) < 10**30:
        return None
    return f"an integer of {value.bit_length():,} bits"


class _Repr(reprlib.Repr):
    """``reprlib``'s bounded repr (few items, few levels), with huge integers by their size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = 12
        self.maxset = self.maxfrozenset = self.maxdeque = 12
        self.maxstring = self.maxother = SHOWN_CHARS
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        return _int_text(x) or repr(x)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            return super().repr_instance(x, level)
        except Exception:  # noqa: BLE001 - a repr that raises oddly: the type
            return f"<{type(x).__name__}>"


_REPR = _Repr()


def _small(value: object, limit: int) -> bool:
    """Whether ``repr(value)`` is cheap and exact: few items, no long string, no huge integer.

    Walks without recursion and stops after ``limit`` items (a self-nested or deep container
    is not small).
    """
    stack: list[object] = [value]
    seen = 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return False
        if isinstance(item, str):
            if len(item) > limit:
                return False
        elif isinstance(item, int) and not isinstance(item, bool):
            if _int_text(item) is not None:
                return False
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif not isinstance(item, float | bool | type(None)):
            return False  # another type: its repr may cost anything
    return True


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """The ``repr`` of ``value`` for a message: escaped and bounded like :func:`inert`.

    Bounded in its making too: a string is cut *before* its ``repr`` is made (a 50 MB
    string costs nothing); plain data of at most ``limit`` items is shown by its exact
    ``repr``, anything larger or of another type by ``reprlib``'s (first items, first
    levels); an integer past 30 digits is shown by its size (``an integer of 16,610 bits``:
    ``repr`` of one of thousands of digits raises ``ValueError``). A value whose ``repr``
    raises is shown by its type.
    """
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable():
            return repr(value)
        escaped, cut = _escape(value, limit)
        return f"'{escaped}'{_cut(cut)}"
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value) or repr(value)
    try:
        text = repr(value) if _small(value, limit) else _REPR.repr(value)
    except Exception:  # noqa: BLE001 - any failure (RecursionError, a raising repr): the type
        text = f"<{type(value).__name__}>"
    return inert(text, limit)


def listed(
    items: Sequence[str], noun: str, limit: int = LISTED, total: int | None = None
) -> list[str]:
    """The first ``limit`` of ``items``, then ``"... and 98,950 more <noun>"`` when cut.

    ``total`` is the length of the whole list when ``items`` is only its start (so that a
    caller formats no more than ``limit + 1`` items of a long list).
    """
    count = len(items) if total is None else total
    if count <= limit:
        return list(items)
    return [*items[:limit], f"... and {count - limit:,} more {noun}"]


SAMPLES_SHOWN: Final = 8
"""Sample indices (or stream positions) a message names for a batch."""


class _Indices(Protocol):
    """A list, tuple or numpy array of integers (what a batch's indices are held in)."""

    def __len__(self) -> int: ...

    def __getitem__(self, cut: slice, /) -> Iterable[Any]: ...


def sample_list(indices: _Indices, limit: int = SAMPLES_SHOWN) -> str:
    """``"3, 17, 4, ..."``: the first ``limit`` sample indices of a batch, for a message."""
    head = ", ".join(str(int(i)) for i in indices[:limit])
    return head + (", ..." if len(indices) > limit else "")
