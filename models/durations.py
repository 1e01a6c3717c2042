"""Durations written as ``90s``, ``15m``, ``2h``, ``7d`` or plain seconds."""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from models.limits import MAX_DAYS, MAX_SECONDS

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
# ASCII digits only: \d also matches other scripts' digits, which float() reads too.
_PATTERN = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)\s*$")


def parse_duration(value: object) -> float:
    """Return the number of seconds that ``value`` stands for.

    Accepts numbers (seconds) and strings such as ``"90s"``, ``"15m"``, ``"2h"``,
    ``"7d"``, ``"1h30m"`` or ``"3600"``.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 90s, 15m, 2h or 7d, got {value!r}")
    if isinstance(value, int | float):
        return _finite(value, value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration such as 90s, 15m, 2h or 7d, got {value!r}")
    text = value.strip()
    match = _PATTERN.match(text)
    if match:
        return _finite(float(match.group(1)) * _UNITS[match.group(2) or "s"], value)
    # Compound forms: 1h30m, 2d12h.
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)([smhdw])", text)
    if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
        return _finite(sum(float(n) * _UNITS[u] for n, u in parts), value)
    raise ValueError(f"expected a duration such as 90s, 15m, 2h or 7d, got {value!r}")


def _finite(seconds: float, given: object) -> float:
    """``seconds`` as a float when finite and within :data:`MAX_SECONDS` either way."""
    try:
        out = float(seconds)
    except OverflowError:  # an int too large for a float
        out = math.inf
    if math.isnan(out) or (math.isinf(out) and isinstance(given, float)):
        raise ValueError(f"expected a finite duration such as 90s, 15m, 2h or 7d, got {given!r}")
    if not abs(out) <= MAX_SECONDS:
        raise ValueError(
            f"{given!r} is longer than the limit of {MAX_DAYS:g} days ({MAX_SECONDS:g}s)"
        )
    return out


def format_duration(seconds: float) -> str:
    """Shortest exact text for ``seconds`` that :func:`parse_duration` reads back."""
    if seconds != int(seconds):
        return f"{seconds}s"
    whole = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _serialize(seconds: float) -> str:
    return format_duration(seconds)


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(_serialize, return_type=str, when_used="json-unless-none"),
]
"""A duration in seconds; YAML/JSON may write it as ``15m``."""
