import pytest

from planner.cli import main


def test_show_prints_capacity_org_and_workload(capsys: pytest.CaptureFixture[str]) -> None:
    """scenario show prints pools with capacity, the org tree with effective shares, and workload stats."""
    assert main(["scenario", "show", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "alpha/H100      4    32" in out
    assert "total           6    48" in out
    assert "  nlp       2.00  50.0%" in out
    assert "12 jobs" in out
    assert "offered load" in out
