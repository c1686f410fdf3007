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

Each case runs once per backend, each on its own executor (``cold``: it includes starting the
workers: thread twin copies, forked processes, Ray actors), then ``--repeat`` rounds in which every
backend runs it once, in turn, on the same executors (what every iteration after the first of a
calibration sees): ``warm`` is a backend's fastest round and its median round, ``CPU`` the mean CPU
time of its rounds
(this process, all its threads, plus its finished child processes, ``resource.RUSAGE_CHILDREN``;
Ray's actors are not children and are not counted). Timings depend on what else the machine runs;
the ratios are measured in the same run, the backends taking turns.

    nice .venv/bin/python bench/bench_executor.py --workers 2
    nice .venv/bin/python bench/bench_executor.py --workers 2 --cases iteration --repeat 30
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

from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial  # noqa: E402
from vid2sid_ros.calibration.batch import ObjectiveState, evaluate_batch  # noqa: E402
from vid2sid_ros.calibration.executor import make_executor  # noqa: E402
from vid2sid_ros.calibration.identifiability import check_identifiability  # noqa: E402
from vid2sid_ros.calibration.objective import TrialObjective  # noqa: E402
from vid2sid_ros.rigs import load_rig  # noqa: E402


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _cpu_children() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def _objective(rig_name: str, seed: int = 1, trials: int | None = 1) -> TrialObjective:
    """The rig's calibration objective on its first ``trials`` training trials (None: all of them)."""
    rig = load_rig(rig_name)
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, seed), seed=seed, noise="keypoint")
    return TrialObjective(rig.make_twin(), real.train_excitations[:trials], real.train[:trials], rig.parameters)


def _measure(run, backends: list[str], workers: int, repeat: int) -> list[tuple[float, float, float, float, object]]:
    """Per backend, ``(cold wall, warm wall, median warm wall, warm CPU, result)`` of ``run(executor)`` on a
    fresh executor each:
    the first run of each (cold), then ``repeat`` rounds in which every backend runs once, in turn (the
    backends side by side: a change of the machine's load hits them alike); warm is the fastest of a
    backend's rounds, its CPU the mean over them (a process pool's workers' CPU, counted when they exit, is
    spread over all its runs)."""
    exs = [make_executor(b, workers if b != "serial" else None) for b in backends]
    cold, out = [], []
    for ex in exs:
        t0 = time.perf_counter()
        out.append(run(ex))
        cold.append(time.perf_counter() - t0)
    warm: list[list[float]] = [[] for _ in exs]
    cpu: list[list[float]] = [[] for _ in exs]
    for _ in range(max(repeat, 1)):
        for i, ex in enumerate(exs):
            c0, t1 = _cpu(), time.perf_counter()
            run(ex)
            warm[i].append(time.perf_counter() - t1)
            cpu[i].append(_cpu() - c0)
    kids = []  # a process pool's workers' CPU, counted once they have exited (at close), over all its runs
    for ex in exs:
        k0 = _cpu_children()
        ex.close()
        kids.append((_cpu_children() - k0) / (len(warm[0]) + 1))
    return [(cold[i], min(warm[i]), float(np.median(warm[i])), sum(cpu[i]) / len(cpu[i]) + kids[i], out[i])
            for i in range(len(exs))]


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
    from vid2sid_ros.calibration.proposers.proposer import ProposalContext
    from vid2sid_ros.calibration.proposers.reasoner import Reasoner

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
    from vid2sid_ros.benchmark.run import run_benchmark

    def run(ex):
        with tempfile.TemporaryDirectory() as tmp:  # a fresh directory: nothing resumed
            res = run_benchmark(rig_name, methods, seeds, budget=budget, iterations=iterations, noise="keypoint",
                                out=tmp, progress=False, executor=ex)
        return {(s["seed"], m): {k: v for k, v in r.items() if k != "wall_s"}
                for s in res["per_seed"] for m, r in s["methods"].items()}

    return run


#: (case, backend, serial's warm wall / this backend's, this backend's CPU / serial's, same results) of every
#: non-serial row
_RATIOS: list[tuple[str, str, float, float, float, bool]] = []


def _same(a, b) -> bool:
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    return a == b


def _rows(case: str, run, backends: list[str], workers: int, repeat: int = 3) -> list[str]:
    out = []
    measured = _measure(run, backends, workers, repeat)
    ref = measured[0]
    for b, (cold, warm, median, cpu, res) in zip(backends, measured):
        if b != backends[0]:
            _RATIOS.append((case, f"{b}({workers})", ref[1] / warm, ref[2] / median, cpu / ref[3], _same(res, ref[4])))
        same = "yes" if _same(res, ref[4]) else "NO"
        label = b if b == "serial" else f"{b}({workers})"
        out.append(f"| {case} | {label} | {cold:.2f} | {warm:.3f} | {median:.3f} | {cpu:.3f} | {ref[0] / cold:.2f}x "
                   f"| {ref[1] / warm:.2f}x | {ref[2] / median:.2f}x | {same} |")
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
    print("| case | backend | cold wall s | warm wall s (best) | warm wall s (median) | warm CPU s (mean) "
          "| cold vs serial | warm vs serial (best) | warm vs serial (median) | same results |")
    print("|---|---|---|---|---|---|---|---|---|---|")
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
    for case, backend, wall, median, cpu, same in _RATIOS:
        print(f"{case}: {backend} is {wall:.2f}x as fast as serial in wall time (warm, best; {median:.2f}x "
              f"median) and uses {cpu:.2f}x "
              f"serial's CPU time; results {'identical' if same else 'DIFFERENT'}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
