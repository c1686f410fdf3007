"""Does the reasoner's "converged" hold up on a rig with many parameters? Side by side with the peers.

Runs the sim2sim benchmark (the protocol of ``vid2sid benchmark sim2sim``: hidden truths
drawn per seed, every method from the nominal point, the same rollout budget) on a rig with
at least 7 free parameters — by default ``bench/rigs/arm4/rig.yaml``, a planar four-link arm
with a motor per joint (8 parameters: each motor's gain, each joint's damping; keypoints with
0.3 px noise, no rendering) — for the reasoner, CMA-ES and both least-squares peers, and prints
one table per seed and a summary: mean relative parameter error, rollouts spent, stop reason.

The standard it checks: the reasoner's mean parameter error is within 1.2x of the best peer's,
or its stop reason says it did not converge (any stop other than ``converged``). The last
line says which, per seed.

    nice .venv/bin/python bench/bench_convergence.py --seeds 3 --budget 120 --out runs/bench_convergence

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

from vid2sid_ros.benchmark.run import run_benchmark  # noqa: E402
from vid2sid_ros.report.run import stop_kind  # noqa: E402

METHODS = ("reasoner", "cmaes", "least-squares", "mujoco-sysid")
RIG = Path(__file__).resolve().parent / "rigs" / "arm4" / "rig.yaml"


def verdicts(results: dict) -> list[str]:
    """Per seed: does the reasoner meet the standard (module docstring)? One line each."""
    out = []
    for s in results["per_seed"]:
        m = s["methods"]
        r = m["reasoner"]
        peers = [m[k]["mean_rel_error"] for k in m if k != "reasoner"]
        if not peers:
            out.append(f"seed {s['seed']}: reasoner {100 * r['mean_rel_error']:.3g} %, stopped '{r['stopped'][:60]}' "
                       "(no peer run: nothing to compare)")
            continue
        best = min(peers)
        within = r["mean_rel_error"] <= 1.2 * best
        conv = stop_kind(r["stopped"]) == "converged"
        ok = within or not conv
        out.append(f"seed {s['seed']}: reasoner {100 * r['mean_rel_error']:.3g} % vs best peer {100 * best:.3g} % "
                   f"({'within' if within else 'NOT within'} 1.2x); stopped '{r['stopped'][:60]}' -> "
                   f"{'OK' if ok else 'FAILS the standard (converged, yet worse than the peers)'}")
    return out


def table(results: dict, methods: list[str]) -> str:
    """Markdown: per method, the mean relative parameter error per seed and overall, rollouts, stop kinds."""
    seeds = [s["seed"] for s in results["per_seed"]]
    head = "| method | " + " | ".join(f"seed {k}" for k in seeds) + " | mean | rollouts | stops |"
    lines = [head, "|" + "---|" * (len(seeds) + 4)]
    for name in methods:
        rows = [s["methods"][name] for s in results["per_seed"]]
        errs = [r["mean_rel_error"] for r in rows]
        stops = ", ".join(stop_kind(r["stopped"]) for r in rows)
        lines.append(f"| {name} | " + " | ".join(f"{100 * e:.3g} %" for e in errs)
                     + f" | {100 * sum(errs) / len(errs):.3g} % | {sum(r['rollouts'] for r in rows) / len(rows):.0f}"
                     f" | {stops} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rig", default=str(RIG), help="rig config (>= 7 free parameters); default the four-link arm")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=120, help="rollouts per calibration (every method)")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", default=None, help="benchmark directory (resumable); default: nothing written")
    a = ap.parse_args(argv)
    methods = [m for m in a.methods.split(",") if m]
    res = run_benchmark(a.rig, methods, a.seeds, budget=a.budget, iterations=a.iterations, noise="keypoint",
                        out=a.out, progress=False, diagnosis=False, nominal_identifiability=False)
    print(f"{res.get('rig', a.rig)}: {len(res['per_seed'][0]['truth'])} free parameters, budget {a.budget} "
          f"rollouts, {a.iterations} iterations, keypoint noise")
    print(table(res, methods))
    print("\n".join(verdicts(res)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
