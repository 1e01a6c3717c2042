"""Checks of command-line values shared by the sub-commands."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence

from planner.cli.errors import UsageError

_NEGATIVE = re.compile(r"^-(\d|\.\d)")


def require_positive(option: str, value: float, maximum: float | None = None) -> float:
    """``value`` when finite and above 0 (and at most ``maximum``); else a UsageError.

    ``float()`` reads ``nan``, ``inf`` and ``1e999``; a bare ``<= 0`` test lets them
    through, to end in a hang or a traceback later.
    """
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{option}: must be a positive number, got {value:g}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{option}: must be at most {maximum:g}, got {value:g}")
    return value


def join_negative_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``["--at", "-1h"]`` as ``["--at=-1h"]`` for every option that takes a value.

    argparse reads ``-1h`` as an unknown option and says "expected one argument";
    joined, the value reaches the option's own check, whose message says what is wrong.
    """
    takes_value = _value_options(parser)
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in takes_value and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _value_options(sub)
        elif action.option_strings and action.nargs != 0:
            found.update(s for s in action.option_strings if s.startswith("--"))
    return found
