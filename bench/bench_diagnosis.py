"""Residual diagnosis counts: false alarms on the unmodified rig, detections per misspecification kind.

For each kind (none, latency, frozen, friction, camera, rolling_shutter, drops) runs
``vid2sid benchmark sim2sim --rig RIG --misspecify KIND --seeds N --budget B`` with the
given methods (library call, same protocol) and prints one Markdown table: per kind, the
mean relative parameter error, how many seeds the diagnosis named the kind (or raised
any warning on the unmodified rig), and for latency the identification error in frames.

    nice .venv/bin/python bench/bench_diagnosis.py --rig finger --seeds 5 --budget 40 --out runs/bench_diag

Runs are resumable (each kind has its own benchmark directory). ROS is not used.

``--causes`` runs the cause comparison instead, on the finger (reasoner, budget B, keypoint
noise 0.3 px), with errors the misspecification kinds do not cover: per case and seed, the
verdict is scored ``right`` (named, the truth's kind), ``indistinguishable with the truth`` (the
truth in the reported set, nothing recommended), ``wrong`` (named or a set without the truth),
``missed`` (nothing said) or, on the unmodified rig, ``false alarm``::

    nice .venv/bin/python bench/bench_diagnosis.py --causes --seeds 3 --budget 40

==========  ==================================================================================
case        real side
==========  ==================================================================================
none        the twin itself
frozen      the frozen joint_armature ×1.3
mass        the middle link's mass and inertia ×1.2 (no parameter: a model error)
deadzone    a 0.15 dead-zone on the tendon command (commands 0.1-0.4)
focal       the focal length 3 % longer (keypoints scaled about the principal point)
camera      the camera moved 3 mm / turned 3 mrad (``camera=3``)
latency     a 20 ms camera latency, the latency nuisance off
==========  ==================================================================================
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

from vid2sid_ros.benchmark.run import DETECTED_AS, run_benchmark  # noqa: E402

KINDS = ("none", "latency", "frozen", "friction", "camera", "rolling_shutter", "drops")


#: case -> (what the truth is called in a diagnosis: a cause-name fragment or a kind)
CAUSE_CASES = {"none": None, "frozen": "joint_armature", "mass": "mass of body 'middle'", "deadzone": "dead-zone",
               "focal": "camera", "camera": "camera", "latency": "latency"}


def _real_twin(rig, case):
    """The finger's real-side twin with the case's model or drive error (None: the calibrating twin's copy)."""
    import mujoco
    import numpy as np
    from dataclasses import replace

    tw = rig.make_twin()
    if case == "mass":
        base = tw.model.body_mass[2], tw.model.body_inertia[2].copy()
        orig = tw.set_parameters

        def set_parameters(values):
            orig(values)
            tw.model.body_mass[2], tw.model.body_inertia[2] = base[0] * 1.2, base[1] * 1.2
            mujoco.mj_setConst(tw.model, mujoco.MjData(tw.model))
        tw.set_parameters = set_parameters
    elif case == "deadzone":
        roll = tw.rollout

        def rollout(exc, **kw):
            v = np.asarray(exc.values, float)
            return roll(replace(exc, values=np.sign(v) * np.maximum(np.abs(v) - 0.15, 0.0)), **kw)
        tw.rollout = rollout
    return tw


def _focal(real, twin, scale=1.03):
    """Every trial's keypoints as a lens ``scale`` × longer would see them (about the principal point)."""
    import numpy as np
    from dataclasses import replace

    cam = twin.camera
    c = np.array([cam.cx, cam.cy])
    for part in ("train", "holdout"):
        setattr(real, part, [replace(t, keypoints=c + (t.keypoints - c) * scale) for t in getattr(real, part)])
    return real


def _score(diag, truth):
    """right | indistinguishable with the truth | wrong | missed | false alarm | quiet."""
    warned = bool(diag.get("misspecified"))
    if truth is None:
        return "false alarm" if warned else "quiet"
    named = [f for f in diag.get("findings", []) if f["severity"] == "warning"]
    if not named:
        return "missed"
    f = named[0]
    members = f["evidence"].get("causes") or [{"cause": f["evidence"].get("cause", ""), "kind": f["kind"]}]
    hit = any(truth in (m.get("cause") or "") or truth == m.get("kind") for m in members)
    hit = hit or (f["kind"] == "frozen" and f["evidence"].get("parameter") == truth)
    if f["kind"] == "indistinguishable" or len(members) > 1:
        return "indistinguishable with the truth" if hit else "wrong"
    return "right" if hit else "wrong"


def causes_main(seeds: int, budget: int) -> list[str]:
    """The ``--causes`` table (Markdown rows)."""
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.sim.registry import make_rig

    rows = []
    for case, truth in CAUSE_CASES.items():
        outcomes, named = [], []
        for seed in range(seeds):
            rig = make_rig("finger")
            values = draw_ground_truth(rig.parameters, seed)
            mis = {"frozen": "frozen=0.3", "camera": "camera=3", "latency": "latency=0.02"}.get(case)
            twin = None if mis else _real_twin(rig, case)
            real = make_sim2sim_trial(rig, values, seed=seed, noise="keypoint", keypoint_sigma_px=0.3, misspecify=mis,
                                      twin=twin)
            if case == "focal":
                real = _focal(real, rig.make_twin())
            nuisance = {"latency": False} if case == "latency" else None
            cfg = CalibrationConfig(iterations=10, rollout_budget=budget, seed=seed, identifiability=False,
                                    final_identifiability=False, nuisance=nuisance)
            d = run_calibration(rig, real, make_proposer("reasoner"), cfg).diagnosis or {}
            outcomes.append(_score(d, truth))
            warn = [f for f in d.get("findings", []) if f["severity"] == "warning"]
            named.append(warn[0]["kind"] + (f" ({len(warn[0]['evidence'].get('causes', []))})"
                                             if warn[0]["evidence"].get("causes") else "") if warn else "-")
        counts = {k: outcomes.count(k) for k in dict.fromkeys(outcomes)}
        rows.append(f"| {case} | {truth or '-'} | {'; '.join(named)} | "
                    + ", ".join(f"{k} {v}/{seeds}" for k, v in counts.items()) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--methods", default="reasoner")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", default="runs/bench_diag")
    ap.add_argument("--causes", action="store_true", help="the cause comparison on the finger (module docstring)")
    a = ap.parse_args(argv)
    if a.causes:
        rows = causes_main(a.seeds, a.budget)
        print(f"finger, {a.seeds} seeds, budget {a.budget}, keypoint noise 0.3 px:\n")
        print("| case | truth | first warning per seed (set size) | outcome |")
        print("|---|---|---|---|")
        print("\n".join(rows))
        return 0
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
