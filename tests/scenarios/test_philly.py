"""The Philly trace importer (``scenarios.philly``), on small traces the tests write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from models import Job, JobKind
from planner.cli import main as cli_main
from scenarios import ScenarioError, load_scenario
from scenarios.philly import contract

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"

# (timestamp, duration, num_gpus, cluster): one row per contract rule.
ROWS = [
    ("2017-10-02 00:01:55", 300, 1, "aaa111"),  # line 2: debug, <= 10 min -> 5 min
    ("2017-10-02 01:00:00", 1200, 4, "aaa111"),  # line 3: debug, <= 30 min -> 10 min
    ("2017-10-02 02:00:00", 3000, 8, "bbb222"),  # line 4: debug, <= 1 h -> 15 min
    ("2017-10-02 03:00:00", 7200, 1, "bbb222"),  # line 5: long, < 8 GPUs -> 1 h
    ("2017-10-03 04:00:00", 36000, 16, "ccc333"),  # line 6: long, >= 8 GPUs -> 2 h
    ("2017-10-04 05:00:00", 3601, 8, "ccc333"),  # line 7: just over 1 h, 8 GPUs -> 2 h
]


def csv_text(rows: list[tuple[str, float, int, str]], header: str = HEADER) -> str:
    lines = [header] + [f"{t},{d},{g},{d * g},{c}" for t, d, g, c in rows]
    return "\n".join(lines) + "\n"


def write_scenario(
    tmp_path: Path, trace: str, philly: dict[str, Any] | None = None, **top: Any
) -> Path:
    """A scenario with two pools (32 H100, 16 B200) and three projects over ``trace``."""
    (tmp_path / "trace.csv").write_text(trace)
    data: dict[str, Any] = {
        "name": "philly-test",
        "clusters": [
            {"name": "c1", "node_groups": [{"gpu_type": "H100", "nodes": 4}]},
            {"name": "c2", "node_groups": [{"gpu_type": "B200", "nodes": 2}]},
        ],
        "org": [
            {"name": "a", "share": 3, "children": [{"name": "x", "share": 2}, {"name": "y", "share": 1}]},
            {"name": "b", "share": 1},
        ],
        "workloads": {"philly": {"path": "trace.csv", "unallocated_share": 0.0, **(philly or {})}},
        **top,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def load_jobs(tmp_path: Path, trace: str, **philly: Any) -> dict[str, Job]:
    jobs = load_scenario(write_scenario(tmp_path, trace, philly)).jobs
    return {j.id: j for j in jobs}


def load_error(tmp_path: Path, trace: str, **philly: Any) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(tmp_path, trace, philly))
    return str(info.value)


def test_rows_become_jobs_with_line_ids(tmp_path: Path) -> None:
    """Each row is one job, id philly-<line>, gang and duration as in the trace."""
    jobs = load_jobs(tmp_path, csv_text(ROWS))
    assert list(jobs) == [f"philly-{n:05d}" for n in range(2, 8)]
    assert [(j.gpus, j.duration) for j in jobs.values()] == [(g, d) for _, d, g, _ in ROWS]


def test_submit_is_offset_from_first_midnight(tmp_path: Path) -> None:
    """Submit times count from midnight of the earliest row's day."""
    jobs = load_jobs(tmp_path, csv_text(ROWS))
    assert jobs["philly-00002"].submit == 115.0
    assert jobs["philly-00006"].submit == 86400 + 4 * 3600


def test_contract_rules(tmp_path: Path) -> None:
    """Debug rows get 5/10/15 min by duration; long rows 1 h (<8 GPUs) or 2 h, resumable."""
    jobs = load_jobs(tmp_path, csv_text(ROWS))
    got = {i: (j.min_runtime, j.resumable, j.kind) for i, j in jobs.items()}
    assert got == {
        "philly-00002": (300.0, False, JobKind.DEBUG),
        "philly-00003": (600.0, False, JobKind.DEBUG),
        "philly-00004": (900.0, False, JobKind.DEBUG),
        "philly-00005": (3600.0, True, JobKind.BATCH),
        "philly-00006": (7200.0, True, JobKind.BATCH),
        "philly-00007": (7200.0, True, JobKind.BATCH),
    }


def test_unallocated_share_one_frees_all_non_debug(tmp_path: Path) -> None:
    """With unallocated_share 1 every non-debug row is free work; debug rows keep their contract."""
    jobs = load_jobs(tmp_path, csv_text(ROWS), unallocated_share=1.0)
    assert [j.min_runtime for j in jobs.values()] == [300.0, 600.0, 900.0, 0.0, 0.0, 0.0]
    free = [j for j in jobs.values() if j.min_runtime == 0]
    assert all(j.resumable and j.kind == JobKind.BATCH for j in free)


def test_unallocated_choice_follows_row_content(tmp_path: Path) -> None:
    """The unallocated choice hashes the row's fields, so reordering rows keeps it."""
    rows = [(f"2017-10-02 {h:02d}:{m:02d}:00", 7200 + m, 1, "aaa111") for h in range(20) for m in (0, 30)]
    forward = load_jobs(tmp_path, csv_text(rows), unallocated_share=0.5)
    backward = load_jobs(tmp_path, csv_text(rows[::-1]), unallocated_share=0.5)
    key = {j.submit: j.min_runtime for j in forward.values()}
    assert key == {j.submit: j.min_runtime for j in backward.values()}
    assert 0 < sum(v == 0 for v in key.values()) < len(key)


def test_unallocated_fraction_on_bundled_trace() -> None:
    """On the bundled week, about 18% of the non-debug jobs are imported as unallocated."""
    jobs = load_scenario("philly-week").jobs
    non_debug = [j for j in jobs if j.kind != JobKind.DEBUG]
    free = [j for j in non_debug if j.min_runtime == 0]
    assert 0.14 < len(free) / len(non_debug) < 0.22


def test_contract_function_debug_boundaries() -> None:
    """An 8-GPU hour is debug; 9 GPUs or a second more is not."""
    assert contract(8, 3600, "k", 0.0) == (900.0, False)
    assert contract(9, 3600, "k", 0.0) == (7200.0, True)
    assert contract(8, 3601, "k", 0.0) == (7200.0, True)
    assert contract(7, 3601, "k", 0.0) == (3600.0, True)


def test_default_project_rule(tmp_path: Path) -> None:
    """Unmapped virtual clusters, heaviest first, go round-robin to projects by effective share."""
    jobs = load_jobs(tmp_path, csv_text(ROWS))
    # GPU-time: ccc333 > bbb222 > aaa111; effective shares: a/x 50%, a/y 25%, b 25%.
    assert jobs["philly-00006"].project == "a/x"
    assert jobs["philly-00004"].project == "a/y"
    assert jobs["philly-00002"].project == "b"


def test_project_map_wins(tmp_path: Path) -> None:
    """A mapped virtual cluster goes to its project; the others follow the default rule."""
    jobs = load_jobs(tmp_path, csv_text(ROWS), project_map={"aaa111": "a/x"})
    assert jobs["philly-00002"].project == "a/x"
    assert jobs["philly-00006"].project == "a/x"  # heaviest unmapped -> best-funded
    assert jobs["philly-00004"].project == "a/y"


def test_numeric_cluster_id_in_project_map(tmp_path: Path) -> None:
    """An all-digit virtual cluster id written unquoted in YAML still maps."""
    rows = [("2017-10-02 00:00:00", 60, 1, "103959")]
    jobs = load_jobs(tmp_path, csv_text(rows), project_map={103959: "a/y"})
    assert jobs["philly-00002"].project == "a/y"


def test_users_round_robin_per_cluster(tmp_path: Path) -> None:
    """A virtual cluster with 100 jobs has 3 users (round(sqrt(100)/3)), dealt round-robin."""
    rows = [(f"2017-10-02 {i // 60:02d}:{i % 60:02d}:00", 60, 1, "ddd444") for i in range(100)]
    jobs = list(load_jobs(tmp_path, csv_text(rows)).values())
    assert [j.user for j in jobs[:4]] == ["ddd444-u0", "ddd444-u1", "ddd444-u2", "ddd444-u0"]
    assert len({j.user for j in jobs}) == 3


def test_gpu_type_and_cluster_restriction(tmp_path: Path) -> None:
    """Every job is restricted to gpu_type, and to cluster when given."""
    jobs = load_jobs(tmp_path, csv_text(ROWS[:3]), gpu_type="B200", cluster="c2")
    assert {(j.gpu_types, j.clusters) for j in jobs.values()} == {(("B200",), ("c2",))}


def test_days_trims(tmp_path: Path) -> None:
    """``days: 1`` keeps only the rows of the first day."""
    jobs = load_jobs(tmp_path, csv_text(ROWS), days=1)
    assert list(jobs) == ["philly-00002", "philly-00003", "philly-00004", "philly-00005"]


def test_days_that_keep_no_row_are_an_error(tmp_path: Path) -> None:
    """``days`` so short that no row is left is refused, as a trace of no rows is."""
    msg = load_error(tmp_path, csv_text(ROWS), days=0.00001)
    assert "trace.csv: no jobs: days 1e-05 keeps no row of the trace" in msg


def test_min_runtime_capped_by_policy(tmp_path: Path) -> None:
    """Contracts above the policy's max_min_runtime are capped to it."""
    path = write_scenario(tmp_path, csv_text(ROWS), policy={"max_min_runtime": "30m"})
    assert max(j.min_runtime for j in load_scenario(path).jobs) == 1800.0


def test_bundled_week_counts() -> None:
    """The bundled week imports all 11,386 rows, H100 only, each cluster to its vc- project."""
    jobs = load_scenario("philly-week").jobs
    assert len(jobs) == 11_386
    assert {j.gpu_types for j in jobs} == {("H100",)}
    assert all(j.project.endswith("/vc-" + j.user.split("-")[0]) for j in jobs)
    assert sum(j.gpus * (j.duration or 0.0) for j in jobs) / 3600 == pytest.approx(96_159, rel=1e-3)


# -- errors name the file and the row -------------------------------------------------


def test_missing_column(tmp_path: Path) -> None:
    """A trace without a required column names the file and the column."""
    text = "timestamp,duration,num_gpus,cluster\n2017-10-02 00:00:00,60,1,aaa111\n"
    msg = load_error(tmp_path, text)
    assert "trace.csv" in msg and "missing column(s) gpu_time" in msg


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("2017-13-02 00:00:00,60,1,60,aaa111", "row 3, column timestamp: expected a time"),
        ("2017-10-02 00:00:00+02:00,60,1,60,aaa111", "row 3, column timestamp: expected a time"),
        ("2017-10-02 00:00:00,-5,1,-5,aaa111", "row 3, column duration: expected a positive"),
        ("2017-10-02 00:00:00,60,two,60,aaa111", "row 3, column num_gpus: expected a whole"),
        ("2017-10-02 00:00:00,60,1.5,90,aaa111", "row 3, column num_gpus: expected a whole"),
        ("2017-10-02 00:00:00,60,2,60,aaa111", "row 3, column gpu_time: 60 is not duration x num_gpus"),
        ("2017-10-02 00:00:00,60,1,60,", "row 3, column cluster: expected a virtual cluster id"),
        ("2017-10-02 00:00:00,60,1,60", "row 3: expected 5 fields, got 4"),
        ("2017-10-02 00:00:00,60,1,nan,aaa111", "row 3, column gpu_time: expected a number"),
    ],
)
def test_bad_row_names_file_and_row(tmp_path: Path, row: str, expected: str) -> None:
    """A bad value is one error naming the trace file, the row's line and the column."""
    text = csv_text(ROWS[:1]) + row + "\n"
    msg = load_error(tmp_path, text)
    assert "trace.csv" in msg and expected in msg


def test_gang_that_fits_no_pool(tmp_path: Path) -> None:
    """A gang larger than the gpu_type's pools names its row."""
    rows = [*ROWS[:2], ("2017-10-02 05:00:00", 7200, 64, "ccc333")]
    msg = load_error(tmp_path, csv_text(rows))
    assert "trace.csv: row 4, column num_gpus: a gang of 64 GPUs fits no H100 pool" in msg


def test_empty_and_header_only(tmp_path: Path) -> None:
    """An empty file and a file without rows are clear errors."""
    assert "empty file" in load_error(tmp_path, "")
    assert "no jobs" in load_error(tmp_path, HEADER + "\n")


def test_missing_trace_file(tmp_path: Path) -> None:
    """A trace path that does not exist names the path."""
    path = write_scenario(tmp_path, csv_text(ROWS), {"path": "nowhere.csv"})
    with pytest.raises(ScenarioError, match="nowhere.csv: cannot read Philly trace"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("philly", "expected"),
    [
        ({"project_map": {"aaa111": "a/zz"}}, "workloads.philly.project_map.aaa111: unknown project 'a/zz'"),
        ({"gpu_type": "A100"}, "workloads.philly.gpu_type: unknown GPU type 'A100'"),
        ({"cluster": "c9"}, "workloads.philly.cluster: unknown cluster 'c9'"),
    ],
)
def test_bad_spec_names_scenario_file_and_field(
    tmp_path: Path, philly: dict[str, Any], expected: str
) -> None:
    """A bad philly spec is reported against the scenario file and the field path."""
    msg = load_error(tmp_path, csv_text(ROWS), **philly)
    assert "scenario.yaml" in msg and expected in msg


def test_cli_exit_code_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuplan validate`` on a bad trace exits 2 with one line naming file and row."""
    path = write_scenario(tmp_path, csv_text(ROWS) + "2017-10-02 00:00:00,60,x,60,aaa111\n")
    assert cli_main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "trace.csv: row 8, column num_gpus" in err and "Traceback" not in err


# -- hostile and odd traces (issue 15) --------------------------------------------------


def test_a_trace_spanning_millennia_is_refused(tmp_path: Path) -> None:
    """Rows from year 1 to year 9999 would make `scenario show` loop over 3.6M days."""
    rows = [("0001-01-01 00:00:00", 60, 1, "aaa111"), ("9999-12-31 00:00:00", 60, 1, "aaa111")]
    msg = load_error(tmp_path, csv_text(rows))
    assert "trace.csv: row 3, column timestamp:" in msg and "above the limit of 3650 days" in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ((HEADER + "\n").encode() + "2017-10-02 00:00:00,60,1,60,caf\xe9\n".encode("latin-1"), "not UTF-8 text (line 2"),
        (HEADER + '\n2017-10-02 00:00:00,60,1,60,"aaa111\n', "a quoted field is never closed"),
        ("timestamp,duration,num_gpus,gpu_time,cluster,cluster\n", "line 1: column(s) given twice: cluster"),
        (HEADER + "\n2017-10-02 00:00:00,1e400,1,60,aaa111\n", "row 2, column duration: expected a positive"),
    ],
)
def test_odd_trace_files_fail_cleanly(tmp_path: Path, text: str | bytes, expected: str) -> None:
    """Other encodings, unterminated quotes, repeated columns, infinite numbers: one error."""
    trace = tmp_path / "trace.csv"
    path = write_scenario(tmp_path, csv_text(ROWS))
    trace.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{trace}: ") and expected in str(info.value)


def test_a_trace_path_at_a_device_is_refused(tmp_path: Path) -> None:
    """`philly.path: /dev/zero` is refused on its type."""
    path = write_scenario(tmp_path, csv_text(ROWS), {"path": "/dev/zero"})
    with pytest.raises(ScenarioError, match="/dev/zero: cannot read Philly trace file: not a regular file"):
        load_scenario(path)
