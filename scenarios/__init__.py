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

# Bound after the submodule of the same name is loaded, so `scenarios.sweep` is always the
# function. Importing it is cheap: pandas and Dask load only when a sweep runs.
from scenarios.sweep import sweep

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
