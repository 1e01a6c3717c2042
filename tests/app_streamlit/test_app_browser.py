"""End to end in a real browser: Debian's chromium driven by Playwright (sync API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_streamlit import drive
from app_streamlit.serve import running_app

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(drive.chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"),
]


def test_edit_a_programs_percentage_run_the_whatif_and_read_the_program_deltas(tmp_path: Path) -> None:
    """In chromium at 1280x720: type research's percentage, run the what-if (fairshare
    preview, then mip, on the local Dask cluster), read the program tiles with their
    deltas and a within-noise mark, and every chart; then at 800 px the programs' answer
    comes before the editor."""
    from playwright.sync_api import sync_playwright

    with running_app(log=tmp_path / "streamlit.log") as url, sync_playwright() as p:
        browser = drive.launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        try:
            drive.open_app(page, url, "tiny")
            drive.edit_percent(page, "research", 60)
            # On a loaded machine the rerun may start after edit_percent's idle check:
            # wait for its answer (wait_for fails the test if it never comes).
            page.get_by_text("Applied: research 75.0 % → 60.0 %. Rescaled to keep 100 %: infra.").wait_for(
                timeout=60_000
            )
            assert page.get_by_text("40.0 % of parent (+15.0 points, rescaled)").is_visible()

            drive.run_whatif(page)
            assert page.get_by_text("Dask is not available").count() == 0  # the runs went to Dask
            tiles = page.get_by_test_id("stMetric")
            assert tiles.count() == 2
            labels = tiles.get_by_test_id("stMetricLabel").all_inner_texts()
            assert [t.split("·")[0].strip() for t in labels] == ["research", "infra"]
            assert "75.0 → 60.0 %" in labels[0]
            deltas = tiles.get_by_test_id("stMetricDelta").all_inner_texts()
            assert all("GPU-h" in d for d in deltas)
            assert page.get_by_text("within noise").first.is_visible()
            assert page.get_by_text("Under gpuplan's epoch planner (mip), 3 replicate(s) a side").is_visible()
            tree = page.get_by_test_id("stDataFrame").filter(has=page.locator("th", has_text="Change in delivered"))
            assert tree.locator("td", has_text="research").count() >= 1

            drive.open_tab(page, "2. Details and charts")
            drive.wait_for_charts(page)
            titles = drive.visible_chart_titles(page)
            for title in (
                "Change in delivered GPU-hours per program",
                "Share of owed GPU-hours delivered, per program",
                "Wait-time distribution: debug jobs",
                "Occupancy over time",
                "Preemptions",
            ):
                assert title in titles

            drive.open_tab(page, "1. What-if by program")
            page.set_viewport_size({"width": 800, "height": 900})
            page.wait_for_timeout(800)
            tile = page.get_by_test_id("stMetric").first.bounding_box()
            editor = page.get_by_text("1. Change the shares").bounding_box()
            assert tile is not None and editor is not None and tile["y"] < editor["y"]
            width = page.get_by_test_id("stMetricValue").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert width[0] <= width[1]  # the figure is not cut
            assert not page.get_by_test_id("stException").count()
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    # The Dask workers (spawned from the server) did not run the app script as their main.
    log = (tmp_path / "streamlit.log").read_text(errors="replace")
    assert "Thread 'MainThread': missing ScriptRunContext" not in log
    assert "daemonic processes are not allowed to have children" not in log


def test_the_live_page_shows_a_running_clusters_ledger(tmp_path: Path) -> None:
    """In chromium: the live tab, pointed at the ledger of a short ``gpuplan run``
    (dryrun, tiny), shows the standing and owed-against-delivered charts and the queue
    table, and changes neither the ledger nor its status file."""
    from playwright.sync_api import sync_playwright

    from planner.cli import main

    ledger = tmp_path / "usage.sqlite"
    assert main(["run", "tiny", "--policy", "fairshare", "--ledger", str(ledger), "--epochs", "1",
                 "--slice-seconds", "1", "--poll", "0.2", "-o", f"log={tmp_path / 'a.jsonl'}"]) == 0
    status = Path(f"{ledger}.status.json")
    before = (ledger.read_bytes(), status.read_bytes())
    with running_app(log=tmp_path / "streamlit.log") as url, sync_playwright() as p:
        browser = drive.launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        try:
            drive.open_app(page, url, "tiny")
            drive.open_tab(page, "5. Live cluster")
            box = page.get_by_role("textbox", name="Ledger file")
            box.fill(str(ledger))
            box.press("Enter")
            drive.wait_idle(page)
            drive.wait_for_charts(page)
            # The page draws top to bottom, and beside it the app starts its Dask
            # workers and the what-if's warm-up: what comes below the charts (the queue
            # table, the project's name) may come a moment later.
            page.get_by_role("heading", name="Queue", exact=True).wait_for(timeout=30_000)
            headings = page.locator("h3").all_inner_texts()
            assert any(h.startswith("Owed against delivered") for h in headings), headings
            assert any(h.startswith("Standing over time") for h in headings), headings
            page.get_by_text("research/nlp").first.wait_for(state="attached", timeout=30_000)
            assert not page.get_by_test_id("stException").count()
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert (ledger.read_bytes(), status.read_bytes()) == before
