"""Shared pydantic configuration: frozen, no unknown keys; finite numbers for input."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict


class Frozen(BaseModel):
    """Base of every domain model: immutable and strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Input(Frozen):
    """Base of the models read from files: also refuses ``.nan`` and ``.inf``.

    A non-finite number passes ``gt``/``le`` checks one way or the other and then breaks
    a later command (a job of NaN duration is never scheduled, an infinite rate
    overflows), so the scenario's models refuse them at the door.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _not_bool(value: object) -> object:
    # YAML's `true` would otherwise be read as 1 (one node, one GPU, share 1.0).
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


Count = Annotated[int, BeforeValidator(_not_bool)]
"""A whole number that is not a boolean (``nodes: true`` is an error, not one node)."""

Number = Annotated[float, BeforeValidator(_not_bool)]
"""A real number that is not a boolean."""
