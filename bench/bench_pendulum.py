"""Benchmark of the real-clip pendulum calibration: speed, and what each modelling choice buys.

Prints:

* tracking speed (frames/s) on the shipped clip and twin rollout time for the whole clip;
* a direct ``scipy.optimize.least_squares`` fit (trust-region reflective, all free
  parameters, residuals = sim − real px on the first 60 %) for model variants —
  the "hand fit" reference of what is achievable — with the holdout MAE on the last 40 %:
  no camera drift (the plain planar damped pendulum), + camera drift, linear vs quadratic
  damping, + radial lens distortion;
* the offline reasoner through the calibration loop at the demo's budget, with and
  without the frame-timing repair (single dropped/repeated frames of the phone).

Run: ``python bench/bench_pendulum.py [--variants 5] [--budget 120] [--iterations 8] [--no-diagnosis]`` (minutes
on 2 cores; the defaults are the figures the docs cite).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration  # noqa: E402
from vid2sid_ros.calibration.objective import TrialObjective, residual_vector  # noqa: E402
from vid2sid_ros.calibration.proposers import make_proposer  # noqa: E402
from vid2sid_ros.io.clip import track_clip  # noqa: E402
from vid2sid_ros.rigs import load_rig  # noqa: E402
from vid2sid_ros.rigs.trials import clip_real_trial  # noqa: E402
from vid2sid_ros.sim.pendulum import estimate_start  # noqa: E402


def lsq_fit(twin, real, params):
    """Direct least squares in normalised coordinates; returns (train MAE, holdout MAE, values, evaluations)."""
    obj = TrialObjective(twin, real.train_excitations, real.train, params)
    hobj = TrialObjective(twin, real.holdout_excitations, real.holdout, params)
    base = params.nominal()
    count = [0]

    def residuals(u):
        count[0] += 1
        ev, _ = obj.evaluate(params.from_unit_vector(u, base))
        return np.nan_to_num(residual_vector(ev.sim, real.train), nan=1e3)

    r = least_squares(residuals, params.to_unit_vector(base), bounds=(0, 1), x_scale="jac", diff_step=1e-4,
                      xtol=1e-10, ftol=1e-10)
    v = params.from_unit_vector(r.x, base)
    return obj.evaluate(v)[0].error_px, hobj.evaluate(v)[0].error_px, v, count[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=5,
                    help="how many of the five model variants to fit by direct least squares (in the order printed)")
    ap.add_argument("--budget", type=int, default=120, help="the reasoner's rollout budget (the demo's: 120)")
    ap.add_argument("--iterations", type=int, default=8, help="the reasoner's iteration limit")
    ap.add_argument("--no-diagnosis", action="store_true",
                    help="leave out the residual diagnosis after each reasoner run (not printed here; its "
                         "diagnostic rollouts are most of the run's time)")
    args = ap.parse_args(argv)
    rig = load_rig("pendulum")
    t0 = time.perf_counter()
    clip = track_clip(rig.trials[0].source["video"]["path"], rig.tracker, thumb_scale=None)
    dt = time.perf_counter() - t0
    T = clip.trajectory.num_frames
    print(f"tracking: {T} frames of {clip.size[0]}x{clip.size[1]} px in {dt:.1f} s ({T / dt:.0f} frames/s, "
          f"decode included); marker valid in {100 * clip.trajectory.valid.mean():.1f} % of frames")
    twin = rig.make_twin()
    real = clip_real_trial(rig, clip)
    for note in real.meta["retimed"]:
        print(f"frame timing: {note}")
    est = estimate_start(real.train[0], rig.parameters)
    params = est.apply(rig.parameters)
    twin.set_parameters(params.nominal())
    t0 = time.perf_counter()
    for _ in range(5):
        twin.rollout(real.holdout_excitations[0])
    print(f"rollout of the whole clip ({T} frames, {twin.model.opt.timestep * 1e3:.1f} ms RK4 steps): "
          f"{(time.perf_counter() - t0) / 5 * 1e3:.0f} ms")
    print(f"start read off the clip: period {est.period_s:.4f} s, amplitude {est.amplitude_rad:.3f} rad, "
          f"length {est.length_small_angle_m:.4f} m (small-angle) / {est.length_m:.4f} m (finite amplitude)")
    hobj = TrialObjective(twin, real.holdout_excitations, real.holdout, params)
    obj = TrialObjective(twin, real.train_excitations, real.train, params)
    print(f"start point: train {obj.evaluate(params.nominal())[0].error_px:.2f} px, holdout "
          f"{hobj.evaluate(params.nominal())[0].error_px:.2f} px")

    drift = ["camera_drift_x", "camera_drift_y"]
    variants = [
        ("planar, no camera drift (hand fit)", params.with_nominal({n: 0.0 for n in drift}).with_frozen(drift)),
        ("+ camera drift (demo model)", params),
        ("+ drift, linear damping only", params.with_nominal({"drag_density": 0.0}).with_frozen(["drag_density"])),
        ("+ drift, quadratic drag only", params.with_nominal({"damping": 0.0}).with_frozen(["damping"])),
        ("+ drift + radial lens distortion", params.with_frozen(free=params.free_names + ["lens_k1"])),
    ]
    print(f"\n{'direct least squares (scipy TRF)':38s} {'train px':>9s} {'holdout px':>11s} {'length m':>9s} "
          f"{'evals':>6s} {'s':>5s}")
    for label, p in variants[:args.variants]:
        t0 = time.perf_counter()
        tr, ho, v, n = lsq_fit(twin, real, p)
        extra = f"  k1={v['lens_k1']:+.4f}" if "lens_k1" in p.free_names else ""
        extra += f"  damping={v['damping']:.2e} drag_density={v['drag_density']:.3f}"
        print(f"{label:38s} {tr:9.3f} {ho:11.3f} {v['length']:9.4f} {n:6d} {time.perf_counter() - t0:5.0f}{extra}")

    print()
    for retime in (True, False):
        r_real = real if retime else clip_real_trial(rig, clip, retime=False)
        p = params if retime else estimate_start(r_real.train[0], rig.parameters).apply(rig.parameters)
        t0 = time.perf_counter()
        res = run_calibration(rig, r_real, make_proposer("reasoner"),
                              CalibrationConfig(iterations=args.iterations, rollout_budget=args.budget,
                                                identifiability=False, final_identifiability=False,
                                                diagnosis=not args.no_diagnosis), None, parameters=p)
        timing = "frame timing repaired" if retime else "frames at k / fps (no repair)"
        print(f"reasoner, budget {args.budget}, {timing}: "
              f"train {res.error_px:.3f} px, holdout {res.holdout_mae_px:.3f} px, length "
              f"{res.values['length']:.4f} m, {res.rollouts} rollouts, {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
