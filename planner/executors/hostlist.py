"""Slurm host lists (``alpha-h100-[000-002,007],beta-b200-000``) to and from names."""

from __future__ import annotations

import itertools
import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> tuple[str, ...]:
    """All host names of a Slurm host list, in order.

    Zero padding is kept (``n[08-10]`` gives ``n08, n09, n10``); several bracket groups
    in one name expand as a product (``r[1-2]n[1-2]``). ``""`` and ``(null)`` give ``()``.

    Raises
    ------
    ValueError
        On unbalanced brackets or a malformed range.
    """
    text = text.strip()
    if not text or text in ("(null)", "None", "N/A"):
        return ()
    out: list[str] = []
    for item in _split_top(text):
        out.extend(_expand_one(item))
    return tuple(out)


def join_hostlist(names: tuple[str, ...] | list[str]) -> str:
    """A host list Slurm accepts for ``names`` (comma-joined, no compression needed)."""
    return ",".join(names)


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append(current)
    return [p for p in parts if p]


def _expand_one(item: str) -> list[str]:
    pieces: list[list[str]] = []
    rest = item
    while rest:
        start = rest.find("[")
        if start < 0:
            pieces.append([rest])
            break
        end = rest.index("]", start)
        if start:
            pieces.append([rest[:start]])
        pieces.append(_expand_ranges(rest[start + 1 : end], item))
        rest = rest[end + 1 :]
    return ["".join(p) for p in itertools.product(*pieces)]


def _expand_ranges(body: str, item: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise ValueError(f"bad range {part!r} in host list item {item!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo)
        if int(hi) < int(lo):
            raise ValueError(f"descending range {part!r} in host list item {item!r}")
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out
