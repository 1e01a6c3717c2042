"""The grid: the base scenario, its points (grid x policies x seeds) and their keys."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models import Scenario
from scenarios.load import read_text, resolve_path, scenario_from_dict, scenario_mapping
from scenarios.sweep.edits import check_key
from scenarios.sweep.errors import OPTION_PREFIX, POLICY_COLUMN, SEED_COLUMN, SEED_KEY, SweepError


@dataclass(frozen=True)
class SweepBase:
    """The raw scenario mapping edits apply to, and the file its relative paths use.

    Edits go to the mapping rather than to a validated :class:`Scenario` because loading
    resolves a generated workload into inline jobs, after which ``workloads.generate``
    and the seed could no longer be changed.

    A base made from a loaded scenario (:meth:`of_scenario`) also keeps that scenario:
    a point with no scenario edit runs it as it is, without dumping and re-validating
    thousands of jobs (the what-if app's replicates only vary simulator options).
    """

    data: dict[str, Any]
    file: str
    fingerprint: str
    scenario: Scenario | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_any(cls, base: Scenario | str | Path) -> SweepBase:
        """A base from a loaded :class:`Scenario`, a scenario file or a bundled name.

        The base is validated once here, so a broken base fails before any point runs.
        """
        if isinstance(base, Scenario):
            return cls.of_scenario(base)
        path = resolve_path(base)
        data = scenario_mapping(read_text(path), path)
        # The loader's own checks and messages (field path) before any point runs.
        scenario_from_dict(data, path)
        return cls(data=data, file=str(path.resolve()), fingerprint=_fingerprint(data))

    @classmethod
    def of_scenario(cls, scenario: Scenario, fingerprint: str | None = None) -> SweepBase:
        """A base from a loaded scenario; ``fingerprint`` (of its source, if the caller
        has one) saves hashing its content."""
        data = scenario.model_dump(mode="json")
        return cls(
            data=data,
            file="<scenario>",
            fingerprint=fingerprint or _fingerprint(data),
            scenario=scenario,
        )

    @property
    def generated(self) -> bool:
        """Whether the workload comes from the generator (so seeds apply)."""
        workloads = self.data.get("workloads")
        return isinstance(workloads, dict) and workloads.get("generate") is not None


def _fingerprint(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class SweepPoint:
    """One scenario variant under one policy: what one result row describes."""

    params: tuple[tuple[str, Any], ...]
    policy: str
    seed: int | None
    key: str
    options: tuple[tuple[str, Any], ...] = ()
    """The simulator options this point runs with (the sweep's and its ``options.*``
    grid values), only those its policy takes."""

    def edits(self) -> Iterator[tuple[str, Any]]:
        """The grid values that edit the scenario (all but ``options.*``)."""
        return ((k, v) for k, v in self.params if not k.startswith(OPTION_PREFIX))

    def label(self) -> str:
        """``policy.lookback=3d, policy=fairshare``: the point in words."""
        parts = [f"{k}={v}" for k, v in self.params]
        parts.append(f"{POLICY_COLUMN}={self.policy}")
        if self.seed is not None:
            parts.append(f"{SEED_COLUMN}={self.seed}")
        return ", ".join(parts)


def point_key(
    base: SweepBase,
    params: Iterable[tuple[str, Any]],
    policy: str,
    seed: int | None,
    days: float | None,
    options: Mapping[str, Any],
) -> str:
    """A stable 16-hex-digit key of everything that decides a point's result.

    It covers the base scenario's content, the edits (in any order), the policy, the
    seed, the simulated days and the simulator options, so a rerun recognises its
    finished points and a changed base or setting is not mistaken for one.
    """
    text = json.dumps(
        {
            "base": base.fingerprint,
            "params": sorted([k, v] for k, v in params),
            "policy": policy,
            "seed": seed,
            "days": days,
            "options": dict(options),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def expand(
    base: SweepBase,
    grid: Mapping[str, Sequence[Any]],
    policies: Sequence[str],
    seeds: Sequence[int] | None = None,
    *,
    days: float | None = None,
    options: Mapping[str, Any] | None = None,
    policy_takes: Mapping[str, Sequence[str]] | None = None,
) -> list[SweepPoint]:
    """Every point of the sweep, in grid order (last key fastest), then policy and seed.

    ``options`` (and ``options.<name>`` grid keys) are simulator options; with
    ``policy_takes`` (policy -> the option names it takes) each point keeps only its
    policy's, and an option no policy of the sweep takes is an error.

    Raises :class:`SweepError` for input that no point could run with: an empty value
    list, a grid key that names nothing in the base, seeds for a workload that is not
    generated, no policies, an option no policy takes.
    """
    options = dict(options or {})
    if not policies:
        raise SweepError(None, "policies: give at least one policy")
    for key, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise SweepError(None, f"grid.{key}: expected a list of values, got {values!r}")
        if not values:
            raise SweepError(None, f"grid.{key}: give at least one value")
        if not key.startswith(OPTION_PREFIX):
            check_key(base, key, values[0])
    if policy_takes is not None:
        taken = {name for p in policies for name in policy_takes.get(p, ())}
        given = [("options." + k, k) for k in options]
        given += [(k, k[len(OPTION_PREFIX) :]) for k in grid if k.startswith(OPTION_PREFIX)]
        for where, name in given:
            if name not in taken:
                raise SweepError(
                    None,
                    f"{where}: no policy of this sweep takes option {name!r} "
                    f"(they take: {', '.join(sorted(taken)) or 'none'})",
                )
    if seeds is not None:
        if not seeds:
            raise SweepError(None, "seeds: give at least one seed (or leave seeds out)")
        if not base.generated:
            raise SweepError(
                None,
                "seeds: the base scenario's workload is not generated (workloads.generate), "
                "so a seed would change nothing",
            )
        if SEED_KEY in grid:
            raise SweepError(None, f"seeds: give seeds or a grid key {SEED_KEY!r}, not both")
    points = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        params = tuple(zip(keys, values, strict=True))
        grid_options = {k[len(OPTION_PREFIX) :]: v for k, v in params if k.startswith(OPTION_PREFIX)}
        for policy in policies:
            point_options = {**options, **grid_options}
            if policy_takes is not None:
                takes = policy_takes.get(policy, ())
                point_options = {k: v for k, v in point_options.items() if k in takes}
            for seed in seeds if seeds is not None else [None]:
                key = point_key(base, params, policy, seed, days, point_options)
                points.append(
                    SweepPoint(params, policy, seed, key, tuple(sorted(point_options.items())))
                )
    return points


