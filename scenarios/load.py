"""Read and write scenario files (YAML), resolving the workload source into jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from models import Job, Scenario
from scenarios.errors import ScenarioError, from_validation_error

BUNDLED_DIR = Path(__file__).resolve().parent


def bundled_scenarios() -> dict[str, Path]:
    """Name -> path of the scenario files shipped with gpuplan."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.yaml"))}


def resolve_path(name: str | Path) -> Path:
    """A path as given, or the bundled scenario of that name (``tiny``, ``ai2-like``)."""
    path = Path(name)
    if path.exists():
        return path
    bundled = bundled_scenarios()
    if str(name) in bundled:
        return bundled[str(name)]
    raise ScenarioError(path, "no such file (and no bundled scenario of that name)")


def load_scenario(path: str | Path) -> Scenario:
    """Load, resolve and validate a scenario file. Raises :class:`ScenarioError`."""
    file = resolve_path(path)
    return parse_scenario(read_text(file), file)


def parse_scenario(text: str, file: str | Path = "<scenario>") -> Scenario:
    """Parse scenario YAML text; relative paths resolve against ``file``'s folder."""
    return scenario_from_dict(scenario_mapping(text, file), file)


def scenario_mapping(text: str, file: str | Path = "<scenario>") -> dict[str, Any]:
    """Scenario YAML text as its raw mapping (YAML errors checked, fields not yet)."""
    return parse_yaml_mapping(text, file, "a mapping of scenario keys")


def read_text(file: Path) -> str:
    """The file's text; :class:`ScenarioError` naming it when it cannot be read."""
    try:
        return file.read_text()
    except OSError as exc:
        raise ScenarioError(file, f"cannot read: {exc.strerror}") from None


def parse_yaml_mapping(text: str, file: str | Path, expected: str) -> dict[str, Any]:
    """YAML text whose top level is a mapping; :class:`ScenarioError` naming ``file``
    (with the line and column of a syntax error) otherwise. ``expected`` says what the
    top level should be, for the error."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(file, f"not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(file, f"expected {expected} at the top level")
    return data


def scenario_from_dict(data: dict[str, Any], file: str | Path = "<scenario>") -> Scenario:
    """Validate a scenario mapping, resolving a generated/CSV/Philly source into jobs."""
    base_dir = Path(file).resolve().parent
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err, file) from None
    w = scenario.workloads
    if w.jobs is not None:
        return scenario
    jobs = _resolve_jobs(scenario, base_dir, file)
    resolved = scenario.model_dump(mode="python", exclude={"workloads"})
    resolved["workloads"] = {"jobs": jobs}
    try:
        return Scenario.model_validate(resolved)
    except ValidationError as err:
        raise from_validation_error(err, file) from None


def _resolve_jobs(scenario: Scenario, base_dir: Path, file: str | Path) -> list[Job]:
    w = scenario.workloads
    if w.generate is not None:
        from scenarios.generate import generate_jobs

        return generate_jobs(scenario, w.generate)
    if w.csv is not None:
        from scenarios.csv_jobs import read_jobs_csv

        return read_jobs_csv(base_dir / w.csv)
    assert w.philly is not None
    from scenarios.philly import import_philly

    return import_philly(scenario, w.philly, base_dir)


def dump_scenario(scenario: Scenario) -> str:
    """YAML text of ``scenario`` with its jobs inline; loading it gives an equal scenario."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["name"] = scenario.name
    data["clusters"] = [c.model_dump(mode="json") for c in scenario.clusters]
    data["org"] = [u.model_dump(mode="json") for u in scenario.org]
    data["workloads"] = {
        "jobs": [j.model_dump(mode="json", exclude_defaults=True) for j in scenario.jobs]
    }
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
    return text


def write_scenario(scenario: Scenario, path: str | Path) -> None:
    Path(path).write_text(dump_scenario(scenario))
