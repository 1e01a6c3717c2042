"""Shared pydantic configuration: frozen, no unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Base of every domain model: immutable and strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")
