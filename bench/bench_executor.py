"""The rollout executor side by side: serial against threads / a process pool / Ray, in one run.

Prints one Markdown table of wall and CPU time per case and backend, the ratio to serial, and
whether the results are identical to serial:

- ``reasoner iteration``: one whole iteration of the reasoner (``Reasoner.propose``) from the
  nominal parameters of the ``--fd-rig`` (default finger) on all its training trials, the first of a
  calibration (no sensitivities yet): its finite-difference columns, its step and line-search
  evaluations (``--iteration-budget`` rollouts spread over ``--iteration-of`` iterations, as in the
  first iteration of ``vid2sid calibrate config/calibrate_finger.yaml``),
  any re-measurement its convergence test asks for, and the signatures and residuals it extracts from
  every rollout; the evaluations go through the calibration loop's callbacks
  (:func:`~vid2sid_ros.calibration.batch.evaluate_batch`, one point or several). serial vs threads(W)
  (a MuJoCo twin: every rollout of a batch, or a single point's trials, in one ``mujoco.rollout`` call
  on W C++ threads). Its result is the proposal (values, rationale) and every evaluation's error;
- ``reasoner FD``: the same iteration's first finite-difference columns alone (one forward probe per
  free parameter on every training trial);
- ``identifiability``: the identifiability check's central-difference Jacobian with its error
  estimate (4n probes) on the same rig: serial vs threads(W);
- ``FD Jacobian``: the identifiability Jacobian on ``--pool-rig`` (default tentacle):
  serial vs pool(W) vs ray-local(W) (Ray only when installed);
- ``sweep``: a small sim2sim benchmark (``--sweep-rig``, seeds x methods) serial vs pool(W).

Each backend row runs its case ``--repeat`` + 1 times with the same executor: ``cold`` is the
first (it includes starting the workers: thread twin copies, forked processes, Ray actors),
``warm`` the fastest of the others, which reuse them (what every iteration after the first of a
calibration sees). CPU is this process plus its finished child
processes (``resource.RUSAGE_CHILDREN``; Ray's actors are not children and are not counted).
Timings depend on what else the machine runs; the ratios are measured in the same run.

    nice .venv/bin/python bench/bench_executor.py --workers 2
    nice .venv/bin/python bench/bench_executor.py --workers 2 --cases iteration --repeat 6
    .venv/bin/python bench/bench_executor.py --tiny          # a smoke run (toy rig, seconds)
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "109")
os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from vid2sid_ros.calibration.batch import ObjectiveState, evaluate_batch  # noqa: E402
from vid2sid_ros.calibration.executor import make_executor  # noqa: E402
from vid2sid_ros.calibration.identifiability import check_identifiability  # noqa: E402
from vid2sid_ros.calibration.objective import TrialObjective  # noqa: E402
from vid2sid_ros.calibration.sim2sim import draw_ground_truth, make_sim2sim_trial  # noqa: E402
from vid2sid_ros.rigs import load_rig  # noqa: E402


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _objective(rig_name: str, seed: int = 1, trials: int | None = 1) -> TrialObjective:
    """The rig's calibration objective on its first ``trials`` training trials (None: all of them)."""
    rig = load_rig(rig_name)
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, seed), seed=seed, noise="keypoint")
    return TrialObjective(rig.make_twin(), real.train_excitations[:trials], real.train[:trials], rig.parameters)


def _measure(run, backend: str, workers: int, repeat: int):
    """(cold wall, warm wall, CPU per run, result) of ``run(executor)`` on a fresh executor: the first run
    (cold), then the fastest of ``repeat`` more (warm); CPU is the mean over all runs."""
    ex = make_executor(backend, workers if backend != "serial" else None)
    c0, t0 = _cpu(), time.perf_counter()
    out = run(ex)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t1 = time.perf_counter()
        run(ex)
        warm.append(time.perf_counter() - t1)
    ex.close()
    return cold, min(warm), (_cpu() - c0) / (repeat + 1), out


def _fd_probes(obj: TrialObjective):
    params = obj.parameters
    base = params.nominal()
    pts = []
    for name in params.free_names:
        v = dict(base)
        v[name] = params[name].from_unit(min(params[name].to_unit(base[name]) + 0.01, 1.0))
        pts.append(v)
    state = ObjectiveState(obj)

    def run(ex):
        obj.clear_cache()  # every measurement rolls out (no probe served from an earlier one)
        evs = evaluate_batch(obj, pts, ex, state=state)
        return [np.concatenate([np.asarray(t.keypoints).ravel() for t in e.sim]) for e in evs]

    return run


def _iteration(obj: TrialObjective, budget: int, iterations: int):
    """One whole reasoner iteration (module docstring) on ``obj`` from its nominal point, with a budget of
    ``budget`` rollouts for ``iterations`` iterations; returns (proposed values, rationale, every evaluation's
    (values, error, rollouts))."""
    from vid2sid_ros.calibration.proposer import ProposalContext
    from vid2sid_ros.calibration.reasoner import Reasoner

    state = ObjectiveState(obj)
    real = obj.real
    excitations = tuple(obj.excitations)

    def run(ex):
        obj.clear_cache()  # every iteration rolls out afresh (nothing served from an earlier run)
        seen = []

        def evaluate(v):
            ev = evaluate_batch(obj, [v], ex, state=state)[0]
            seen.append(ev)
            return ev

        def evaluate_many(points):
            evs = evaluate_batch(obj, points, ex, state=state)
            seen.extend(evs)
            return evs

        start = obj.parameters.nominal()
        ctx = ProposalContext(parameters=obj.parameters, current=dict(start), current_eval=evaluate(start),
                              real=real, evaluate=evaluate, evaluate_many=evaluate_many,
                              rollouts_remaining=budget, iterations_remaining=iterations, excitations=excitations)
        p = Reasoner().propose(ctx)
        return (p.values, p.rationale, [(e.values, e.error_px, e.rollouts) for e in seen])

    return run


def _jacobian(obj: TrialObjective):
    def run(ex):
        obj.clear_cache()
        rep = check_identifiability(obj, obj.parameters.nominal(), warn=False, executor=ex)
        return rep.singular_values, rep.sensitivity_px

    return run


def _sweep(rig_name: str, seeds: int, methods: list[str], budget: int, iterations: int):
    from vid2sid_ros.calibration.benchmark import run_benchmark

    def run(ex):
        with tempfile.TemporaryDirectory() as tmp:  # a fresh directory: nothing resumed
            res = run_benchmark(rig_name, methods, seeds, budget=budget, iterations=iterations, noise="keypoint",
                                out=tmp, progress=False, executor=ex)
        return {(s["seed"], m): {k: v for k, v in r.items() if k != "wall_s"}
                for s in res["per_seed"] for m, r in s["methods"].items()}

    return run


#: (case, backend, serial's warm wall / this backend's, this backend's CPU / serial's, same results) of every
#: non-serial row
_RATIOS: list[tuple[str, str, float, float, bool]] = []


def _same(a, b) -> bool:
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    return a == b


def _rows(case: str, run, backends: list[str], workers: int, repeat: int = 3) -> list[str]:
    ref = None
    out = []
    for b in backends:
        cold, warm, cpu, res = _measure(run, b, workers, repeat)
        if ref is None:
            ref = (cold, warm, res, cpu)
        else:
            _RATIOS.append((case, f"{b}({workers})", ref[1] / warm, cpu / ref[3], _same(res, ref[2])))
        same = "yes" if _same(res, ref[2]) else "NO"
        label = b if b == "serial" else f"{b}({workers})"
        out.append(f"| {case} | {label} | {cold:.2f} | {warm:.2f} | {cpu:.2f} | {ref[0] / cold:.2f}x "
                   f"| {ref[1] / warm:.2f}x | {same} |")
        print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fd-rig", default="finger", help="rig of the reasoner-FD and identifiability rows (MuJoCo)")
    ap.add_argument("--pool-rig", default="tentacle", help="rig of the pool/Ray Jacobian row")
    ap.add_argument("--sweep-rig", default="finger")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--methods", default="reasoner,random")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per row (the fastest is printed)")
    ap.add_argument("--tiny", action="store_true", help="smoke size: toy rig everywhere, one seed, tiny budget")
    ap.add_argument("--iteration-budget", type=int, default=38,
                    help="rollouts left at the reasoner iteration (default: config/calibrate_finger.yaml's 40 less "
                         "the start point's evaluation)")
    ap.add_argument("--iteration-of", type=int, default=10,
                    help="iterations left including the reasoner's (default: calibrate_finger.yaml's 10); with "
                         "--iteration-budget, its step quota")
    ap.add_argument("--cases", default="iteration,fd,identifiability,jacobian,sweep",
                    help="comma-separated subset of iteration, fd, identifiability, jacobian, sweep")
    a = ap.parse_args(argv)
    cases = set(a.cases.split(","))
    if a.tiny:
        a.fd_rig = a.pool_rig = a.sweep_rig = "toy"
        a.seeds, a.methods, a.budget, a.iterations, a.repeat = 1, "random", 6, 2, 1
    try:
        import ray  # noqa: F401

        ray_ok = not a.tiny
    except ImportError:
        ray_ok = False
    print(f"{len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.1f} (other work on this machine "
          "slows every row alike)")
    print("| case | backend | cold wall s | warm wall s (best) | CPU s per run | cold vs serial | warm vs serial "
          "| same results |")
    print("|---|---|---|---|---|---|---|---|")
    fd = _objective(a.fd_rig, trials=None)  # a reasoner iteration rolls out every training trial
    if "iteration" in cases:
        _rows(f"reasoner iteration ({a.fd_rig}, {len(fd.parameters.free_names)} parameters x {fd.cost} trials)",
              _iteration(fd, a.iteration_budget, a.iteration_of), ["serial", "threads"], a.workers, a.repeat)
    if "fd" in cases:
        _rows(f"reasoner FD ({a.fd_rig}, {len(fd.parameters.free_names)} columns x {fd.cost} trials)", _fd_probes(fd),
              ["serial", "threads"], a.workers, a.repeat)
    if "identifiability" in cases:
        _rows(f"identifiability ({a.fd_rig})", _jacobian(fd), ["serial", "threads"], a.workers, a.repeat)
    if "jacobian" in cases:
        pool = _objective(a.pool_rig)
        pool.evaluate(pool.parameters.nominal())  # compile PyElastica's numba kernels before timing anything
        _rows(f"FD Jacobian ({a.pool_rig})", _jacobian(pool), ["serial", "pool"] + (["ray"] if ray_ok else []),
              a.workers, a.repeat)
    if "sweep" in cases:
        _rows(f"sweep ({a.sweep_rig}, {a.seeds} seeds x {a.methods})",
              _sweep(a.sweep_rig, a.seeds, a.methods.split(","), a.budget, a.iterations), ["serial", "pool"],
              a.workers, 1)
    print()
    for case, backend, wall, cpu, same in _RATIOS:
        print(f"{case}: {backend} is {wall:.2f}x as fast as serial in wall time (warm) and uses {cpu:.2f}x "
              f"serial's CPU time; results {'identical' if same else 'DIFFERENT'}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
