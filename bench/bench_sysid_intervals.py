"""Estimates and 95 % intervals side by side: vid2sid vs mujoco.sysid on mujoco.sysid's own test problems.

The problems of ``mujoco/sysid/tests/test_integration.py`` (``bench/rigs/sysid_style.py``): a
slide-joint spring-mass with its mass free, a 5-joint arm with its five armatures free; joint
positions as the measurement (vid2sid: a ``joint_csv`` trial), the same data, the same
Gaussian noise σ, linear parameterisation on both sides. Per problem:

1. noise-free: relative error of each tool's estimate (vid2sid's reasoner, mujoco.sysid's
   ``optimize(optimizer="mujoco")``), and vid2sid's stop reason;
2. noisy (σ per problem, one seed): each tool's estimate and stated 95 % interval
   (vid2sid: the final identifiability check; mujoco.sysid: ``calculate_intervals`` at its
   optimum), mujoco.sysid both as shipped (each sensor's residual divided by ``‖measured‖/√2``)
   and with ``sensor_weights`` that cancel that division (the same least-squares problem as
   vid2sid's); the differences in units of mujoco.sysid's interval width; and the half-width
   each estimator should state for this noise (``reference_half_widths``: the linearised
   covariance with the known σ, a sandwich for the weighted one).

    nice .venv/bin/python bench/bench_sysid_intervals.py                 # both problems, full length
    nice .venv/bin/python bench/bench_sysid_intervals.py --problem arm --nstep 300 --seed 1

Prints one markdown table per part (the tables in docs/intervals.md). ROS is not used.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "69")
os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from rigs import sysid_style as S  # noqa: E402

#: the noise σ of each problem's noisy comparison (m for the slide, rad for the arm): ~1 % of the motion
SIGMA = {"spring_mass": 1e-3, "arm": 1e-3}


def noise_free(problem: S.Problem, nstep: int | None, work: Path) -> list[str]:
    """Markdown rows: per parameter, the relative error of both tools on noise-free data."""
    t, u, q = S.simulate(problem, problem.truth, nstep)
    ours = S.run_vid2sid(S.write_rig(problem, work / f"{problem.name}_clean", t, u, q))
    ms = S.run_mujoco_sysid(problem, t, u, q)
    rows = []
    for n, v in problem.truth.items():
        rows.append(f"| {problem.name} | {n} | {v:g} | {abs(ours['values'][n] - v) / v:.1e} | "
                    f"{abs(ms['values'][n] - v) / v:.1e} | {ours['stopped'][:40]} |")
    return rows


def noisy(problem: S.Problem, nstep: int | None, seed: int, work: Path) -> list[str]:
    """Markdown rows: per parameter, both tools' estimate and interval on the same noisy data."""
    sigma = SIGMA[problem.name]
    t, u, q = S.simulate(problem, problem.truth, nstep)
    qn = q + sigma * np.random.default_rng(seed).standard_normal(q.shape)
    ours = S.run_vid2sid(S.write_rig(problem, work / f"{problem.name}_noisy", t, u, qn, noise=sigma))
    plain = S.run_mujoco_sysid(problem, t, u, qn, normalise=False)
    shipped = S.run_mujoco_sysid(problem, t, u, qn, normalise=True) if len(problem.joints) > 1 else plain
    ref_plain = S.reference_half_widths(plain["jac"], plain["row_weight"], sigma)
    ref_shipped = S.reference_half_widths(shipped["jac"], shipped["row_weight"], sigma)
    rows = []
    for i, n in enumerate(problem.truth):
        lo, hi = ours["interval"][n]
        a, b = plain["interval"][n]
        w = b - a
        row = (f"| {problem.name} | {n} | {problem.truth[n]:g} | {ours['values'][n]:.6g} [{lo:.6g}, {hi:.6g}] | "
               f"{plain['values'][n]:.6g} [{a:.6g}, {b:.6g}] | {(ours['values'][n] - plain['values'][n]) / w:+.3f} | "
               f"{(lo - a) / w:+.3f} / {(hi - b) / w:+.3f} | {(hi - lo) / w:.3f} | {0.5 * w / ref_plain[i]:.3f} | ")
        if shipped is plain:
            row += "(one sensor: the same) | |"
        else:
            c, d = shipped["interval"][n]
            row += (f"{shipped['values'][n]:.6g} [{c:.6g}, {d:.6g}] | "
                    f"{shipped['half'][n] / ref_shipped[i]:.3f} |")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="spring_mass,arm", help="comma-separated: spring_mass, arm")
    ap.add_argument("--nstep", type=int, default=None, help="samples (physics steps); default the tests' duration")
    ap.add_argument("--seed", type=int, default=0, help="noise seed")
    a = ap.parse_args(argv)
    names = [p for p in a.problem.split(",") if p]
    for p in names:
        if p not in S.PROBLEMS:
            ap.error(f"--problem: unknown {p!r}; expected one of {', '.join(S.PROBLEMS)}")
    if a.nstep is not None and a.nstep < 50:
        ap.error(f"--nstep: expected >= 50, got {a.nstep}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("Noise-free: relative error of the estimate\n")
        print("| problem | parameter | truth | vid2sid | mujoco.sysid | vid2sid stopped |\n|---|---|---|---|---|---|")
        for p in names:
            print("\n".join(noise_free(S.PROBLEMS[p](), a.nstep, work)))
        print(f"\nNoisy (σ = {', '.join(f'{SIGMA[p]:g} {S.PROBLEMS[p]().joint_unit} ({p})' for p in names)}, "
              f"seed {a.seed}): estimate [95 % interval]; differences in units of mujoco.sysid's interval width "
              "(same residual); stated / should-state half-width for this noise\n")
        print("| problem | parameter | truth | vid2sid | mujoco.sysid, same residual (rad or m) | Δ estimate | "
              "Δ lower / Δ upper | width ratio | mujoco.sysid stated / should | mujoco.sysid as shipped "
              "(per-sensor normalised) | its stated / should |\n|" + "---|" * 11)
        for p in names:
            print("\n".join(noisy(S.PROBLEMS[p](), a.nstep, a.seed, work)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
