"""Budget sweep against the strongest peers: reasoner vs least-squares vs mujoco-sysid (and any others).

For each budget (default 20, 40, 80 rollouts) runs the sim2sim benchmark of ``--rig`` with
the given methods and seeds (library call, the protocol of ``vid2sid benchmark sim2sim``)
and prints one Markdown table: mean relative parameter error (± std over seeds) and holdout
MAE per method and budget. Runs are resumable (one benchmark directory per budget). Budgets run
in the order given (``--budgets 40,20`` measures 40 first); the table is in increasing budget.
``--jobs N`` runs up to N budgets at once in separate processes (each budget is an independent
benchmark with its own seeds and directory, so the figures do not depend on it; default 1).

    nice .venv/bin/python bench/bench_peers.py --rig finger --seeds 5 --out runs/bench_peers
    nice .venv/bin/python bench/bench_peers.py --rig tentacle --seeds 5 --budgets 40,20

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
from vid2sid_ros.calibration.loop import CalibrationError  # noqa: E402


def _run(job: tuple) -> dict:
    """One budget's benchmark: ``(rig, methods, seeds, budget, out, misspecify)`` -> ``results.json`` content."""
    rig, methods, seeds, budget, out, misspecify = job
    return run_benchmark(rig, methods, seeds, budget=budget, out=Path(out), progress=False, misspecify=misspecify)


def _refusal(rig: str, methods: list[str], budget: int, misspecify: str | None) -> str | None:
    """Why the sweep cannot run, checked before any budget runs (one line), or None.

    The rig loads, every method is a registered proposer that starts, the smallest ``budget``
    pays for one evaluation (one rollout per training excitation), the misspecification parses
    and the rig can express it (was: a traceback, from the first budget's run or, for a later
    budget too small, after the earlier budgets had run).
    """
    from vid2sid_ros.benchmark.misspecification import check_misspecification, parse_misspecify
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.rigs import load_rig

    try:
        rig_obj = load_rig(rig)
        for m in methods:
            make_proposer(m)
        n_train = len(rig_obj.excitations.get("train", ()))
        if budget < n_train:
            return (f"--budgets: {budget} rollouts cannot pay for one evaluation of rig '{rig_obj.name}' "
                    f"({n_train} training excitations = {n_train} rollouts); use budgets >= {n_train}")
        check_misspecification(rig_obj, parse_misspecify(misspecify))
    except KeyError as err:  # UnknownRigError, UnknownProposerError
        return str(err.args[0]) if err.args else repr(err)
    except (ValueError, RuntimeError, ImportError) as err:  # a bad rig config, a proposer that cannot start, --misspecify
        return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rig", default="finger")
    ap.add_argument("--methods", default="reasoner,least-squares,mujoco-sysid")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budgets", default="20,40,80")
    ap.add_argument("--misspecify", default=None)
    ap.add_argument("--out", default="runs/bench_peers")
    ap.add_argument("--jobs", type=int, default=1, help="budgets run at once, one process each (default 1)")
    a = ap.parse_args(argv)
    methods = list(dict.fromkeys(m.strip() for m in a.methods.split(",") if m.strip()))
    if not methods:
        ap.error(f"--methods: expected comma-separated method names, got {a.methods!r}")
    try:
        budgets = [int(b) for b in a.budgets.split(",")]
    except ValueError:
        ap.error(f"--budgets: expected comma-separated integers, got {a.budgets!r}")
    if min(budgets) < 1 or len(set(budgets)) != len(budgets):
        ap.error(f"--budgets: expected distinct integers >= 1, got {a.budgets!r}")
    if a.seeds < 1:
        ap.error(f"--seeds: expected an integer >= 1, got {a.seeds}")
    if a.jobs < 1:
        ap.error(f"--jobs: expected an integer >= 1, got {a.jobs}")
    err = _refusal(a.rig, methods, min(budgets), a.misspecify)
    if err:
        print(f"bench_peers: {err}", file=sys.stderr)
        return 2
    table: dict[str, dict[int, str]] = {m: {} for m in methods}
    runs = [(a.rig, methods, a.seeds, b, str(Path(a.out) / f"{a.rig}_{b}"), a.misspecify) for b in budgets]
    try:
        if a.jobs > 1 and len(runs) > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=min(a.jobs, len(runs))) as pool:
                results = list(pool.map(_run, runs))
        else:
            results = [_run(r) for r in runs]
    except CalibrationError as err:  # e.g. an --out budget directory holding a benchmark with other settings
        print(f"bench_peers: {err}", file=sys.stderr)
        return 2
    for b, res in sorted(zip(budgets, results), key=lambda br: br[0]):
        for m in methods:
            r = res["methods"][m]
            h = r["holdout_mae"]
            table[m][b] = (f"{100 * r['mean_rel_param_error']:.2f} % (±{100 * r['std_rel_param_error_over_seeds']:.2f}),"
                           f" holdout {'–' if h is None else format(h, '.2f')}")
    lines = [f"{a.rig}, {a.seeds} seeds" + (f", misspecified {a.misspecify}" if a.misspecify else "") + ":", "",
             "| method | " + " | ".join(f"{b} rollouts" for b in sorted(budgets)) + " |", "|---|" + "---|" * len(budgets)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(table[m][b] for b in sorted(budgets)) + " |")
    text = "\n".join(lines)
    print(text)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{a.rig}_sweep.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
