"""``vid2sid benchmark sim2sim``: recover hidden ground truth with every method at the same budget.

Usage::

    vid2sid benchmark sim2sim --rig finger --methods reasoner,random,nelder-mead,golden-cd,bo,cmaes \\
        --seeds 5 --budget 40 --out runs/bench_finger

Writes ``OUT/results.json``, ``OUT/results.md`` and ``OUT/report.html`` (protocol and metrics: see
:mod:`vid2sid_ros.benchmark.run`) and one run directory per seed and method
(``OUT/seed_K/METHOD``); re-running with the same ``--out`` reuses finished runs.
"""

from __future__ import annotations

import argparse
import sys

from .calibrate import positive_budget_arg

HELP = "sim2sim benchmark: calibrate hidden ground truths with several methods at the same rollout budget"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", choices=["sim2sim"], help="benchmark suite")
    parser.add_argument("--rig", default="finger",
                        help="rig config file (RIG.yaml) or built-in rig name (default finger); the sim2sim "
                             "stand-in uses the rig's own excitations and per-trial initial states, no video")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference (runs that code; also VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--methods", default="reasoner,random,nelder-mead,golden-cd,bo,cmaes",
                        help="comma-separated proposer names")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds 0..N-1 (default 5)")
    parser.add_argument("--budget", type=positive_budget_arg, default=40, metavar="N",
                        help="rollouts per calibration, a positive number (default 40)")
    parser.add_argument("--iterations", type=int, default=10, help="iterations per calibration (default 10)")
    parser.add_argument("--noise", default="auto", choices=["auto", "camera", "keypoint", "sensor", "none"],
                        help="real-side noise of image trials: camera = render + sensor noise + marker tracking "
                             "(auto, for rigs with a tracker), keypoint = 0.5 px Gaussian, sensor = each trial's "
                             "declared noise (auto when no trial films the rig); joint-state and mocap trials "
                             "always get their declared noise (exact with none)")
    parser.add_argument("--final-identifiability", action="store_true",
                        help="also run the identifiability check at every result (extra diagnostic rollouts)")
    parser.add_argument("--misspecify", default=None, metavar="KIND[=SIZE],...",
                        help="the stand-in real side differs from the twin: latency[=s], frozen[=relative], "
                             "friction[=N or N*m], camera[=mm and mrad of pose error], rolling_shutter[=s readout], "
                             "drops[=fraction], mass[=relative: a link's mass and inertia], deadzone[=share of the "
                             "peak command], backlash[=share of the command range], focal[=relative] (see "
                             "vid2sid_ros/benchmark/misspecification.py)")
    parser.add_argument("--no-latency", action="store_true",
                        help="calibrate without the latency nuisance (to measure what the diagnosis says without it)")
    parser.add_argument("--active-learning", action="store_true",
                        help="design a trial when the identifiability check flags parameters; the stand-in runs it "
                             "and it joins the training data (calibration.active_learning; docs/active_learning.md)")
    parser.add_argument("--out", default=None, help="output directory (default runs/bench_<rig>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    from .executor_args import add_executor_arguments

    add_executor_arguments(parser, what="the seeds and cells (seed x method)")


def run(args: argparse.Namespace) -> int:
    from ..benchmark.run import run_benchmark
    from ..calibration.loop import CalibrationError
    from ..calibration.proposers import UnknownProposerError
    from ..rigs import RigConfigError, UnknownRigError, load_rig

    methods = list(dict.fromkeys(m.strip() for m in args.methods.split(",") if m.strip()))  # no duplicate runs
    if not methods:
        print("vid2sid benchmark: --methods is empty", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.budget < 1 or args.iterations < 1:
        print("vid2sid benchmark: --seeds, --budget and --iterations must be >= 1", file=sys.stderr)
        return 2
    try:
        rig = load_rig(args.rig, allow_code=args.allow_code)
    except (UnknownRigError, RigConfigError) as err:
        print(f"vid2sid benchmark: {err}", file=sys.stderr)
        return 2
    active = None
    if args.active_learning:
        import dataclasses

        from ..calibration.active import parse_active_learning

        try:
            active = dataclasses.replace(parse_active_learning(
                dict(rig.config.get("calibration") or {}).get("active_learning"),
                source=f"{rig.where}:calibration.active_learning"), enabled=True)
        except CalibrationError as err:
            print(f"vid2sid benchmark: {err}", file=sys.stderr)
            return 2
    out = args.out or f"runs/bench_{rig.name}" + ("_active" if active else "")
    args._interrupt_note = (f"finished cells are saved in {out}; the same command again (same --out) runs only "
                            "the cells it does not have")  # what the command line says on Ctrl-C / SIGTERM
    from ..calibration.executor import ExecutorError
    from .executor_args import executor_from_args

    try:
        executor = executor_from_args(args)
    except ExecutorError as err:
        print(f"vid2sid benchmark: {err}", file=sys.stderr)
        return 2
    try:
        results = run_benchmark(rig, methods, args.seeds, budget=args.budget, iterations=args.iterations,
                                noise=args.noise, out=out, final_identifiability=args.final_identifiability,
                                progress=not args.no_progress, misspecify=args.misspecify,
                                # None: the rig config's nuisance: block (run_benchmark reads it)
                                nuisance={**dict(rig.nuisance or {}), "latency": False} if args.no_latency else None,
                                executor=executor, active_learning=active)
    except CalibrationError as err:  # e.g. --out holds runs made with another budget or iteration count
        print(f"vid2sid benchmark: {err}" + ("" if "cannot resume" not in str(err) else
              f" (--out {out} holds a benchmark with other settings: choose another --out)"), file=sys.stderr)
        return 2
    except (UnknownRigError, UnknownProposerError, ImportError, TypeError, ValueError, RuntimeError) as err:
        # ValueError: bad specs or excitations; RuntimeError: a proposer that cannot start (missing API key)
        print(f"vid2sid benchmark: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"vid2sid benchmark: cannot write to {out}: {err}", file=sys.stderr)
        return 2
    finally:
        executor.close()
    from ..benchmark.run import format_results_markdown
    from ..report import ReportError, write_benchmark_report

    print(format_results_markdown(results))
    written = [f"{out}/results.json", f"{out}/results.md"]
    try:
        written.append(str(write_benchmark_report(out)))
    except (ReportError, OSError) as err:  # the results stand without their report
        print(f"vid2sid benchmark: report not written: {err}", file=sys.stderr)
    print(f"written: {', '.join(written)}")
    return 0
