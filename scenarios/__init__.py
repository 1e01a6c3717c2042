"""Scenario files, workload generators, trace importers and sweeps."""

from scenarios.errors import ScenarioError
from scenarios.load import (
    bundled_scenarios,
    dump_scenario,
    load_scenario,
    parse_scenario,
    scenario_from_dict,
    write_scenario,
)

from typing import Any


def __getattr__(name: str) -> Any:
    # Sweeps pull in pandas and Dask; load them only when asked, so every gpuplan
    # command does not pay their import time.
    if name == "sweep":
        from scenarios.sweep import sweep

        return sweep
    raise AttributeError(f"module 'scenarios' has no attribute {name!r}")

__all__ = [
    "ScenarioError",
    "bundled_scenarios",
    "dump_scenario",
    "load_scenario",
    "parse_scenario",
    "scenario_from_dict",
    "sweep",
    "write_scenario",
]
