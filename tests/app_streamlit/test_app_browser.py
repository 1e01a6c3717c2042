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


def test_edit_a_share_run_the_whatif_and_see_both_result_sets(tmp_path: Path) -> None:
    """In chromium: load tiny, edit one share, run the what-if, see both result sets and every chart."""
    from playwright.sync_api import sync_playwright

    with running_app(log=tmp_path / "streamlit.log") as url, sync_playwright() as p:
        browser = drive.launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            drive.open_app(page, url, "tiny")
            drive.edit_share(page, "research/vision", 12)
            assert page.get_by_text("Edited: research/vision share 1 → 12").is_visible()
            assert "Owed GPU-hours per project" in drive.visible_chart_titles(page)

            drive.run_whatif(page)
            verdicts = page.get_by_test_id("stDataFrame").filter(
                has=page.locator("th", has_text="Verdict (edited vs current budgets)")
            )
            assert verdicts.locator("td", has_text="research/vision").count() == 1
            summary = page.get_by_test_id("stDataFrame").filter(has=page.locator("th", has_text="Metric"))
            headers = summary.locator("th").all_inner_texts()
            assert "current budgets" in headers and "edited budgets" in headers
            titles = drive.visible_chart_titles(page)
            for title in (
                "Delivered vs owed GPU-hours per project",
                "Wait-time distribution: debug jobs",
                "Wait-time distribution: all jobs",
                "Occupancy over time",
                "Preemptions",
            ):
                assert title in titles
            # Both result sets are drawn: each chart's legend names them.
            legend = page.locator("[data-testid=stPlotlyChart] .legendtext").evaluate_all(
                "els => els.filter(e => e.checkVisibility()).map(e => e.textContent)"
            )
            assert legend.count("current budgets") >= 3 and legend.count("edited budgets") >= 3
            assert not page.get_by_test_id("stException").count()
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            raise
        finally:
            browser.close()
