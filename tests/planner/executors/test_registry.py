"""The executor registry: built-ins, entry-point plugins, errors."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from collections.abc import Iterator, Mapping

import pytest

from models import Plan, Scenario
from planner.executors import (
    ENTRY_POINT_GROUP,
    ApplyReport,
    ClusterState,
    Executor,
    ExecutorError,
    ExecutorOptionError,
    ExecutorRegistry,
    default_registry,
)
from planner.executors.dryrun import DryRunExecutor


class _Plugin:
    """A minimal third-party executor."""

    name = "fake"

    def __init__(self, scenario: Scenario, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    def observe(self) -> ClusterState:
        return ClusterState(at=0.0)

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        return ApplyReport(slice_index=slice_index, at=0.0)


@pytest.fixture()
def plugin_module() -> Iterator[str]:
    """A module ``fake_gpuplan_plugin`` importable by entry points, removed afterwards."""
    module = types.ModuleType("fake_gpuplan_plugin")
    module.Plugin = _Plugin
    module.not_an_executor = lambda scenario, options: object()
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def _entry_points(*pairs: tuple[str, str]) -> object:
    eps = [importlib.metadata.EntryPoint(name=n, value=v, group=ENTRY_POINT_GROUP) for n, v in pairs]

    def find(group: str) -> list[importlib.metadata.EntryPoint]:
        return eps if group == ENTRY_POINT_GROUP else []

    return find


def test_builtins_are_registered(scenario: Scenario) -> None:
    """The default registry offers dryrun and slurm, and dryrun builds a DryRunExecutor."""
    registry = default_registry(entry_points=_entry_points())
    assert registry.names() == ("dryrun", "slurm")
    assert registry.origin("slurm") == "built-in"
    assert isinstance(registry.create("dryrun", scenario, {"log": "/dev/null"}), DryRunExecutor)


def test_entry_point_plugin_is_loaded_and_built(plugin_module: str, scenario: Scenario) -> None:
    """An executor declared in the gpuplan.executors group is registered and built with options."""
    registry = default_registry(
        entry_points=_entry_points(("fake", f"{plugin_module}:Plugin"))
    )
    assert "fake" in registry.names()
    executor = registry.create("fake", scenario, {"zone": "a"})
    assert isinstance(executor, Executor) and isinstance(executor, _Plugin)
    assert executor.options == {"zone": "a"}
    assert "entry point fake" in registry.origin("fake")


def test_plugin_from_an_installed_distribution(plugin_module: str, scenario: Scenario,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugins are found through importlib.metadata.entry_points (monkeypatched here)."""
    find = _entry_points(("fake", f"{plugin_module}:Plugin"))
    monkeypatch.setattr(importlib.metadata, "entry_points", find)
    registry = default_registry()
    assert registry.names() == ("dryrun", "fake", "slurm")


def test_plugin_cannot_shadow_a_builtin(plugin_module: str) -> None:
    """An entry point named like a built-in is skipped and reported, the built-in stays."""
    registry = default_registry(
        entry_points=_entry_points(("slurm", f"{plugin_module}:Plugin"))
    )
    assert registry.origin("slurm") == "built-in"
    assert len(registry.problems) == 1 and "skipped" in registry.problems[0]


def test_unknown_executor_names_the_known_ones() -> None:
    """Asking for an unregistered name raises ExecutorError listing the registered names."""
    registry = default_registry(entry_points=_entry_points())
    with pytest.raises(ExecutorError, match=r"unknown executor 'k8s' \(known: dryrun, slurm\)"):
        registry.factory("k8s")


def test_broken_plugin_fails_only_when_used(scenario: Scenario) -> None:
    """A plugin whose module cannot be imported fails with a message naming it, on use."""
    registry = default_registry(
        entry_points=_entry_points(("broken", "no_such_module_xyz:create"))
    )
    assert "broken" in registry.names()
    registry.create("dryrun", scenario, {"log": "/dev/null"})
    with pytest.raises(ExecutorError, match="'broken'.*failed to load: ModuleNotFoundError"):
        registry.create("broken", scenario)


def test_factory_must_build_an_executor(plugin_module: str, scenario: Scenario) -> None:
    """A factory that returns something without observe/apply is rejected."""
    registry = ExecutorRegistry()
    registry.register_lazy("odd", f"{plugin_module}:not_an_executor")
    with pytest.raises(ExecutorError, match="lacks name/observe"):
        registry.create("odd", scenario)


def test_duplicate_registration_is_an_error() -> None:
    """Registering a taken name in code raises ValueError."""
    registry = ExecutorRegistry()
    registry.register("x", _Plugin)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("x", _Plugin)


def test_options_a_factory_refuses_are_an_option_error_naming_it(scenario: Scenario) -> None:
    """A factory's ValueError is bad input (an ExecutorOptionError), named by executor."""
    registry = ExecutorRegistry()

    def picky(scenario: Scenario, options: Mapping[str, str]) -> _Plugin:
        raise ValueError("bad option zone=mars")

    registry.register("picky", picky)
    with pytest.raises(ExecutorOptionError, match=r"^executor 'picky': bad option zone=mars$"):
        registry.create("picky", scenario, {"zone": "mars"})


def test_a_factory_failing_otherwise_is_named(scenario: Scenario) -> None:
    """Any other exception from a factory is an ExecutorError naming the executor."""
    registry = ExecutorRegistry()

    def offline(scenario: Scenario, options: Mapping[str, str]) -> _Plugin:
        raise ConnectionError("platform offline")

    registry.register("offline", offline)
    with pytest.raises(ExecutorError, match="'offline'.*failed to start: ConnectionError: platform offline"):
        registry.create("offline", scenario)
