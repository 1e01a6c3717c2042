"""The org tree: programs, teams and projects, each with a budget share."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field, field_validator

from models.base import Input, Number
from models.limits import MAX_SHARE, MIN_SHARE


class OrgUnit(Input):
    """A unit of the org tree. Leaves are projects, named by their path (``research/nlp``).

    ``share`` is the weight the unit's manager gives it among its siblings.
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    share: Number = Field(gt=0, le=MAX_SHARE)
    children: tuple[OrgUnit, ...] = ()

    @field_validator("share")
    @classmethod
    def _not_tiny(cls, share: float) -> float:
        if share < MIN_SHARE:
            raise ValueError(f"must be at least {MIN_SHARE:g} (shares are relative weights)")
        return share

    @property
    def is_project(self) -> bool:
        return not self.children


def walk(units: tuple[OrgUnit, ...], prefix: str = "") -> Iterator[tuple[str, OrgUnit]]:
    """Yield ``(path, unit)`` for every unit, parents before children."""
    for unit in units:
        path = f"{prefix}{unit.name}"
        yield path, unit
        yield from walk(unit.children, path + "/")


def project_paths(units: tuple[OrgUnit, ...]) -> tuple[str, ...]:
    """Paths of the leaves, in tree order."""
    return tuple(path for path, unit in walk(units) if unit.is_project)


def with_shares(units: tuple[OrgUnit, ...], shares: dict[str, float], prefix: str = "") -> tuple[OrgUnit, ...]:
    """A copy of the tree with the shares of the units named by path replaced."""
    out = []
    for unit in units:
        path = f"{prefix}{unit.name}"
        children = with_shares(unit.children, shares, path + "/")
        share = shares.get(path, unit.share)
        out.append(OrgUnit(name=unit.name, share=share, children=children))
    return tuple(out)


def effective_shares(units: tuple[OrgUnit, ...], prefix: str = "", scale: float = 1.0) -> dict[str, float]:
    """Each unit's static fraction of the whole: its share among siblings times its parent's."""
    total = sum(u.share for u in units)
    out: dict[str, float] = {}
    for unit in units:
        path = f"{prefix}{unit.name}"
        frac = scale * unit.share / total
        out[path] = frac
        out.update(effective_shares(unit.children, path + "/", frac))
    return out
