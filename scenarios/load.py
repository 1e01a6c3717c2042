"""Read and write scenario files (YAML), resolving the workload source into jobs."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from models import Job, Scenario
from models.scenario import JobProblem
from scenarios.errors import ScenarioError, from_validation_error
from scenarios.files import describe_os_error, parse_yaml_mapping, read_text

__all__ = [
    "BUNDLED_DIR",
    "bundled_scenarios",
    "dump_scenario",
    "load_scenario",
    "parse_scenario",
    "parse_yaml_mapping",
    "read_text",
    "resolve_path",
    "scenario_from_dict",
    "scenario_mapping",
    "write_scenario",
]

BUNDLED_DIR = Path(__file__).resolve().parent


def bundled_scenarios() -> dict[str, Path]:
    """Name -> path of the scenario files shipped with gpuplan."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.yaml"))}


def resolve_path(name: str | Path) -> Path:
    """A path as given, or the bundled scenario of that name (``tiny``, ``ai2-like``)."""
    path = Path(name)
    try:
        os.stat(path)
        return path
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            # A symbolic link loop, a permission problem: say so, not "no such file".
            raise ScenarioError(path, f"cannot read: {describe_os_error(exc)}") from None
    bundled = bundled_scenarios()
    if str(name) in bundled:
        return bundled[str(name)]
    if path.is_symlink():
        raise ScenarioError(path, "a symbolic link to a file that does not exist")
    raise ScenarioError(path, "no such file (and no bundled scenario of that name)")


def load_scenario(path: str | Path) -> Scenario:
    """Load, resolve and validate a scenario file.

    Raises
    ------
    ScenarioError
        For any problem with the file or what it names (CSV, trace), naming the file
        and the field; never another exception type for bad input.
    """
    file = resolve_path(path)
    return parse_scenario(read_text(file), file)


def parse_scenario(text: str, file: str | Path = "<scenario>") -> Scenario:
    """Parse scenario YAML text; relative paths resolve against ``file``'s folder."""
    return scenario_from_dict(scenario_mapping(text, file), file)


def scenario_mapping(text: str, file: str | Path = "<scenario>") -> dict[str, Any]:
    """Scenario YAML text as its raw mapping (YAML errors checked, fields not yet)."""
    return parse_yaml_mapping(text, file, "a mapping of scenario keys")


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
    source = _resolve_jobs(scenario, base_dir, file)
    resolved = scenario.model_dump(mode="python", exclude={"workloads"})
    resolved["workloads"] = {"jobs": source.jobs}
    try:
        return Scenario.model_validate(resolved)
    except ValidationError as err:
        problem = _job_problem(err)
        if problem is not None:
            # Name the row the job came from, not the resolved workloads.jobs[i].
            where, prefix = source.where(problem.index)
            raise ScenarioError(where, f"{prefix}column {problem.field}: {problem.problem}") from None
        raise from_validation_error(err, file) from None


def _job_problem(err: ValidationError) -> JobProblem | None:
    first = err.errors(include_url=False)[0]
    found = (first.get("ctx") or {}).get("error")
    return found if isinstance(found, JobProblem) else None


class _Source:
    """Resolved jobs and, for each, the file and row (``row N, ``) it came from."""

    def __init__(self, jobs: list[Job], file: str | Path, rows: list[int] | None, prefix: str) -> None:
        self.jobs = jobs
        self.file = file
        self.rows = rows
        self.prefix = prefix

    def where(self, index: int) -> tuple[str | Path, str]:
        if self.rows is None:
            return self.file, f"{self.prefix}job {self.jobs[index].id}: "
        return self.file, f"row {self.rows[index]}, "


def _resolve_jobs(scenario: Scenario, base_dir: Path, file: str | Path) -> _Source:
    try:
        return _read_source(scenario, base_dir, file)
    except ScenarioError as exc:
        if exc.file is None:  # about a field of the scenario file itself
            raise ScenarioError(file, exc.message) from None
        raise


def _read_source(scenario: Scenario, base_dir: Path, file: str | Path) -> _Source:
    w = scenario.workloads
    if w.generate is not None:
        from scenarios.generate import generate_jobs

        return _Source(generate_jobs(scenario, w.generate), file, None, "workloads.generate: ")
    if w.csv is not None:
        from scenarios.csv_jobs import read_jobs_csv_rows

        csv_path = base_dir / w.csv
        jobs, rows = read_jobs_csv_rows(csv_path)
        return _Source(jobs, csv_path, rows, "")
    assert w.philly is not None
    from scenarios.philly import import_philly

    jobs = import_philly(scenario, w.philly, base_dir)
    # Philly ids carry their line: philly-00042 is line 42.
    rows = [int(j.id.rsplit("-", 1)[1]) for j in jobs]
    return _Source(jobs, base_dir / w.philly.path, rows, "")


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
