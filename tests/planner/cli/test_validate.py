from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main


def test_validate_ok(capsys: pytest.CaptureFixture[str]) -> None:
    """validate prints a one-line summary and exits 0 for a good file."""
    assert main(["validate", "tiny"]) == 0
    assert "ok: scenario 'tiny'" in capsys.readouterr().out


def test_validate_bad_file_exits_2_with_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input exits 2 with one message naming file and field, no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nclusters: [{name: a, node_groups: [{gpu_type: H100, nodes: 0}]}]\norg: [{name: p, share: 1}]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert f"{bad}: clusters[0].node_groups[0].nodes" in err
    assert "Traceback" not in err


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed entry point exits 2 on bad input without a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "planner.cli", "validate", str(tmp_path / "missing.yaml")],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_debug_shows_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--debug adds the traceback for bug reports."""
    assert main(["--debug", "validate", str(tmp_path / "missing.yaml")]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Every registered sub-command answers --help."""
    from planner.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:  # type: ignore[union-attr]
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0
        assert "usage: gpuplan" in capsys.readouterr().out


def test_debug_after_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--debug also works after the sub-command."""
    assert main(["validate", str(tmp_path / "missing.yaml"), "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """stdout closed by its reader (`gpuplan ... | head`): exit 141, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "scenario", "show", "tiny"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err
