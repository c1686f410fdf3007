"""Budget sweep against the strongest peers: reasoner vs least-squares vs mujoco-sysid (and any others).

For each budget (default 20, 40, 80 rollouts) runs the sim2sim benchmark of ``--rig`` with
the given methods and seeds (library call, the protocol of ``vid2sid benchmark sim2sim``)
and prints one Markdown table: mean relative parameter error (± std over seeds) and holdout
MAE per method and budget. Runs are resumable (one benchmark directory per budget).

    nice .venv/bin/python bench/bench_peers.py --rig finger --seeds 5 --out runs/bench_peers
    nice .venv/bin/python bench/bench_peers.py --rig tentacle --seeds 2 --budgets 20,40

ROS is not used.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "118")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vid2sid_ros.calibration.benchmark import run_benchmark  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--methods", default="reasoner,least-squares,mujoco-sysid")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budgets", default="20,40,80")
    ap.add_argument("--misspecify", default=None)
    ap.add_argument("--out", default="runs/bench_peers")
    a = ap.parse_args(argv)
    methods = a.methods.split(",")
    budgets = [int(b) for b in a.budgets.split(",")]
    table: dict[str, dict[int, str]] = {m: {} for m in methods}
    for b in budgets:
        res = run_benchmark(a.rig, methods, a.seeds, budget=b, out=Path(a.out) / f"{a.rig}_{b}", progress=False,
                            misspecify=a.misspecify)
        for m in methods:
            r = res["methods"][m]
            h = r["holdout_mae_px"]
            table[m][b] = (f"{100 * r['mean_rel_param_error']:.2f} % (±{100 * r['std_rel_param_error_over_seeds']:.2f}),"
                           f" holdout {'–' if h is None else format(h, '.2f')}")
    lines = [f"{a.rig}, {a.seeds} seeds" + (f", misspecified {a.misspecify}" if a.misspecify else "") + ":", "",
             "| method | " + " | ".join(f"{b} rollouts" for b in budgets) + " |", "|---|" + "---|" * len(budgets)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(table[m][b] for b in budgets) + " |")
    text = "\n".join(lines)
    print(text)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{a.rig}_sweep.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
