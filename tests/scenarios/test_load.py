from __future__ import annotations

from pathlib import Path

import yaml

from models import Job
from scenarios import dump_scenario, load_scenario, parse_scenario
from scenarios.csv_jobs import read_jobs_csv, write_jobs_csv


def test_tiny_loads_with_defaults() -> None:
    """The tiny scenario loads; the policy keeps defaults for keys it leaves out."""
    s = load_scenario("tiny")
    assert len(s.jobs) == 12
    assert s.policy.urgent_charge == 2.0
    assert s.policy.restart_overhead == 120
    assert s.gpu_types["B300"].rate == 2.6  # default types stay when a file lists others


def test_dump_then_load_round_trip() -> None:
    """Dumping a scenario and loading the text gives an equal scenario."""
    s = load_scenario("tiny")
    assert parse_scenario(dump_scenario(s)) == s


def test_gpu_type_rate_override() -> None:
    """A scenario can re-rate a default GPU type."""
    data = yaml.safe_load(Path(load_scenario.__globals__["BUNDLED_DIR"] / "tiny.yaml").read_text())
    data["gpu_types"] = {"B200": {"rate": 1.5}}
    s = parse_scenario(yaml.safe_dump(data))
    assert s.rate("B200") == 1.5
    assert s.rate("H100") == 1.0


def test_csv_source_resolves_relative_to_file(tmp_path: Path) -> None:
    """A csv workload source is read relative to the scenario file, empty cells default."""
    (tmp_path / "jobs.csv").write_text(
        "id,project,user,submit,duration,gpus,gpu_types,clusters,min_runtime,resumable,priority,urgent,kind\n"
        "a,infra,u,0,1h,8,H100|B200,,30m,true,,,\n"
        "b,research/nlp,,5m,2h,16,,alpha,,,,yes,\n"
    )
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
    data["workloads"] = {"csv": "jobs.csv"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    s = load_scenario(tmp_path / "s.yaml")
    a, b = s.jobs
    assert a.gpu_types == ("H100", "B200") and a.resumable and a.min_runtime == 1800
    assert b.clusters == ("alpha",) and b.urgent and b.min_runtime == Job.model_fields["min_runtime"].default


def test_csv_write_read_round_trip(tmp_path: Path) -> None:
    """Jobs written as CSV read back equal."""
    jobs = list(load_scenario("tiny").jobs)
    write_jobs_csv(jobs, tmp_path / "j.csv")
    assert read_jobs_csv(tmp_path / "j.csv") == jobs


def test_an_empty_workload_path_names_the_field(tmp_path: Path) -> None:
    """`csv: ""` or a Philly `path: ""` is refused as the scenario's field, not read as
    the scenario's own folder."""
    import pytest

    from scenarios.errors import ScenarioError

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
    for source, field in (({"csv": ""}, "workloads.csv"), ({"philly": {"path": ""}}, "workloads.philly.path")):
        data["workloads"] = source
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
        with pytest.raises(ScenarioError) as info:
            load_scenario(tmp_path / "s.yaml")
        assert str(info.value).startswith(f"{tmp_path / 's.yaml'}: {field}: "), str(info.value)
