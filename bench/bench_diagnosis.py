"""Residual diagnosis counts: false alarms on the unmodified rig, detections per misspecification kind.

For each kind (none, latency, frozen, friction, camera, rolling_shutter, drops) runs
``vid2sid benchmark sim2sim --rig RIG --misspecify KIND --seeds N --budget B`` with the
given methods (library call, same protocol) and prints one Markdown table: per kind, the
mean relative parameter error, how many seeds the diagnosis named the kind (or raised
any warning on the unmodified rig), and for latency the identification error in frames.

    nice .venv/bin/python bench/bench_diagnosis.py --rig finger --seeds 5 --budget 40 --out runs/bench_diag

Runs are resumable (each kind has its own benchmark directory). ROS is not used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "117")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vid2sid_ros.calibration.benchmark import DETECTED_AS, run_benchmark  # noqa: E402

KINDS = ("none", "latency", "frozen", "friction", "camera", "rolling_shutter", "drops")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--methods", default="reasoner")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", default="runs/bench_diag")
    a = ap.parse_args(argv)
    methods = a.methods.split(",")
    rows = []
    for kind in a.kinds.split(","):
        res = run_benchmark(a.rig, methods, a.seeds, budget=a.budget, out=Path(a.out) / f"{a.rig}_{kind}",
                            misspecify=None if kind == "none" else kind, progress=False)
        for m in methods:
            r = res["methods"][m]
            n = r["seeds"]
            if kind == "none":
                named = f"quiet in {n - r['false_alarms']}/{n} (false alarms {r['false_alarms']})"
            else:
                named = f"named in {r['detected'][kind]}/{n} (as '{DETECTED_AS[kind]}')"
                other = [sorted(set(rec["methods"][m]["diagnosis"]["kinds"])) for rec in res["per_seed"]]
                named += "; kinds named per seed: " + "; ".join(",".join(k) or "-" for k in other)
            lat = r.get("latency_error_frames")
            size = res["misspecification"].get(kind)
            rows.append(f"| {kind}{'' if size is None else f'={size:g}'} | {m} | {100 * r['mean_rel_param_error']:.2f} % "
                        f"| {named} | {'–' if not lat else format(lat['max'], '.3f')} |")
    print(f"{a.rig}, {a.seeds} seeds, budget {a.budget}:\n")
    print("| real side | method | mean rel. param. error | diagnosis | latency error, max (frames) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    (Path(a.out) / f"{a.rig}_summary.md").write_text("\n".join(rows) + "\n")
    json.dumps(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
