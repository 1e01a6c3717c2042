"""``gpuplan sweep``: results files, resume, failing points, exit codes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from scenarios.sweep_file import SweepFile

SWEEP = """\
base: tiny
days: 0.5
policies: [fairshare]
grid:
  policy.lookback: [3d, 7d]
  policy.slices: [2, 4]
"""


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_sweep_writes_one_file_per_point_and_combined_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clean sweep exits 0, prints a table and the counts, and writes a file per point
    plus results.csv and results.parquet with one row per point."""
    out = tmp_path / "out"
    assert main(["sweep", str(write(tmp_path, SWEEP)), "--workers", "0", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "4 points: 4 ran, 0 already done, 0 failed." in stdout
    assert "delivered_over_owed" in stdout
    assert len(list((out / "points").glob("*.parquet"))) == 4
    frame = pd.read_csv(out / "results.csv")
    assert list(frame["policy.lookback"]) == ["3d", "3d", "7d", "7d"]
    assert frame["error"].isna().all()
    assert (frame["occupancy"] > 0).all()
    assert len(pd.read_parquet(out / "results.parquet")) == 4


def test_default_out_is_named_after_the_file_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out or ``out:``, results go to ``<file stem>-results`` in the current folder."""
    sweep_file = write(tmp_path, SWEEP, "lookback.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(sweep_file), "--workers", "0", "--no-progress"]) == 0
    assert (tmp_path / "lookback-results" / "results.csv").exists()


def test_rerun_skips_finished_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Running the same sweep again recomputes nothing: the point files stay untouched."""
    out = tmp_path / "out"
    args = ["sweep", str(write(tmp_path, SWEEP)), "--workers", "0", "--out", str(out)]
    assert main(args) == 0
    before = {p.name: p.stat().st_mtime_ns for p in (out / "points").iterdir()}
    capsys.readouterr()
    assert main(args) == 0
    assert "4 points: 0 ran, 4 already done, 0 failed." in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in (out / "points").iterdir()} == before
    assert len(pd.read_csv(out / "results.csv")) == 4


def test_a_failing_point_exits_1_and_the_others_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A point with an invalid value is reported on stderr with its error, recorded in the
    ``error`` column, and the sweep exits 1 after running the other points."""
    text = "base: tiny\ndays: 0.5\ngrid: {policy.slices: [0, 4]}\n"
    out = tmp_path / "out"
    assert main(["sweep", str(write(tmp_path, text)), "--workers", "0", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "policy.slices=0" in captured.err and "failed" in captured.err
    assert "2 points: 2 ran, 0 already done, 1 failed." in captured.out
    frame = pd.read_csv(out / "results.csv")
    assert "policy.slices" in frame.loc[0, "error"]
    assert pd.isna(frame.loc[1, "error"]) and frame.loc[1, "occupancy"] > 0


def test_local_dask_cluster_gives_the_serial_results(tmp_path: Path) -> None:
    """``--workers 2`` (a local Dask cluster) writes the same results as ``--workers 0``."""
    sweep_file = str(write(tmp_path, SWEEP))
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert main(["sweep", sweep_file, "--workers", "0", "--out", str(serial), "--no-progress"]) == 0
    assert main(["sweep", sweep_file, "--workers", "2", "--out", str(parallel), "--no-progress"]) == 0
    a = pd.read_csv(serial / "results.csv").drop(columns="elapsed_s")
    b = pd.read_csv(parallel / "results.csv").drop(columns="elapsed_s")
    pd.testing.assert_frame_equal(a, b)


def test_ctrl_c_says_what_was_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Ctrl-C the command exits 130 and says how many finished points are kept."""
    out = tmp_path / "out"
    args = ["sweep", str(write(tmp_path, SWEEP)), "--workers", "0", "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()

    def interrupted(self: SweepFile, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SweepFile, "run", interrupted)
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "4 finished points are saved" in err and "again to carry on" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("base: tiny\ngrid: {policy.lookback: 3d}\n", "grid.policy.lookback: Input should be a valid list"),
        ("base: tiny\npolices: [fairshare]\n", "polices: unknown field"),
        ("base: missing.yaml\n", "base: no scenario file"),
        ("base: tiny\ngrid: {clusters.gamma.scale: [2]}\n", "clusters.gamma.scale"),
        ("base: tiny\npolicies: [fifo]\n", "policies: unknown policy 'fifo'"),
        ("base: tiny\nseeds: [1, 2]\n", "seeds: the base scenario's workload is not generated"),
        ("base: tiny\ndays: -1\n", "days: Input should be greater than 0"),
        ("- base: tiny\n", "expected a mapping"),
        ("base: tiny\noptions: {time_limit: 2}\n", "options.time_limit: no policy of this sweep takes"),
    ],
)
def test_bad_input_exits_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """Bad sweep input exits 2 with one line naming the sweep file and the field, and runs
    nothing."""
    sweep_file = write(tmp_path, text)
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--workers", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert str(sweep_file) in err and message in err
    assert "Traceback" not in err
    assert not list(out.glob("points/*"))


def test_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuplan sweep --help`` documents --workers, --scheduler and --out."""
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "--workers" in text and "--scheduler" in text and "--out" in text
