"""Glob patterns over object keys, with the local store's meaning of each wildcard.

An object store has no folders, only keys; a pattern is matched against the whole key with the
rules :func:`glob.glob` (``recursive=True``) applies to paths, so one pattern names the same
files on a disk and in a bucket: ``*`` and ``?`` never cross a ``/``, ``[abc]`` / ``[!abc]``
match one character of a set, and ``**`` matches any number of folders (``a/**/x`` matches
``a/x`` and ``a/b/c/x``). :func:`literal_prefix` is the part before the first wildcard: the
prefix a listing is asked for.
"""

from __future__ import annotations

import re

__all__ = ["has_wildcards", "key_matcher", "literal_prefix"]

_WILDCARDS = re.compile(r"[*?\[]")


def has_wildcards(pattern: str) -> bool:
    """Whether ``pattern`` holds ``*``, ``?`` or ``[``."""
    return _WILDCARDS.search(pattern) is not None


def literal_prefix(pattern: str) -> str:
    """The characters of ``pattern`` before its first wildcard (all of it if it has none)."""
    found = _WILDCARDS.search(pattern)
    return pattern if found is None else pattern[: found.start()]


def _bracket(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the ``[...]`` set that starts at ``pattern[i]``, and the index after it."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):  # no closing bracket: a literal "["
        return re.escape("["), i + 1
    body = pattern[i + 1 : j]
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    body = re.sub(r"([\\\[\]^&~|])", r"\\\1", body)  # literal inside the set
    return (f"[^/{body}]" if negate else f"[{body}]"), j + 1


def key_matcher(pattern: str) -> re.Pattern[str]:
    """A compiled regex that matches exactly the keys ``pattern`` names."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:[^/]*/)*")  # zero or more folders
            i += 3
        elif pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")  # at the end: anything below
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            regex, i = _bracket(pattern, i)
            out.append(regex)
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)
