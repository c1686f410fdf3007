#!/usr/bin/env python3
"""Benchmark the calibrators: sim2sim ground-truth recovery at a fixed rollout budget.

Runs :func:`vid2sid_ros.benchmark.run.run_benchmark` (hidden truths, camera
noise + marker tracking on the "real" side, every method from the nominal values with
the same budget) and prints

1. the results table (mean relative parameter error, holdout/train MAE, rollouts, wall time);
2. convergence: mean relative parameter error and training MAE of the best point seen,
   against the rollouts spent, per method (from each run's ``iterations.jsonl``).

Usage::

    python bench/bench_calibration.py --rig finger --seeds 5 --budget 40 --out runs/bench_finger
    python bench/bench_calibration.py --rig vid2sid_ros.sim.toy:make_rig --noise keypoint --seeds 10

Re-running with the same ``--out`` reuses finished runs (only the tables are recomputed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vid2sid_ros.benchmark.run import DEFAULT_METHODS, format_results_markdown, run_benchmark  # noqa: E402


def convergence(out: Path, results: dict, checkpoints: list[int]) -> str:
    """Markdown table: best-so-far relative parameter error / training MAE vs rollouts."""
    free = results["free_parameters"]
    lines = ["| method | " + " | ".join(f"≤{c} rollouts" for c in checkpoints) + " |",
             "|---|" + "---|" * len(checkpoints)]
    for m in results["methods"]:
        cells = []
        for c in checkpoints:
            rels, maes = [], []
            for s in results["per_seed"]:
                truth = s["truth"]
                path = out / f"seed_{s['seed']}" / m / "iterations.jsonl"
                init = json.loads((out / f"seed_{s['seed']}" / m / "run.json").read_text())["initial"]
                records = [init] + [json.loads(x) for x in path.read_text().splitlines()]
                spent, best = 0, (np.inf, None)
                for r in records:
                    for e in r["extra"]["evaluations"]:
                        spent += e["rollouts"]
                        if spent > c:
                            break
                        if e["error_px"] is not None and e["error_px"] < best[0]:
                            best = (e["error_px"], e["values"])
                if best[1] is not None:
                    rels.append(np.mean([abs(best[1][n] - truth[n]) / abs(truth[n]) for n in free]))
                    maes.append(best[0])
            cells.append(f"{100 * np.mean(rels):.1f} % / {np.mean(maes):.2f} px" if rels else "–")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--noise", default="auto")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = Path(args.out or f"runs/bench_{args.rig.replace(':', '_').replace('.', '_')}")
    results = run_benchmark(args.rig, args.methods.split(","), args.seeds, budget=args.budget,
                            iterations=args.iterations, noise=args.noise, out=out)
    print(format_results_markdown(results))
    checkpoints = sorted({c for c in (10, 20, 30, args.budget) if c <= args.budget})
    print("Convergence (best point seen so far; mean over seeds): relative parameter error / training MAE\n")
    print(convergence(out, results, checkpoints))
    print(f"\ntotal wall time {results['wall_s_total']:.0f} s; files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
