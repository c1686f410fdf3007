"""Active learning on/off at the same rollout budget: a hinge whose slow small sine hides stiffness vs gain.

The rig (MJCF inline): a rod on a hinge with a spring (``stiffness``), viscous ``damping`` and a
torque motor whose ``gain`` (gear) is free. Its only training trial is a 0.1 Hz sine of
amplitude 0.03 for 4 s: quasi-static, the tip follows ``gain · u / stiffness``, so gain and
stiffness (and damping, through the phase lag) trade off and the identifiability check warns.
The stand-in real rig (sim2sim, keypoint noise 0.5 px) hides a ground truth drawn per seed.

For each seed the same proposer calibrates twice with the same total rollout budget: plain,
and with active learning (design after ``--after`` iterations, one designed trial, the design's
rollouts charged). Printed: mean relative parameter error, rollouts charged (of which design),
whether the identifiability warning fires at the result, per seed and as medians.

``--case tied-causes`` (or ``--misspecified``): the finger with a 20 % heavier middle link, where the
residual diagnosis ties several causes; one trial designed by the separation criterion, then the
diagnosis again on the extended data.

``--case ablation``: the reasoner on the finger and the tentacle, active learning off and on, through
``vid2sid benchmark sim2sim`` (cells persist under ``--out``; a rerun resumes).

Usage::

    python bench/bench_active_learning.py --seeds 5 --budget 120 --proposer least-squares
    python bench/bench_active_learning.py --case tied-causes --seeds 5 --out runs/bench_tied
    python bench/bench_active_learning.py --case ablation --out runs/bench_active_ablation
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

HINGE_XML = """
<mujoco model="hinge">
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="arm" pos="0 0 1.0">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05" stiffness="0.5" armature="0.02"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.2"/>
      <site name="tip" pos="0.3 0 0" size="0.01"/>
    </body>
  </worldbody>
  <actuator><motor name="tau" joint="hinge" ctrlrange="-1 1" ctrllimited="true" gear="1"/></actuator>
</mujoco>
"""


def hinge_config(max_amplitude: float = 0.3) -> dict:
    """The rig config of the bench's hinge (model file ``hinge.xml`` beside the config)."""
    return {
        "model": "hinge.xml", "keypoints": {"tip": "tip"},
        "camera": {"width": 320, "height": 240, "fovy": 50,
                   "pose": {"position": [0.15, -1.2, 1.0], "look_at": [0.15, 0, 1.0]}},
        "parameters": {
            "damping": {"unit": "N*m*s/rad", "lower": 0.02, "upper": 0.5, "nominal": 0.08, "scale": "log",
                        "target": "dof_damping[hinge]"},
            "stiffness": {"unit": "N*m/rad", "lower": 0.2, "upper": 2.0, "nominal": 0.6, "scale": "log",
                          "target": "jnt_stiffness[hinge]"},
            "gain": {"unit": "N*m", "lower": 0.3, "upper": 3.0, "nominal": 1.0, "scale": "log",
                     "target": "actuator_gear[tau,0]"}},
        "nuisance": {"latency": False, "marker_offsets": False},
        "excitations": {"train": [{"kind": "sine", "amplitude": 0.03, "frequency": 0.1, "duration": 4.0,
                                   "rate": 30.0}]},
        "calibration": {"active_learning": {"enabled": True, "max_trials": 1, "after_iteration": 3,
                                            "max_amplitude": max_amplitude, "frequency_hz": [0.1, 4.0]}},
    }


def load_hinge(directory: Path):
    """Write the MJCF and load the rig from :func:`hinge_config`."""
    from vid2sid_ros.rigs import load_rig

    (directory / "hinge.xml").write_text(HINGE_XML)
    return load_rig(hinge_config(), source=(str(directory / "hinge.yaml"), directory))


def rel_error(values, truth, names) -> float:
    return float(np.mean([abs(values[n] - truth[n]) / abs(truth[n]) for n in names]))


def one_seed(rig, seed: int, proposer: str, budget: int, iterations: int, after: int, out: Path) -> dict:
    from vid2sid_ros.benchmark.sim2sim import sim2sim_stand_in
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer

    truth = draw_ground_truth(rig.parameters, seed)
    real = make_sim2sim_trial(rig, truth, seed=seed, noise="keypoint", keypoint_sigma_px=0.5)
    names = rig.parameters.free_names
    cfg = CalibrationConfig(iterations=iterations, rollout_budget=budget, seed=seed, diagnosis=False,
                            stop_when_converged=False,
                            nuisance=dict(rig.nuisance or {}))
    row = {"seed": seed}
    for label, on in (("off", False), ("on", True)):
        al = parse_active_learning({**rig.config["calibration"]["active_learning"], "enabled": on,
                                    "after_iteration": after})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_active_calibration(rig, real, lambda: make_proposer(proposer), cfg, al,
                                         out / f"seed_{seed}" / label,
                                         stand_in=sim2sim_stand_in(rig, truth, seed=seed, noise="keypoint",
                                                                   keypoint_sigma_px=0.5))
        row[label] = {"error": rel_error(res.result.values, truth, names), "rollouts": res.rollouts,
                      "design_rollouts": res.design_rollouts, "warning_before": res.warning_before is not None,
                      "warning_after": res.warning_after is not None, "trials": len(res.real.train),
                      "rationale": next((d.get("rationale") for d in res.designs if d.get("rationale")), None)}
    return row


def finger_heavier_link(seed: int, budget: int = 800, sigma_px: float = 0.3, train: tuple[str, ...] | None = None,
                        after: int = 10, iterations: int = 20) -> dict:
    """The finger whose real middle link is 20 % heavier (mass and inertia) than the twin's: the residual
    diagnosis ties the link mass with the joint armature and others; one trial designed by the separation
    criterion (reasoner, keypoint noise 0.3 px), then the diagnosis on the extended data."""
    import mujoco
    from dataclasses import replace

    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from vid2sid_ros.calibration.active import parse_active_learning, run_active_calibration
    from vid2sid_ros.calibration.loop import CalibrationConfig
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.sim.registry import make_rig

    rig = make_rig("finger")
    if train is not None:  # fewer training trials than the shipped ones (the chirp alone: no static load)
        rig = replace(rig, excitations={**rig.excitations,
                                        "train": [e for e in rig.excitations["train"] if e.name in train]})
    real_twin = rig.make_twin()
    mass, inertia = real_twin.model.body_mass[2], real_twin.model.body_inertia[2].copy()
    set_parameters = real_twin.set_parameters

    def heavier(values):
        set_parameters(values)
        real_twin.model.body_mass[2], real_twin.model.body_inertia[2] = 1.2 * mass, 1.2 * inertia
        mujoco.mj_setConst(real_twin.model, mujoco.MjData(real_twin.model))

    real_twin.set_parameters = heavier
    truth = draw_ground_truth(rig.parameters, seed)
    real = make_sim2sim_trial(rig, truth, seed=seed, noise="keypoint", keypoint_sigma_px=sigma_px, twin=real_twin)
    rng = np.random.default_rng(seed + 77)

    def stand_in(exc):
        real_twin.set_parameters(rig.parameters.complete(truth))
        tr = real_twin.rollout(exc).trajectory
        return replace(tr, keypoints=tr.keypoints + rng.normal(0, sigma_px, tr.keypoints.shape), source="real")

    cfg = CalibrationConfig(iterations=iterations, rollout_budget=budget, seed=seed, identifiability=False)
    al = parse_active_learning({"after_iteration": after, "criterion": "separation"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_active_calibration(rig, real, lambda: make_proposer("reasoner"), cfg, al, None, stand_in=stand_in)

    def members(res):
        d = res.diagnosis or {}
        if d.get("verdict") == "named":  # the named cause (a recommendation, or a warning with its evidence)
            rec = d.get("recommendation") or {}
            named = rec.get("cause") or next((f["evidence"].get("cause") for f in d.get("findings", [])
                                              if f.get("severity") == "warning" and f.get("evidence")), None)
            return "named", [named] if named else []
        return d.get("verdict"), [c["cause"] for f in d.get("findings", []) for c in
                                  (f.get("evidence") or {}).get("causes", [])]

    v0, m0 = members(out.phases[0])
    v1, m1 = members(out.phases[-1])
    return {"seed": seed, "before": (v0, m0), "after": (v1, m1), "trials": out.robot_trials,
            "design_rollouts": out.design_rollouts, "rollouts": out.rollouts,
            "rationale": next((d.get("rationale") or d.get("reason") for d in out.designs), None)}


def run_tied_causes(seeds: int, sigma_px: float, out: Path | None = None) -> int:
    """The finger with a 20 % heavier middle link: the diagnosis before and after one separating trial, per seed.

    Each seed's row is saved as ``OUT/tied_seed_K.json`` the moment it is done (with ``out``); a rerun
    reuses the rows it finds."""
    import json

    middle = "mass of body 'middle' (mass and inertia together)"
    print(f"finger, middle link 20 % heavier (mass and inertia), keypoint noise {sigma_px:g} px, reasoner; "
          "the residual diagnosis before and after one trial designed by the separation criterion")
    print("| seed | before | designed trial | after | the middle link's mass named after the trial |")
    print("|---|---|---|---|---|")
    tied = right = final = 0
    for s in range(seeds):
        path = out / f"tied_seed_{s}_{sigma_px:g}px.json" if out is not None else None
        if path is not None and path.is_file():
            r = json.loads(path.read_text())
        else:
            r = finger_heavier_link(s, sigma_px=sigma_px)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(r, default=str))
        before, after = r["before"], r["after"]
        tied += before[0] == "indistinguishable"
        ok = r["trials"] > 0 and after[0] == "named" and after[1][:1] == [middle]
        right += ok
        final += after[0] == "named" and after[1][:1] == [middle]
        trial = (r["rationale"] or "").split(" separates")[0].split("; a ")[-1] if r["trials"] else "none run"
        print(f"| {s} | {before[0]}: {', '.join(before[1])} | {trial} ({r['design_rollouts']} design rollouts) | "
              f"{after[0]}: {', '.join(after[1])} | {'yes' if ok else 'no'} |")
    print(f"\ntied before the trial: {tied}/{seeds}; the middle link's mass named after one designed trial: "
          f"{right}/{seeds}; named at the end (with or without a trial): {final}/{seeds}")
    return 0


#: the ablation's settings per rig: seeds, rollout budget, iterations, residual diagnosis after each phase (the
#: tentacle's PyElastica rollouts are slow: its diagnosis alone takes longer than its calibration, so it is off there
#: and active learning is triggered by the identifiability check only)
ABLATION = {"finger": {"seeds": 3, "budget": 60, "iterations": 10, "diagnosis": True},
            "tentacle": {"seeds": 2, "budget": 30, "iterations": 6, "diagnosis": False}}


def ablation_arm(rig_name: str, on: bool, out: Path, method: str = "reasoner") -> dict:
    """One arm of the ablation through :func:`~vid2sid_ros.benchmark.run.run_benchmark` (``vid2sid benchmark
    sim2sim --rig RIG --methods METHOD --noise keypoint [--active-learning]``, the settings of :data:`ABLATION`);
    its cells persist under ``out/RIG_on|off`` and a rerun resumes them."""
    import dataclasses

    from vid2sid_ros.benchmark.run import run_benchmark
    from vid2sid_ros.calibration.active import parse_active_learning
    from vid2sid_ros.calibration.executor import make_executor
    from vid2sid_ros.rigs import load_rig

    s = ABLATION[rig_name]
    rig = load_rig(rig_name)
    active = None
    if on:
        active = dataclasses.replace(parse_active_learning(
            dict(rig.config.get("calibration") or {}).get("active_learning")), enabled=True)
    return run_benchmark(rig, [method], s["seeds"], budget=s["budget"], iterations=s["iterations"], noise="keypoint",
                         out=out / f"{rig_name}_{'on' if on else 'off'}", progress=False, diagnosis=s["diagnosis"],
                         executor=make_executor("serial"), active_learning=active)


def ablation_rows(rig: str, out: Path, method: str = "reasoner") -> list[dict]:
    """Per seed: mean relative parameter error and holdout MAE (px) off / on, rollouts, trials designed."""
    import json

    arms = {}
    for label in ("off", "on"):
        arms[label] = {r["seed"]: r["methods"][method] for r in json.loads(
            (out / f"{rig}_{label}" / "results.json").read_text())["per_seed"] if method in r.get("methods", {})}
    rows = []
    for seed in sorted(set(arms["off"]) & set(arms["on"])):
        a, b = arms["off"][seed], arms["on"][seed]
        al = b.get("active_learning") or {}
        rows.append({"seed": seed, "off": a["mean_rel_error"], "on": b["mean_rel_error"],
                     "holdout_off": a.get("holdout_mae_px"), "holdout_on": b.get("holdout_mae_px"),
                     "rollouts_off": a["rollouts"], "rollouts_on": b["rollouts"],
                     "design_rollouts": al.get("design_rollouts", 0), "trials": al.get("robot_trials", 0),
                     "warning_before": al.get("warning_before")})
    return rows


def run_ablation(out: Path, rigs: list[str], method: str = "reasoner") -> int:
    """Run (or resume) both arms per rig through the benchmark command, then print the tables."""
    for rig in rigs:
        for on in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ablation_arm(rig, on, out, method)
    for rig in rigs:
        s = ABLATION[rig]
        rows = ablation_rows(rig, out, method)
        print(f"\n{rig}, {method}, {s['seeds']} seeds, budget {s['budget']} rollouts, {s['iterations']} iterations, "
              f"keypoint noise, residual diagnosis {'on' if s['diagnosis'] else 'off'}; error = mean relative "
              "parameter error\n")
        print("| seed | error, off | error, on | holdout MAE (px), off | holdout MAE (px), on | rollouts, off | "
              "rollouts (design), on | trials designed |")
        print("|---|---|---|---|---|---|---|---|")
        fmt = (lambda x: "n/a" if x is None else f"{x:.3g}")
        for r in rows:
            print(f"| {r['seed']} | {100 * r['off']:.1f} % | {100 * r['on']:.1f} % | {fmt(r['holdout_off'])} | "
                  f"{fmt(r['holdout_on'])} | {r['rollouts_off']} | {r['rollouts_on']} ({r['design_rollouts']}) | "
                  f"{r['trials']} |")
        if rows:
            off, on = np.mean([r["off"] for r in rows]), np.mean([r["on"] for r in rows])
            print(f"| mean | {100 * off:.1f} % | {100 * on:.1f} % | | | | | |")
            worse = [r["seed"] for r in rows if r["on"] > r["off"]]
            print(f"\nactive learning {'hurts' if on > off else 'helps'} on average ({100 * off:.1f} % → "
                  f"{100 * on:.1f} %); worse with it in seed(s) {worse or 'none'}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=120)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--after", type=int, default=3)
    ap.add_argument("--proposer", default="least-squares")
    ap.add_argument("--out", default=None, help="run directories (default: a temporary directory)")
    ap.add_argument("--misspecified", action="store_true",
                    help="instead: the finger with a 20 %% heavier middle link, one separating trial (reasoner)")
    ap.add_argument("--case", choices=("hinge", "tied-causes", "ablation"), default="hinge",
                    help="hinge: trading parameters (default); tied-causes: a misspecified rig's indistinguishable "
                         "causes; ablation: the reasoner on the finger and the tentacle, active learning off/on "
                         "(through vid2sid benchmark; cells persist under --out, a rerun resumes)")
    ap.add_argument("--rigs", default="finger,tentacle", help="--case ablation: the rigs")
    ap.add_argument("--noise-px", type=float, default=0.45,
                    help="--case tied-causes: keypoint noise σ of the stand-in real rig, px (default 0.45)")
    args = ap.parse_args(argv)
    if args.case == "ablation":
        return run_ablation(Path(args.out or "runs/bench_active_ablation"), args.rigs.split(","))
    if args.misspecified or args.case == "tied-causes":
        return run_tied_causes(args.seeds, args.noise_px, Path(args.out) if args.out else None)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        rig = load_hinge(out)
        rows = [one_seed(rig, s, args.proposer, args.budget, args.iterations, args.after, out)
                for s in range(args.seeds)]
    print(f"hinge (stiffness, damping, gain free; 0.1 Hz sine), proposer {args.proposer}, budget {args.budget} "
          f"rollouts, {args.iterations} iterations")
    print(f"{'seed':>4} | {'rel. error off':>14} {'warn':>5} {'rollouts':>8} | {'rel. error on':>13} {'warn':>5} "
          f"{'rollouts (design)':>17} {'trials':>6} | ratio")
    for r in rows:
        a, b = r["off"], r["on"]
        print(f"{r['seed']:>4} | {a['error']:>14.3f} {str(a['warning_after']):>5} {a['rollouts']:>8} | "
              f"{b['error']:>13.3f} {str(b['warning_after']):>5} {b['rollouts']:>9} ({b['design_rollouts']:>3}) "
              f"{b['trials']:>10} | {a['error'] / max(b['error'], 1e-12):.1f}x")
    off = np.array([r["off"]["error"] for r in rows])
    on = np.array([r["on"]["error"] for r in rows])
    print(f"mean   | {off.mean():>14.3f} {'':>5} {'':>8} | {on.mean():>13.3f} | {off.mean() / on.mean():.1f}x")
    print(f"median | {np.median(off):>14.3f} {'':>5} {'':>8} | {np.median(on):>13.3f} | "
          f"{np.median(off) / np.median(on):.1f}x")
    print(f"warning at the result: off {sum(r['off']['warning_after'] for r in rows)}/{len(rows)}, "
          f"on {sum(r['on']['warning_after'] for r in rows)}/{len(rows)}; at the start data "
          f"{sum(r['on']['warning_before'] for r in rows)}/{len(rows)}")
    if rows and rows[0]["on"]["rationale"]:
        print("design (seed 0):", rows[0]["on"]["rationale"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
