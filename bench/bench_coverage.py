"""Coverage of the stated 95 % parameter intervals over sim2sim seeds.

Runs ``vid2sid benchmark sim2sim`` (library call) with ``final_identifiability`` on, so each
calibration reports a Gauss–Newton standard deviation per parameter (ESS-corrected:
``vid2sid_ros.calibration.identifiability.correlation_time``), and counts how often the true
value lies inside identified ± 1.96 std. A calibrated interval contains the truth in ~95 %
of cases; the issue asks for 90–99 % over at least 20 seeds per rig.

    nice .venv/bin/python bench/bench_coverage.py --rig finger --seeds 20 --budget 40 --out runs/bench_coverage

Prints coverage per parameter and overall, with and without the correlation-time
correction (the uncorrected width is the corrected one divided by sqrt(tau)).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "119")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vid2sid_ros.calibration.benchmark import run_benchmark  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--method", default="reasoner")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--noise", default="auto", choices=["auto", "camera", "keypoint", "none"],
                    help="the stand-in's noise (auto: camera when the rig has a tracker); keypoint = the model "
                         "is exactly right and the noise white, a check of the interval method itself")
    ap.add_argument("--out", default="runs/bench_coverage")
    a = ap.parse_args(argv)
    out = Path(a.out) / f"{a.rig}_{a.method}_{a.budget}_{a.noise}"
    res = run_benchmark(a.rig, [a.method], a.seeds, budget=a.budget, out=out, final_identifiability=True,
                        progress=False, noise=a.noise)
    free = res["free_parameters"]
    inside = {n: 0 for n in free}
    counted = {n: 0 for n in free}
    for s in res["per_seed"]:
        rec = s["methods"][a.method]
        for n in free:
            std = (rec.get("uncertainty") or {}).get(n)
            if std is None or not math.isfinite(std):
                continue
            counted[n] += 1
            inside[n] += abs(rec["values"][n] - s["truth"][n]) <= 1.96 * std
    total_in, total = sum(inside.values()), sum(counted.values())
    lines = [f"{a.rig}, {a.method}, budget {a.budget}, noise {res['noise']}, {len(res['per_seed'])} seeds: 95 % "
             "interval coverage "
             f"{100 * total_in / max(total, 1):.1f} % ({total_in}/{total} parameter-seeds)"]
    lines += [f"  {n}: {inside[n]}/{counted[n]}" for n in free]
    text = "\n".join(lines)
    print(text)
    (out / "coverage.json").write_text(json.dumps({"inside": inside, "counted": counted,
                                                   "coverage": total_in / max(total, 1)}, indent=1))
    (out / "coverage.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
