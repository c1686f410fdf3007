"""``vid2sid calibrate``: one calibration run, printing each iteration as it completes.

Usage::

    vid2sid calibrate my_robot.yaml --out runs/my_robot                      # a rig config of your own
    vid2sid calibrate config/calibrate_finger.yaml --proposer reasoner --iterations 10 --out runs/finger
    vid2sid calibrate --rig finger --proposer cmaes --budget 40 --out runs/finger_cmaes   # quick sim2sim
    vid2sid calibrate config/calibrate_finger.yaml --proposer gemini --fallback reasoner --out runs/g --resume

Config file: a rig config (``docs/rig_config.md``: model, parameters, camera, tracker,
excitations, trials, calibration, proposer; command-line flags override it), or a
built-in rig name. A rig with ``trials`` is calibrated against them (every trial's
source is read: videos tracked, sim2sim stand-ins simulated); a rig without trials
against a stand-in (sim2sim) trial over its excitations. The legacy calibrate config
still loads — it extends the built-in rig it names::

    rig: finger                  # a built-in rig; "module:function" only with --allow-code
    rig_options: {}              # options of the built-in twin (its default_config keys)
    parameters: my_spec.yaml     # parameter spec to use instead of the rig's (same names)
    free: [joint_stiffness, joint_damping]   # calibrate exactly these (others frozen)
    real:                        # the real trial, one of:
      sim2sim: {seed: 0, truth: {}, noise: auto, truth_range: [0.15, 0.85]}
      # trajectory: real_trial.json   # a RealTrial JSON (vid2sid_ros.core.trial)
      # bag: runs/finger_bag           # a rosbag2 (MCAP) recorded by `vid2sid bringup`
    proposer: reasoner           # see vid2sid_ros.calibration.proposers.PROPOSERS
    proposer_options: {}         # constructor keyword arguments of the proposer
    fallback: null               # proposer used for an iteration when the main one fails
    calibration: {iterations: 10, rollout_budget: 40, seed: 0}
    out: runs/finger             # run directory

The run directory receives ``run.json``, ``iterations.jsonl`` (one line per completed
iteration), ``result.yaml`` (loadable parameter spec, nominal = identified values),
``result.json``, the calibrated model copy when the twin can export one, and — for
sim2sim — ``real_trial.json`` (the stand-in trial, with its hidden truth).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..core.trajectory import format_error

HELP = "calibrate a twin's physics parameters against a real (or stand-in) trial"

class ConfigError(ValueError):
    """The calibration config is malformed (message names the file and key)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="rig config YAML (docs/rig_config.md) or a built-in rig name")
    parser.add_argument("--rig", help="built-in rig (finger, tentacle, tentacle_water, pendulum, toy) or rig config "
                                      "for a quick run (instead of CONFIG, or the rig a legacy CONFIG extends)")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference in the config (imports and runs that code; "
                             "also VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--proposer", help="proposer name (default: config's, else reasoner)")
    parser.add_argument("--fallback", help="proposer used when the main one fails in an iteration")
    parser.add_argument("--iterations", type=int, help="proposal iterations (default 10)")
    parser.add_argument("--budget", type=int, help="rollout budget (default 40; 0 = unlimited)")
    parser.add_argument("--seed", type=int, help="seed of the proposer and, for sim2sim, of the hidden truth")
    parser.add_argument("--out", help="run directory (default runs/<rig>_<proposer>)")
    parser.add_argument("--real", metavar="BAG|TRIAL.json",
                        help="calibrate against a recorded rosbag2 (MCAP) or a real-trial JSON written by "
                             "`vid2sid track --excitation` (overrides CONFIG's real)")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in --out")
    parser.add_argument("--quiet", action="store_true", help="print only the final summary")
    parser.add_argument("--verbose", action="store_true",
                        help="show library messages (Python warnings, OpenCV/FFmpeg) on the terminal instead of "
                             "only in RUN_DIR/run.log")
    parser.add_argument("--no-report", action="store_true", help="do not write RUN_DIR/report.html")
    from .executor_args import add_executor_arguments

    add_executor_arguments(parser, what="the finite-difference rollouts")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    doc = __doc__ or ""
    start = doc.find("Config file")
    end = doc.find("The run directory")
    parser.epilog = doc[start:end].rstrip() if start >= 0 and end > start else None


_REAL_SOURCES = ("sim2sim", "trajectory", "bag")


def build_real(rig, cfg: Mapping[str, Any], seed: int, *, keep_frames: bool = False):
    """The real trial named by ``cfg['real']`` (default: sim2sim with ``seed``)."""
    from ..core.trial import RealTrial
    from ..calibration.sim2sim import draw_ground_truth, make_sim2sim_trial

    real_cfg = dict(cfg.get("real") or {"sim2sim": {}})
    src = cfg.get("_source", "<command line>")
    if "trajectory" in real_cfg:
        p = Path(real_cfg["trajectory"])
        if not p.is_absolute() and cfg.get("_dir"):
            p = Path(cfg["_dir"]) / p
        return RealTrial.load(p)
    if "bag" in real_cfg:
        from ..io.rosbag import load_real_trial_from_bag

        b = real_cfg["bag"]
        opts = dict(b) if isinstance(b, Mapping) else {"path": b}
        if "topics" in opts:  # a lab's own bag: topic map, standard types (io/lab_bag.py)
            from ..io.lab_bag import load_real_trial_from_lab_bag, parse_lab_bag_config

            measurements = opts.pop("measurements", ["image"])
            lab = parse_lab_bag_config(opts, source=f"{src}: real.bag", base=Path(cfg["_dir"]) if cfg.get("_dir") else None)
            return load_real_trial_from_lab_bag(lab, rig=rig, keep_frames=keep_frames, source=f"{src}: real.bag",
                                                measurements=measurements if isinstance(measurements, list)
                                                else [measurements])
        p = Path(opts.pop("path", ""))
        if not p.is_absolute() and cfg.get("_dir"):
            p = Path(cfg["_dir"]) / p
        unknown = [k for k in opts if k not in ("train", "holdout")]
        if unknown:
            raise ConfigError(f"{src}: real.bag: unknown key(s) {unknown}; valid: path, train, holdout")
        return load_real_trial_from_bag(p, rig=rig, train=tuple(opts.get("train", ())),
                                        holdout=tuple(opts.get("holdout", ())), keep_frames=keep_frames)
    s = real_cfg.get("sim2sim") or {}
    if not isinstance(s, Mapping):
        raise ConfigError(f"{src}: real.sim2sim must be a mapping (seed, truth, noise, truth_range), got {s!r}")
    s = dict(s)
    unknown = [k for k in s if k not in ("seed", "truth", "noise", "truth_range")]
    if unknown:
        raise ConfigError(f"{src}: real.sim2sim: unknown key(s) {unknown}; valid: seed, truth, noise, truth_range")
    sseed = s.get("seed", seed)
    if isinstance(sseed, bool) or not isinstance(sseed, int):
        raise ConfigError(f"{src}: real.sim2sim.seed must be an integer, got {sseed!r}")
    if s.get("truth"):
        t = s["truth"]
        if not isinstance(t, Mapping):
            raise ConfigError(f"{src}: real.sim2sim.truth must map parameter names to values, got {t!r}")
        unknown = [k for k in t if k not in rig.parameters]
        if unknown:
            raise ConfigError(f"{src}: real.sim2sim.truth: unknown parameter(s) {unknown}; valid: "
                              f"{', '.join(rig.parameters.names)}")
        for k, v in t.items():
            spec = rig.parameters[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not spec.lower <= v <= spec.upper:
                raise ConfigError(f"{src}: real.sim2sim.truth.{k} must be a number in [{spec.lower:g}, "
                                  f"{spec.upper:g}] {spec.unit}, got {v!r}")
        truth = rig.parameters.complete(dict(t))
    else:
        rng = s.get("truth_range", (0.15, 0.85))
        if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rng)
                or not 0.0 <= rng[0] < rng[1] <= 1.0):
            raise ConfigError(f"{src}: real.sim2sim.truth_range must be [low, high] with 0 <= low < high <= 1 "
                              f"(normalised units), got {rng!r}")
        truth = draw_ground_truth(rig.parameters, sseed, low=float(rng[0]), high=float(rng[1]))
    noise = s.get("noise", "auto")
    if noise == "auto":
        noise = "camera" if rig.tracker else "keypoint"
    if noise not in ("camera", "keypoint", "none"):
        raise ConfigError(f"{src}: real.sim2sim.noise must be one of auto, camera, keypoint, none, got {noise!r}")
    return make_sim2sim_trial(rig, truth, seed=sseed, noise=noise)


def _print_record(rec, budget: int | None, quiet: bool, unit: str = "px") -> None:
    if quiet:
        return
    err = format_error(rec.error_px, unit) if rec.error_px != float("inf") else "failed"
    best = rec.extra.get("best_error_px")
    total = rec.extra.get("rollouts_total", rec.rollouts_used)
    head = (f"iter {rec.iteration:2d} [{rec.proposer}] error {err}"
            + (f" (best {format_error(best, unit)})" if best is not None else "")
            + f"  rollouts {total}{'/' + str(budget) if budget else ''}  confidence {rec.confidence:.2f}"
            + f"  {rec.wall_s:.1f} s")
    print(head, flush=True)
    print(textwrap.indent(textwrap.fill(rec.rationale, 110), "    "), flush=True)
    for n in rec.notes:
        print(f"    note: {n}", flush=True)


def run(args: argparse.Namespace) -> int:
    from ..calibration.identifiability import IdentifiabilityWarning
    from ..calibration.loop import CalibrationConfig, CalibrationError, run_calibration
    from ..calibration.objective import measurement_unit
    from ..calibration.proposers import UnknownProposerError, accepts_option, make_proposer
    from ..core.parameters import ParameterSpecError
    from ..calibration.start import StartError, generic_start, parse_start
    from ..rigs import RigConfigError, UnknownRigError, build_real_trial, load_rig
    from ..calibration.phases import PhaseLedger

    ledger = PhaseLedger()
    ledger.start("load")  # the rig config, the real trial (a sim2sim stand-in renders and tracks here)
    try:
        if not (args.config or args.rig):
            raise ConfigError("name a rig: a rig config file (vid2sid calibrate RIG.yaml) or --rig NAME")
        rig = load_rig(args.config or args.rig, allow_code=args.allow_code,
                       overrides={"rig": args.rig} if args.config and args.rig else None)
        cfg = dict(rig.config or {})
        src = cfg.get("_source", "<command line>")
        cal = dict(cfg.get("calibration") or {})
        if args.iterations is not None:
            cal["iterations"] = args.iterations
        if args.budget is not None:
            cal["rollout_budget"] = None if args.budget == 0 else args.budget
        if args.seed is not None:
            cal["seed"] = args.seed
        cal["resume"] = bool(args.resume)
        from ..calibration.nuisance import rig_nuisance

        cal["nuisance"] = rig_nuisance(rig, cal, source=src)  # the rig's nuisance: block; one line on a bad one
        # calibration.start: the generic start stage (kind/points/guess) and start values (the loop's)
        start_cfg, start_values = parse_start(cal.pop("start", None), f"{src}:calibration.start", rig.parameters)
        cal["start"] = start_values or None
        ccfg = CalibrationConfig.from_dict(cal, source=src)
        name = args.proposer or cfg.get("proposer") or "reasoner"
        options = dict(cfg.get("proposer_options") or {})
        fb_name = args.fallback or cfg.get("fallback")
        fallback = make_proposer(fb_name) if fb_name else None
        if fallback is not None and accepts_option(name, "fallback"):
            # proposers that manage their own fallback (VLMs: missing key, quota, bad replies)
            # record why and when it was used; the loop's fallback covers the others
            options["fallback"], fallback = fallback, None
        try:
            proposer = make_proposer(name, **options)
        except (TypeError, ValueError) as err:  # a misspelt, foreign or out-of-range proposer option
            raise ConfigError(f"{src}:proposer_options: for '{name}': {err}") from None
        out = Path(args.out or cfg.get("out") or f"runs/{rig.name}_{name}")
        from .executor_args import executor_from_args

        executor = executor_from_args(args)  # a bad --executor/--workers, Ray missing: one line, before any work
        keep = bool(getattr(proposer, "wants_video", False))
        if args.real:  # a real-trial JSON (vid2sid track --excitation) or a rosbag2 directory/file
            kind = "trajectory" if Path(args.real).suffix.lower() == ".json" else "bag"
            real = build_real(rig, {**cfg, "real": {kind: str(Path(args.real).resolve())}}, ccfg.seed,
                              keep_frames=keep)
        elif rig.trials:
            if cfg.get("real"):
                raise ConfigError(f"{src}:real: give the real side either as 'trials' or as the legacy 'real', "
                                  "not both")
            real = build_real_trial(rig, keep_frames=keep)
        else:
            real = build_real(rig, cfg, ccfg.seed, keep_frames=keep)
        if start_cfg.guess or start_cfg.kind != "nominal":
            # the generic start: rig-agnostic; a guess plugin only suggests nominal values (logged, never fatal)
            params = rig.parameters.with_nominal(start_values) if start_values else rig.parameters
            twin = rig.make_twin()
            try:
                started = generic_start(twin, real, params, start_cfg, seed=ccfg.seed, budget=ccfg.rollout_budget,
                                        where=f"{src}:calibration.start",
                                        log=lambda m: None if args.quiet else print(f"start: {m}", flush=True))
            finally:
                close = getattr(twin, "close", None)
                if callable(close):
                    close()
            rig.parameters = started.parameters
            if started.rollouts and ccfg.rollout_budget is not None:  # generic_start refused a start costing it all
                ccfg = dataclasses.replace(ccfg, rollout_budget=ccfg.rollout_budget - started.rollouts)
    except (ConfigError, RigConfigError, CalibrationError, UnknownRigError, UnknownProposerError, StartError,
            ParameterSpecError, FileNotFoundError, ValueError, ImportError, TypeError, RuntimeError) as err:
        print(f"vid2sid calibrate: {err}", file=sys.stderr)  # one line (e.g. a missing API key)
        return 2
    for w in (real.meta or {}).get("warnings", []):  # missing frames per trial, receive-time fallbacks, gaps
        print(f"warning: {w}", file=sys.stderr)

    from ..calibration.loop import check_run_dir

    try:  # every refusal check before anything is written into the run directory (real_trial.json included)
        if not (out.exists() and not out.is_dir()):
            check_run_dir(out, proposer_name=proposer.name, config=ccfg, parameters=rig.parameters, real=real)
            _check_real_trial_file(out / "real_trial.json", real)
    except CalibrationError as err:
        print(f"vid2sid calibrate: {err}", file=sys.stderr)
        return 2
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it is a file, expected a run directory")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write_test"
        probe.write_text("")  # fail now, not after the first iterations, on a read-only directory
        probe.unlink()
        if real.truth is not None:
            real.save(out / "real_trial.json")
    except OSError as err:
        print(f"vid2sid calibrate: cannot use {out} as the run directory (--out): {err.strerror or err}",
              file=sys.stderr)
        return 2
    if not args.quiet:
        from ..calibration.nuisance import add_measurement_nuisances, describe_free

        fitted = add_measurement_nuisances(  # what run_calibration fits (was: only the rig's own free parameters)
            rig.parameters, ccfg.nuisance, keypoints=real.keypoint_names, excitations=real.train_excitations,
            real_trial=real.truth is None, unit=measurement_unit(real.train), source="config")
        print(f"calibrating rig '{rig.name}' ({describe_free(fitted)}) with '{name}' against "
              f"{real.source or 'the real trial'}; budget {ccfg.rollout_budget or 'unlimited'} rollouts, "
              f"{ccfg.iterations} iterations -> {out}", flush=True)
    resume = resume_command(args, out)
    log_path = out / "run.log"
    failure: tuple[int, str] | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with library_output_to(log_path, verbose=args.verbose):  # restored before anything is printed
                # up-front warnings go to stdout at once (stderr is the library log in here)
                result = run_calibration(rig, real, proposer, ccfg, out, fallback=fallback,
                                         on_iteration=lambda r: _print_record(r, ccfg.rollout_budget, args.quiet,
                                                                              measurement_unit(real.train)),
                                         on_warning=lambda w: print(f"warning: {w}", flush=True),
                                         executor=executor, phases=ledger)
        except CalibrationError as err:
            failure = (2, f"vid2sid calibrate: {err}")
        except OSError as err:  # disk full, directory removed or made read-only mid-run
            where = err.filename if err.filename else f"to the run directory {out}"
            failure = (2, f"vid2sid calibrate: cannot write {where}: {err.strerror or err}; completed iterations "
                          f"are in {out / 'iterations.jsonl'}; --resume continues: {resume}")
        except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (commands.signals.Terminated)
            from .signals import interrupt_exit_code, interrupt_name

            if (out / "run.json").is_file():
                failure = (interrupt_exit_code(err),
                           f"\nstopped: interrupted ({interrupt_name(err)}); completed iterations are saved in "
                           f"{out / 'iterations.jsonl'}\ncontinue this run: {resume}")
            else:  # stopped during the start checks: there is no run to resume yet
                failure = (interrupt_exit_code(err),
                           f"\nstopped: interrupted ({interrupt_name(err)}) before iteration 0 was saved; nothing to "
                           f"resume: start again with {resume.removesuffix(' --resume')}")
    executor.close()
    if failure is not None:
        _log_warnings(caught, log_path, verbose=args.verbose, identifiability=IdentifiabilityWarning)
        print(failure[1], file=sys.stderr)
        return failure[0]
    _log_warnings(caught, log_path, verbose=args.verbose, identifiability=IdentifiabilityWarning)
    report = None
    if not args.no_report:
        from ..report import ReportError, write_report

        ledger.start("report")
        try:
            with library_output_to(log_path, verbose=args.verbose):
                report = write_report(out)
        except (ReportError, OSError, ValueError) as err:  # the calibration result stands without its report
            print(f"vid2sid calibrate: report not written: {err}", file=sys.stderr)
        ledger.stop()
        from .phases_file import add_phase

        add_phase(out / "result.json", "report", ledger.to_dict().get("report"))
    from ..report import run_summary_lines

    print()
    for line in run_summary_lines(out, report=report, resume_command=resume):
        print(line)
    for k, p in result.files.items():
        print(f"  {k}: {p}")
    if result.status != "ok":  # a run that calibrated nothing is a failure, never exit 0
        why = next((n for r in reversed(result.history[1:]) for n in r.notes), "no iteration was run")
        print(f"vid2sid calibrate: no proposal was made in {result.iterations} iteration(s) (last: {why}); "
              f"{out / 'result.yaml'} says status: {result.status}; no calibrated model was written",
              file=sys.stderr)
        return 1
    return 0


def _check_real_trial_file(path: Path, real) -> None:
    """Refuse to replace a run's ``real_trial.json`` (its hidden truth) with another truth.

    Raises:
        CalibrationError: the file holds a different (or unreadable) truth.
    """
    import json

    from ..calibration.loop import CalibrationError

    if real.truth is None or not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8")).get("truth")
    except (OSError, ValueError, AttributeError) as err:
        raise CalibrationError(f"{path}: unreadable ({type(err).__name__}); it holds this run's hidden truth: "
                               "repair it or choose another output directory (nothing was changed)") from None
    new = json.loads(json.dumps({k: float(v) for k, v in real.truth.items()}))
    if old != new:
        changed = sorted(k for k in set(old or {}) | set(new) if (old or {}).get(k) != new.get(k))
        raise CalibrationError(f"{path} holds another hidden truth (differs in {', '.join(changed[:4])}); it belongs "
                               "to the run in this directory: resume with the same real.sim2sim settings or choose "
                               "another output directory (nothing was changed)")


def resume_command(args: argparse.Namespace, out: Path) -> str:
    """The exact command line that continues this run (same settings, ``--resume``)."""
    import shlex

    cmd = ["vid2sid", "calibrate"] + ([str(args.config)] if args.config else [])
    for flag, value in (("--rig", args.rig), ("--proposer", args.proposer), ("--fallback", args.fallback),
                        ("--iterations", args.iterations), ("--budget", args.budget), ("--seed", args.seed),
                        ("--real", args.real)):
        if value is not None:
            cmd += [flag, str(value)]
    if getattr(args, "allow_code", False):  # the run's rig needed it; so does its resume
        cmd.append("--allow-code")
    return shlex.join(cmd + ["--out", str(out), "--resume"])


def library_output_to(log_path: Path, *, verbose: bool):
    """Context: C-level stderr (OpenCV/FFmpeg codec notes) goes to ``log_path`` unless ``verbose``."""
    import contextlib

    from ..report.media import quiet_stderr

    return contextlib.nullcontext() if verbose else quiet_stderr(log_path)


def _log_warnings(caught, log_path: Path, *, verbose: bool, identifiability: type) -> None:
    """Identifiability warnings: one line each on the terminal; every Python warning in the log
    (with its source), and on the terminal too with ``verbose``."""
    lines = [warnings.formatwarning(w.message, w.category, w.filename, w.lineno, "") for w in caught]
    if lines:
        try:
            with open(log_path, "a", encoding="utf-8") as f:
                f.writelines(lines)
        except OSError:
            verbose = True  # the log cannot take them: do not lose them
    for w, text in zip(caught, lines):
        if verbose:
            print(text.rstrip(), file=sys.stderr)
        elif issubclass(w.category, identifiability):
            print(f"warning: {w.message}", file=sys.stderr)
