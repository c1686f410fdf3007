"""The tentacle (PyElastica) twin on 1 and W workers: serial vs a process pool vs a local Ray, in one run.

Prints Markdown tables (wall and CPU time, ratio to serial, whether the results equal serial's):

- ``overhead``: what the twin adds to PyElastica: CPU time of one training rollout through the twin
  (``TentacleTwin.rollout``: building the simulator, the tendon couple at every substep, the
  per-command-period checks, keypoint extraction) against PyElastica's own ``PositionVerlet.step`` loop
  over the same simulator for the same number of substeps with the command held at 0 (the tendon then
  adds nothing; the kernels' cost does not depend on the state); best of ``max(15, --repeat)``, the two taking turns;
- ``FD Jacobian``: the identifiability check's central-difference Jacobian with its error estimate
  (4n probes) at the nominal point, every training trial;
- ``CMA-ES generation``: one generation of CMA-ES (the ``cmaes`` library as the ``cmaes`` baseline sets
  it up: normalised coordinates, sigma0 0.25, default population ``4 + floor(3 ln n)``, seeded): the
  population asked, evaluated as one batch on the executor
  (:func:`~vid2sid_ros.calibration.batch.evaluate_batch`), told; "same results" compares the errors and
  the distribution's mean afterwards;
- ``sweep`` (``--cases sweep``): the sim2sim benchmark, ``--seeds`` x ``--methods`` at ``--budget``
  rollouts per cell, serial vs pool(W) vs ray(W), with the peak resident memory of each worker
  (``VmHWM`` of each pool process / Ray actor; for serial this process's ``ru_maxrss``).

Ray is a private local Ray bound to 127.0.0.1 (usage statistics off, no dashboard), started by the
executor and stopped at the end. Each FD/CMA-ES row runs once cold (workers started: forked processes, Ray
actors importing PyElastica and loading its compiled kernels) and ``--repeat`` times warm, the backends
taking turns (a change in the machine's load falls on all of them); the best warm wall time is compared.
CPU time is counted in every process (this one, each pool process and Ray actor, from ``/proc``). Wall-time
ratios depend on what else the machine runs; the CPU-bound ratio (serial's CPU over this process's plus the
busiest worker's, warm runs) does not: it is the speedup with a free core per worker.

    nice .venv/bin/python bench/bench_tentacle_scaling.py --workers 2
    nice .venv/bin/python bench/bench_tentacle_scaling.py --cases sweep --budget 10 --iterations 3
    .venv/bin/python bench/bench_tentacle_scaling.py --tiny      # a smoke run (seconds)
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
os.environ.setdefault("ROS_DOMAIN_ID", "114")
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


def _objective(rig_name: str, seed: int, trials: int | None, duration_s: float | None) -> TrialObjective:
    """The rig's calibration objective on its first ``trials`` training trials (None: all), each cut to
    ``duration_s`` seconds when given."""
    rig = load_rig(rig_name)
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, seed), seed=seed, noise="keypoint")
    excs, trajs = real.train_excitations[:trials], real.train[:trials]
    if duration_s is not None:
        import dataclasses

        excs = [dataclasses.replace(e, values=e.values[:max(2, int(round(duration_s * e.rate)))]) for e in excs]
        trajs = [t.slice(0, e.num_steps) for t, e in zip(trajs, excs)]
    return TrialObjective(rig.make_twin(), excs, trajs, rig.parameters)


def overhead_rows(obj: TrialObjective, repeat: int) -> None:
    """CPU time of the twin's rollout against PyElastica's own stepper loop over the same simulator."""
    twin, exc = obj.twin, obj.excitations[0]
    twin.set_parameters(twin.parameters.nominal())
    twin.rollout(exc)
    n = exc.num_steps * twin._substeps

    def ours() -> None:
        twin.rollout(exc)

    def pyelastica() -> None:  # the same simulator stepped by PyElastica alone; command 0: the tendon adds nothing
        twin.reset(exc.period)
        sim, stepper, dt = twin._sim, twin._stepper, np.float64(twin._dt)
        t = np.float64(0.0)
        for _ in range(n):
            t = stepper.step(sim, t, dt)

    times: dict = {ours: [], pyelastica: []}
    for _ in range(repeat):  # taking turns, so that a change in the machine's load falls on both
        for f in times:
            c = time.process_time()
            f()
            times[f].append(time.process_time() - c)
    a, b = min(times[ours]), min(times[pyelastica])
    print(f"| {exc.name}, {exc.num_steps} commands x {twin._substeps} substeps | {a:.3f} | {b:.3f} | "
          f"{a / n * 1e6:.1f} | {b / n * 1e6:.1f} | {a / b:.3f}x |", flush=True)


def _jacobian(obj: TrialObjective):
    state = ObjectiveState(obj)  # one state for every run, as a calibration keeps it: the workers are reused

    def run(ex):
        obj.clear_cache()  # every probe rolls out
        rep = check_identifiability(obj, obj.parameters.nominal(), warn=False, executor=ex, executor_state=state)
        return [np.asarray(rep.singular_values), rep.sensitivity_px]

    return run


def _cma_generation(obj: TrialObjective, seed: int = 0):
    from cmaes import CMA

    params = obj.parameters
    names = params.free_names
    nominal = params.nominal()
    mean = np.clip([params[n].to_unit(nominal[n]) for n in names], 1e-6, 1 - 1e-6)
    state = ObjectiveState(obj)

    def run(ex):
        obj.clear_cache()
        es = CMA(mean=np.asarray(mean, float), sigma=0.25, bounds=np.array([[0.0, 1.0]] * len(names)), seed=seed)
        xs = [es.ask() for _ in range(es.population_size)]
        pts = [{**nominal, **{n: params[n].from_unit(float(x[j])) for j, n in enumerate(names)}} for x in xs]
        evs = evaluate_batch(obj, pts, ex, state=state)
        errs = [float(e.error_px) for e in evs]
        es.tell([(x, e) for x, e in zip(xs, errs)])
        return [np.asarray(errs), np.asarray(es.mean)]

    return run


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b, equal_nan=True)
    return a == b


#: (case, backend, warm wall ratio, same results, CPU-bound ratio or None)
RATIOS: list[tuple[str, str, float, bool, float | None]] = []


def timed_rows(case: str, run, backends: list[str], workers: int, repeat: int) -> None:
    """One row per backend: a cold run each, then ``repeat`` rounds of one warm run per backend, the backends
    interleaved (so that a change in the machine's load falls on all of them alike); the best warm wall.

    CPU is counted in every process (this one and each worker), so it does not depend on the load: the
    ``CPU-bound`` ratio is serial's CPU over (this process's + the busiest worker's) CPU of a warm run, the
    speedup the backend reaches when each worker has a core of its own."""
    exs = {b: make_executor(b, None if b == "serial" else workers) for b in backends}
    cold, res = {}, {}
    warm: dict[str, list[float]] = {b: [] for b in backends}
    cpu: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}  # (total, caller + busiest worker)

    def once(b: str) -> tuple[float, object]:
        pids = _worker_pids(exs[b])
        w0 = {p: _proc_cpu(p) for p in pids}
        c0, t0 = _cpu(), time.perf_counter()
        out = run(exs[b])
        wall, mine = time.perf_counter() - t0, _cpu() - c0
        pids = set(pids) | set(_worker_pids(exs[b]))
        per = [_proc_cpu(p) - w0.get(p, 0.0) for p in pids]
        cpu[b].append((mine + sum(per), mine + max(per, default=0.0)))
        return wall, out

    for b in backends:
        cold[b], res[b] = once(b)
        cpu[b].clear()  # the cold run's CPU includes starting the workers
    for r in range(repeat):
        for b in backends[r % len(backends):] + backends[:r % len(backends)]:
            wall, out = once(b)
            warm[b].append(wall)
            if not _same(out, res[b]):
                res[b] = None  # not even reproducible on its own backend
    for ex in exs.values():
        ex.close()
    best = {b: min(warm[b]) if warm[b] else cold[b] for b in backends}
    crit = {b: min(c[1] for c in cpu[b]) if cpu[b] else float("nan") for b in backends}
    total = {b: min(c[0] for c in cpu[b]) if cpu[b] else float("nan") for b in backends}
    ref = backends[0]
    for b in backends:
        same = res[b] is not None and _same(res[b], res[ref])
        label = b if b == "serial" else f"{b}({workers})"
        if b != ref:
            RATIOS.append((case, label, best[ref] / best[b], same, crit[ref] / crit[b]))
        print(f"| {case} | {label} | {cold[b]:.2f} | {best[b]:.2f} | {best[ref] / best[b]:.2f}x | {total[b]:.2f} | "
              f"{crit[b]:.2f} | {crit[ref] / crit[b]:.2f}x | {'yes' if same else 'NO'} |", flush=True)


def _worker_pids(ex) -> list[int]:
    """Process ids of the executor's live workers (none for serial)."""
    if ex.backend == "pool":
        return list((getattr(ex._procs, "_processes", None) or {}).keys())
    if ex.backend == "ray" and ex._actors:
        import ray

        return list(ray.get([a.pid.remote() for a in ex._actors]))
    return []


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (``/proc/PID/stat``), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(ex) -> list[float]:
    """Peak resident memory (VmHWM) of each live worker, MB; this process's ru_maxrss for serial."""
    if ex.backend == "serial":
        return [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0]
    if ex.backend == "pool":
        pids = list((getattr(ex._procs, "_processes", None) or {}).keys())
    else:
        import ray

        pids = ray.get([a.pid.remote() for a in ex._actors])
    out = []
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]) / 1024.0)
        except OSError:
            pass
    return out


def sweep_rows(rig: str, seeds: int, methods: list[str], budget: int, iterations: int, backends: list[str],
               workers: int, diagnosis: bool = True) -> None:
    from vid2sid_ros.benchmark.run import run_benchmark

    ref = None
    for b in backends:
        ex = make_executor(b, None if b == "serial" else workers)
        with tempfile.TemporaryDirectory() as tmp:  # a fresh directory: nothing resumed
            c0, t0 = _cpu(), time.perf_counter()
            res = run_benchmark(rig, methods, seeds, budget=budget, iterations=iterations, noise="keypoint",
                                out=tmp, progress=False, executor=ex, diagnosis=diagnosis)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        rss = _peak_rss_mb(ex)
        per = [_proc_cpu(p) for p in _worker_pids(ex)]  # the workers live for the whole sweep
        cpu += sum(per)
        ex.close()
        cells = {(s["seed"], m): {k: v for k, v in r.items() if k != "wall_s"}
                 for s in res["per_seed"] for m, r in s["methods"].items()}
        if ref is None:
            ref = (wall, cells)
        same = cells == ref[1] and not res["failed_cells"]
        label = b if b == "serial" else f"{b}({workers})"
        if b != "serial":
            RATIOS.append((f"sweep ({rig})", label, ref[0] / wall, same, None))
        print(f"| {rig}, {seeds} seeds x {len(methods)} methods, budget {budget}, {iterations} iterations"
              f"{'' if diagnosis else ', no diagnosis'} | {label} | {wall:.1f} | {cpu:.1f} | "
              f"{ref[0] / wall:.2f}x | {max(rss):.0f} ({len(rss)} process{'es' if len(rss) > 1 else ''}) | "
              f"{'yes' if same else 'NO'} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rig", default="tentacle")
    ap.add_argument("--cases", default="overhead,jacobian,cmaes",
                    help="comma-separated subset of overhead, jacobian, cmaes, sweep")
    ap.add_argument("--backends", default="serial,pool,ray", help="serial first; ray only when installed")
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per FD/CMA-ES row (the fastest is printed)")
    ap.add_argument("--seeds", type=int, default=5, help="sweep: seeds")
    ap.add_argument("--methods", default="reasoner,random,nelder-mead,golden-cd,bo,cmaes", help="sweep: methods")
    ap.add_argument("--budget", type=int, default=40, help="sweep: rollouts per cell (the benchmark's default 40)")
    ap.add_argument("--iterations", type=int, default=10, help="sweep: reasoner iterations per cell")
    ap.add_argument("--no-diagnosis", action="store_true", help="sweep: skip each cell's residual diagnosis")
    ap.add_argument("--duration", type=float, default=None, help="cut each training trial to this many seconds")
    ap.add_argument("--tiny", action="store_true", help="smoke size: 0.3 s trials, the toy rig's sweep")
    a = ap.parse_args(argv)
    cases = set(a.cases.split(","))
    backends = a.backends.split(",")
    sweep_rig = a.rig
    if a.tiny:
        a.duration, a.repeat, a.seeds, a.methods, a.budget, a.iterations = 0.3, 1, 1, "random,cmaes", 6, 2
        sweep_rig = "toy"
    try:
        import ray  # noqa: F401
    except ImportError:
        if "ray" in backends:
            print("Ray is not installed (pip install -r requirements-ray.txt): no ray rows")
            backends.remove("ray")
    print(f"{len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.1f} (other work on this machine "
          "slows every row alike)")
    obj = _objective(a.rig, 1, None, a.duration)
    obj.evaluate(obj.parameters.nominal())  # load (or compile) PyElastica's numba kernels before timing
    if "overhead" in cases:
        print("\n| rollout | twin CPU s | PyElastica stepper loop CPU s | twin us/substep | PyElastica us/substep "
              "| twin / PyElastica |\n|---|---|---|---|---|---|")
        overhead_rows(obj, max(15, a.repeat))
    if cases & {"jacobian", "cmaes"}:
        print("\n| case | backend | cold wall s | warm wall s (best) | wall vs serial | CPU s, all processes | "
              "CPU s, caller + busiest worker | CPU-bound vs serial | same results |\n|---|---|---|---|---|---|---|---|---|")
        n = len(obj.parameters.free_names)
        if "jacobian" in cases:
            timed_rows(f"FD Jacobian ({a.rig}, {4 * n} probes x {len(obj.excitations)} trials)", _jacobian(obj),
                       backends, a.workers, a.repeat)
        if "cmaes" in cases:
            pop = 4 + int(np.floor(3 * np.log(n)))
            timed_rows(f"CMA-ES generation ({a.rig}, population {pop} x {len(obj.excitations)} trials)",
                       _cma_generation(obj), backends, a.workers, a.repeat)
    if "sweep" in cases:
        print("\n| sweep | backend | wall s | CPU s, all processes | vs serial "
              "| peak RSS per worker MB (max) | same cells |\n|---|---|---|---|---|---|---|")
        sweep_rows(sweep_rig, a.seeds, a.methods.split(","), a.budget, a.iterations, backends, a.workers,
                   diagnosis=not a.no_diagnosis)
    print()
    for case, backend, ratio, same, bound in RATIOS:
        print(f"{case}: {backend} is {ratio:.2f}x as fast as serial in wall time"
              + (f" ({bound:.2f}x CPU-bound: each worker on a core of its own)" if bound is not None else "")
              + f"; results {'identical' if same else 'DIFFERENT'}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} CPUs")
    return 0 if all(r[3] for r in RATIOS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
