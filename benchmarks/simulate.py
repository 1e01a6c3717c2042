"""Simulator benchmark: timings on the Philly week and the policy comparison table.

Runs ``legacy``, ``fairshare`` and ``mip`` (epoch 1 h, 4 slices) on the bundled
``ai2-like`` and ``philly-week`` scenarios and prints:

1. wall time per run, with the thresholds of the issue on the full Philly week:
   ``fairshare`` <= 30 s and ``mip`` <= 10 min (2 cores);
2. the comparison table the institute would want (every summary metric, per scenario
   and policy);
3. the goals for ``mip``: delivered over owed >= 0.99, worst project >= 0.95, occupancy
   >= 0.98 of what the workload can fill (busy / fillable GPU-hours), debug p90 wait
   <= 60 s, large-gang p90 wait below ``fairshare``'s.

Usage::

    python benchmarks/simulate.py                 # full scenarios (about 20 min)
    python benchmarks/simulate.py --days 1        # a quick look
    python benchmarks/simulate.py --scenarios philly-week --policies fairshare

Exit code 1 when a timing threshold is missed on a full-length run; the goals are
reported, not enforced.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.cli.table import format_table  # noqa: E402
from planner.simulator import SimulationResult, simulate  # noqa: E402
from planner.simulator.report import summary_rows  # noqa: E402
from scenarios import load_scenario  # noqa: E402

THRESHOLDS = {("philly-week", "fairshare"): 30.0, ("philly-week", "mip"): 600.0}


def mip_scenario(scenario: Any) -> Any:
    """The scenario with the benchmark's mip policy: 1 h epochs of 4 slices."""
    policy = scenario.policy.model_copy(update={"epoch": 3600.0, "slices": 4})
    return scenario.model_copy(update={"policy": policy})


def goals(results: dict[str, SimulationResult]) -> list[list[object]]:
    """Rows (goal, target, reached, met) for the mip run of one scenario."""
    mip = results.get("mip")
    if mip is None:
        return []
    s = mip.summary
    occ = mip.occupancy
    fill = float(occ["busy"].sum() / occ["fillable"].sum()) if occ["fillable"].sum() > 0 else None
    fair_large = results["fairshare"].summary["wait_p90_s"]["large"] if "fairshare" in results else None
    large = s["wait_p90_s"]["large"]

    def row(name: str, target: str, value: Any, ok: bool | None) -> list[object]:
        shown = "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else value)
        return [name, target, shown, "-" if ok is None else ("yes" if ok else "NO")]

    d = s["delivered_over_owed"]
    w = s["worst_project_delivered_over_owed"]
    dbg = s["wait_p90_s"]["debug"]
    return [
        row("delivered_over_owed", ">= 0.99", d, None if d is None else d >= 0.99),
        row("worst project", ">= 0.95", w, None if w is None else w >= 0.95),
        row("occupancy / fillable", ">= 0.98", fill, None if fill is None else fill >= 0.98),
        row("debug p90 wait (s)", "<= 60", dbg, None if dbg is None else dbg <= 60),
        row(
            "large p90 wait (s)",
            f"< fairshare ({fair_large:.0f})" if fair_large is not None else "< fairshare",
            large,
            None if large is None or fair_large is None else large < fair_large,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=float, default=None, help="simulated days (default: full)")
    p.add_argument("--scenarios", default="ai2-like,philly-week")
    p.add_argument("--policies", default="legacy,fairshare,mip")
    p.add_argument("--time-limit", type=float, default=3.0,
                   help="mip solver seconds per epoch (default 3: 168 epochs fit 10 min)")
    p.add_argument("--backend", default="cpsat")
    args = p.parse_args(argv)
    scenario_names = [s for s in args.scenarios.split(",") if s]
    policy_names = [s for s in args.policies.split(",") if s]
    timings: list[list[object]] = []
    failed = False
    all_results: dict[str, dict[str, SimulationResult]] = {}
    for name in scenario_names:
        scenario = load_scenario(name)
        results: dict[str, SimulationResult] = {}
        for pol in policy_names:
            opts: dict[str, Any] = {}
            sc = scenario
            if pol == "mip":
                sc = mip_scenario(scenario)
                opts = {"time_limit": args.time_limit, "backend": args.backend}
            t0 = time.perf_counter()
            results[pol] = simulate(sc, pol, days=args.days, progress=sys.stderr.isatty(), **opts)
            secs = time.perf_counter() - t0
            limit = THRESHOLDS.get((name, pol))
            full = args.days is None or args.days >= 7
            ok = None if limit is None or not full else secs <= limit
            failed |= ok is False
            extra = results[pol].extra
            note = (f"{extra.get('plans', 0)} plans, {extra.get('fallbacks', 0)} fallbacks"
                    if pol == "mip" else "")
            timings.append([name, pol, len(results[pol].jobs), round(secs, 1),
                            "-" if limit is None else f"<= {limit:.0f}",
                            "-" if ok is None else ("yes" if ok else "NO"), note])
            print(f"{name} {pol}: {secs:.1f} s", file=sys.stderr)
        all_results[name] = results
    print("Wall time (2 shared cores: noisy; thresholds apply to the full week)")
    print(format_table(["scenario", "policy", "jobs", "seconds", "threshold", "met", "note"], timings))
    for name, results in all_results.items():
        print(f"\n{name}: {next(iter(results.values())).horizon / 3600:g} h simulated")
        print(format_table(["metric", *results], [[k, *v] for k, v in summary_rows(results)]))
        g = goals(results)
        if g:
            print(f"\n{name}: goals for mip")
            print(format_table(["goal", "target", "mip", "met"], g))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
