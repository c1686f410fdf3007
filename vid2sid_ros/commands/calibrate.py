"""``vid2sid calibrate``: one calibration run, printing each iteration as it completes.

Usage::

    vid2sid calibrate my_robot.yaml --out runs/my_robot                      # a rig config of your own
    vid2sid calibrate --rig finger --iterations 10 --out runs/finger          # a built-in rig, stand-in trial
    vid2sid calibrate --rig finger --proposer cmaes --budget 40 --out runs/finger_cmaes
    vid2sid calibrate my_robot.yaml --proposer gemini --fallback reasoner --out runs/g --resume

CONFIG is a rig config (every key: docs/rig_config.md; command-line flags override it)
or a built-in rig name. A rig with trials is calibrated against them (videos
tracked, lab data read, sim2sim stand-ins simulated); a rig without trials against a
stand-in (sim2sim) trial over its excitations. For example::

    model: arm.xml                     # MJCF or URDF, relative to this file
    actuators: [{name: motor, joint: shoulder, kind: motor, gear: 1.0}]
    parameters:
      motor_gain: {unit: N*m, lower: 0.05, upper: 0.5, nominal: 0.15, scale: log,
                   target: "actuator_gear[motor,0]"}
      damping: {unit: N*m*s/rad, lower: 0.002, upper: 0.05, nominal: 0.01, scale: log,
                target: "dof_damping[shoulder]"}
    keypoints: {tip: tip}              # keypoint -> site (or body) of the model
    camera: {width: 320, height: 240, fovy: 50, pose: {position: [0, -1.5, 1], look_at: [0, 0, 1]}}
    tracker: {markers: [{name: tip, hsv_lower: [165, 80, 50], hsv_upper: [12, 255, 255]}]}
    excitations: {logged: {kind: csv, path: commands.csv}}   # the command the robot was given
    trials: [{source: {video: clip.mp4}, excitation: logged, split: {train_fraction: 0.7}}]
    calibration: {iterations: 10, rollout_budget: 120}       # rollout_budget: null = no limit
    proposer: reasoner

The run directory receives ``run.json``, ``iterations.jsonl`` (one line per completed
iteration), ``result.yaml`` (loadable parameter spec, nominal = identified values),
``result.json``, the calibrated model copy when the twin can export one, ``report.html``
and — for sim2sim — ``real_trial.json`` (the stand-in trial, with its hidden truth). One run at a time
holds the directory (``.vid2sid.lock``); ``--resume`` is refused when the model, rig config
or real data changed (``--resume-changed`` overrides it, recorded in ``run.json``); ``--resume``
of a run that ended (converged, stalled, budget exhausted, iterations done) says so in one line
and changes nothing, exit 0, unless it stopped at its budget or iterations and is given a larger
``--budget`` and ``--iterations``: then it goes on from where it stopped. Exit codes: 0 success (or a finished run resumed), 1 no proposal
made, 2 refused or stopped, 3 an artefact could not be written, 130/143 interrupted
(``docs/run_directory.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..core.trajectory import format_error

HELP = "calibrate a twin's physics parameters against a real (or stand-in) trial"

#: exit codes: 0 success; 1 no proposal was made; 2 refused (bad config, run directory in use or holding another
#: run, a changed model or data on --resume) or stopped by an error; 3 the calibration ran but a promised artefact
#: (result files, calibrated model, report) could not be written; 130/143 interrupted (Ctrl-C / SIGTERM)
EXIT_OK, EXIT_NO_PROPOSAL, EXIT_REFUSED, EXIT_ARTEFACT_MISSING = 0, 1, 2, 3


class ConfigError(ValueError):
    """The calibration config is malformed (message names the file and key)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help="rig config YAML (docs/rig_config.md) or a built-in rig name")
    parser.add_argument("--rig", help=f"built-in rig ({', '.join(builtin_rig_names())}) or rig config, instead of "
                                      "CONFIG (or the rig a CONFIG that starts with 'rig:' extends)")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference in the config (imports and runs that code; "
                             "also VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--proposer", help="proposer name (default: config's, else reasoner)")
    parser.add_argument("--fallback", help="proposer used when the main one fails in an iteration")
    parser.add_argument("--iterations", type=int, help="proposal iterations (default 10)")
    parser.add_argument("--budget", type=budget_arg, metavar="N|none", default=_NOT_GIVEN,
                        help="rollout budget: a positive number, or 'none' for no limit (a config's "
                             "calibration.rollout_budget: null); default: the config's, else 40")
    parser.add_argument("--seed", type=int, help="seed of the proposer and, for sim2sim, of the hidden truth")
    parser.add_argument("--out", help="run directory (default runs/<rig>_<proposer>)")
    parser.add_argument("--real", metavar="BAG|TRIAL.json",
                        help="calibrate against a recorded rosbag2 (MCAP) or a real-trial JSON written by "
                             "`vid2sid track --excitation` (instead of the config's trials)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out: an interrupted one, or one that stopped at its rollout "
                             "budget or its iterations when given a larger --budget and --iterations")
    parser.add_argument("--start", action="append", metavar="NAME=VALUE[,NAME=VALUE...]",
                        help="start values of free parameters (nuisances too), in their units; override the "
                             "config's calibration.start values")
    parser.add_argument("--active-learning", action="store_true",
                        help="design the trial that separates parameters the identifiability check flags and save "
                             "it in the run as a recommendation (calibration.active_learning; docs/active_learning.md)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only warnings and the final summary")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="-v: every iteration's rationale and trace, every file written; -vv: also library "
                             "messages (Python warnings, OpenCV/FFmpeg) on the terminal instead of only in "
                             "RUN_DIR/run.log")
    parser.add_argument("--resume-changed", action="store_true",
                        help="with --resume: continue although the model (or a file it includes), the rig config "
                             "or the real data changed since the interrupted run (refused otherwise); recorded in "
                             "RUN_DIR/run.json")
    parser.add_argument("--no-report", action="store_true", help="do not write RUN_DIR/report.html")
    from .executor_args import add_executor_arguments

    add_executor_arguments(parser, what="the finite-difference rollouts")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    doc = __doc__ or ""
    start = doc.find("Usage::")
    end = doc.find("The run directory")
    parser.epilog = doc[start:end].rstrip().replace("Usage::", "examples:", 1) if 0 <= start < end else None


def builtin_rig_names() -> list[str]:
    """The built-in rigs a user can name (the shipped configs in ``vid2sid_ros/rigs/builtin/``,
    the ones the docs describe); read from the folder so ``--help`` imports nothing heavy."""
    from ..share import PACKAGE_DIR

    order = ["finger", "tentacle", "tentacle_water", "pendulum"]
    names = [p.stem for p in (PACKAGE_DIR / "rigs" / "builtin").glob("*.yaml")]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def start_arg(given: list[str] | None) -> dict[str, float]:
    """``--start NAME=VALUE[,NAME=VALUE...]`` (repeatable) as ``{name: value}``; later ones win.

    Raises:
        ConfigError: an entry without ``=``, an empty name or a value that is not a finite number.
    """

    values: dict[str, float] = {}
    for text in given or ():
        for item in (x.strip() for x in str(text).split(",")):
            name, eq, value = item.partition("=")
            try:
                v = float(value)
            except ValueError:
                v = math.nan
            if not item or not eq or not name.strip() or not math.isfinite(v):
                raise ConfigError(f"--start: expected NAME=VALUE[,NAME=VALUE...] with finite numbers (start values "
                                  f"in the parameters' units), got {item!r}")
            values[name.strip()] = v
    return values


def budget_arg(text: str) -> int | None:
    """``--budget``: a positive integer, or ``none``/``unlimited`` (no limit: None).

    Raises:
        argparse.ArgumentTypeError: anything else (0 included: no rollout cannot pay for an evaluation).
    """
    if text.strip().lower() in ("none", "null", "unlimited"):
        return None
    return _positive_rollouts(text, "a positive number of rollouts, or 'none' for no limit")


def positive_budget_arg(text: str) -> int:
    """``--budget`` of a command that always has a limit (``demo``, ``benchmark``: methods compared at
    the same budget): a positive integer; 0 is refused here too (it meant "the config's" in ``demo``).

    Raises:
        argparse.ArgumentTypeError: anything else, naming what is expected.
    """
    return _positive_rollouts(text, "a positive number of rollouts (methods are compared at the same limited "
                                    "budget)")


def _positive_rollouts(text: str, expected: str) -> int:
    """``int(text)`` when it is at least 1, else :class:`argparse.ArgumentTypeError` saying ``expected``."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}")
    return n


_REAL_SOURCES = ("sim2sim", "trajectory", "bag")

#: --budget's default: not given (the config's budget stands); None means no limit
_NOT_GIVEN = object()


def build_real(rig, cfg: Mapping[str, Any], seed: int, *, keep_frames: bool = False):
    """The real trial named by ``cfg['real']`` (default: sim2sim with ``seed``)."""
    from ..benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
    from ..core.trial import RealTrial

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
        from ..core.names import did_you_mean

        raise ConfigError(f"{src}: real.sim2sim: unknown key(s) {unknown}"
                          f"{did_you_mean(unknown[0], ('seed', 'truth', 'noise', 'truth_range'))}; valid: seed, truth, "
                          "noise, truth_range")
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


def run(args: argparse.Namespace) -> int:
    """``vid2sid calibrate``: load the rig and the real trial (:func:`_load_run_inputs`), take the run
    directory's lock, run (:func:`_run_locked`); the exit code. The start stage's temporary log is removed
    however the command ends (moved into ``run.log`` when the run started)."""
    try:
        return _run(args)
    finally:
        if getattr(args, "start_log", None) is not None:
            Path(args.start_log).unlink(missing_ok=True)


def _run(args: argparse.Namespace) -> int:
    """:func:`run` itself."""
    from ..calibration.loop import CalibrationError
    from ..calibration.proposers import UnknownProposerError
    from ..core.parameters import ParameterSpecError
    from ..calibration.start import StartError
    from ..rigs import RigConfigError, UnknownRigError
    from ..calibration.phases import PhaseLedger

    ledger = PhaseLedger()
    ledger.start("load")  # the rig config, the real trial (a sim2sim stand-in renders and tracks here)
    try:
        rig, real, proposer, fallback, ccfg, name, out, executor = _load_run_inputs(args, ledger)
    except (ConfigError, RigConfigError, CalibrationError, UnknownRigError, UnknownProposerError, StartError,
            ParameterSpecError, FileNotFoundError, ValueError, ImportError, TypeError, RuntimeError) as err:
        print(f"vid2sid calibrate: {err}", file=sys.stderr)  # one line (e.g. a missing API key)
        return 2

    from ..calibration.run_lock import RunDirBusy, run_dir_lock

    lock = contextlib.ExitStack()
    if not (out.exists() and not out.is_dir()):  # a file named as --out is refused below
        try:  # taken before the directory is looked at: a second run into it is refused here, in one line
            lock.enter_context(run_dir_lock(out))
        except RunDirBusy as err:
            print(f"vid2sid calibrate: {err}", file=sys.stderr)
            return EXIT_REFUSED
        except OSError as err:
            print(f"vid2sid calibrate: cannot use {out} as the run directory (--out): {err.strerror or err}",
                  file=sys.stderr)
            return EXIT_REFUSED
    try:
        with lock:  # held until the run, its result files and its report are written
            return _run_locked(args, rig, real, proposer, fallback, ccfg, name, out, executor=executor, ledger=ledger)
    finally:
        executor.close()  # idempotent: also after a refusal before the run


def _load_run_inputs(args: argparse.Namespace, ledger=None):
    """The rig, its real trial, the proposer and the run's settings from ``args``:
    ``(rig, real, proposer, fallback, CalibrationConfig, proposer name, run directory, executor)``;
    a multistart is timed as its own phase of ``ledger`` (a :class:`~vid2sid_ros.calibration.phases.PhaseLedger`).

    Raises:
        ConfigError, RigConfigError, UnknownRigError, UnknownProposerError, StartError, ParameterSpecError,
        FileNotFoundError, ValueError, ImportError, TypeError, RuntimeError: one line each (printed by :func:`run`).
    """
    from ..calibration.loop import CalibrationConfig
    from ..calibration.proposers import accepts_option, make_proposer
    from ..calibration.start import parse_start
    from ..rigs import load_rig

    if not (args.config or args.rig):
        raise ConfigError("name a rig: a rig config file (vid2sid calibrate RIG.yaml) or --rig NAME")
    rig = load_rig(args.config or args.rig, allow_code=args.allow_code,
                   overrides={"rig": args.rig} if args.config and args.rig else None)
    cfg = dict(rig.config or {})
    src = cfg.get("_source", "<command line>")
    cal = dict(cfg.get("calibration") or {})
    if args.iterations is not None:
        cal["iterations"] = args.iterations
    if args.budget is not _NOT_GIVEN:
        cal["rollout_budget"] = args.budget  # None: no limit
    if args.seed is not None:
        cal["seed"] = args.seed
    cal["resume"] = bool(args.resume or getattr(args, "resume_changed", False))
    cal["resume_changed"] = bool(getattr(args, "resume_changed", False))
    cal["resume_extend"] = cal["resume"]  # a larger --budget / --iterations on --resume goes on
    from ..calibration.nuisance import nuisance_names, rig_nuisance

    cal["nuisance"] = rig_nuisance(rig, cal, source=src)  # the rig's nuisance: block; one line on a bad one
    # calibration.start: the generic start stage (kind/points/guess) and start values (the loop's,
    # measurement nuisances included: the loop checks those against the ones it adds)
    start_cfg, start_values = parse_start(cal.pop("start", None), f"{src}:calibration.start", rig.parameters,
                                          nuisance_names(list(getattr(rig, "keypoints", None) or ())))
    start_values = {**start_values, **start_arg(getattr(args, "start", None))}  # names checked by the loop
    cal["start"] = start_values or None
    from ..calibration.active import parse_active_learning

    active = parse_active_learning(cal.pop("active_learning", None), source=f"{src}:calibration.active_learning")
    if getattr(args, "active_learning", False):
        active = dataclasses.replace(active, enabled=True)
    args.active = active
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
        raise ConfigError(_proposer_option_problem(src, name, options, err)) from None
    out = Path(args.out or cfg.get("out") or f"runs/{rig.name}_{name}")
    from .executor_args import executor_from_args

    executor = executor_from_args(args)  # a bad --executor/--workers, Ray missing: one line, before any work
    try:
        real, ccfg = _load_real(args, rig, cfg, src, ccfg, proposer, active, start_cfg, start_values,
                                 executor, ledger, out)
    except BaseException:
        executor.close()
        raise
    return rig, real, proposer, fallback, ccfg, name, out, executor


def _proposer_option_problem(src: str, name: str, options: Mapping[str, Any], err: Exception) -> str:
    """One line for a proposer option its constructor refused: an unknown option is named with the closest
    option the proposer takes and the list of them; any other refusal is the constructor's own message."""
    import inspect

    from ..calibration.proposers import proposer_class
    from ..core.names import did_you_mean

    params = inspect.signature(proposer_class(name)).parameters
    valid = [p for p, v in params.items() if v.kind in (v.KEYWORD_ONLY, v.POSITIONAL_OR_KEYWORD) and p != "self"]
    takes_any = any(v.kind == v.VAR_KEYWORD for v in params.values())
    unknown = [k for k in options if k not in valid and k != "fallback"] if not takes_any else []
    if unknown:
        return (f"{src}:proposer_options.{unknown[0]}: unknown option of proposer '{name}'"
                f"{did_you_mean(unknown[0], valid)}; its options: {', '.join(valid) or 'none'}")
    return f"{src}:proposer_options: for '{name}': {err}"


def _load_real(args: argparse.Namespace, rig, cfg: dict, src: str, ccfg, proposer, active, start_cfg, start_values,
               executor=None, ledger=None, out: Path | None = None):
    """The real trial (``--real``, the rig's trials, or the legacy ``real:`` block), the active-learning
    limits checked against it, and the generic start stage run (``rig.parameters`` set to its result; a
    multistart's points rolled out on ``executor``, its time and charged rollouts the ``multistart`` phase
    of ``ledger``, a resume's kept from the run directory ``out``): ``(real trial, CalibrationConfig with the start's rollouts taken off the budget)``."""
    from ..calibration.start import generic_start
    from ..rigs import build_real_trial

    # camera frames: for a proposer that watches video, and for the report's overlay (a video trial's footage)
    keep = bool(getattr(proposer, "wants_video", False)) or any(t.kind == "video" for t in rig.trials or ())
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
    if active.enabled and active.limits:  # the limits against the actuators and command rate, before any run
        _check_active_limits(rig, real, active, src)
    if start_cfg.guess or start_cfg.kind != "nominal":
        # the generic start: rig-agnostic; a guess plugin only suggests nominal values (logged, never fatal)
        started = _start_stage(args, rig, real, ccfg, src, start_cfg, start_values, executor, ledger, out)
        rig.parameters = started.parameters
        if started.rollouts and ccfg.rollout_budget is not None:  # generic_start refused a start costing it all
            ccfg = dataclasses.replace(ccfg, rollout_budget=ccfg.rollout_budget - started.rollouts)
            args.start_rollouts = started.rollouts  # the budget a command to go on doubles is the one given
    return real, ccfg


#: the run directory's record of its multistart (written with iteration 0; read by a resume)
START_STAGE_FILE = "start_stage.json"


def _start_stage(args: argparse.Namespace, rig, real, ccfg, src: str, start_cfg, start_values, executor, ledger,
                 out: Path | None):
    """The generic start stage (:func:`~vid2sid_ros.calibration.start.generic_start`): a guess, then a multistart
    whose points are rolled out on ``executor`` and timed as the ``multistart`` phase of ``ledger``. A resume of a
    run (in ``out``) that recorded its multistart (:data:`START_STAGE_FILE`, same kind, points, guess, seed, training trials
    and free parameters) keeps it instead of rolling it out again: the same start, its rollouts charged once.
    ``args.start_record`` is set to what a new run records. Returns the
    :class:`~vid2sid_ros.calibration.start.StartResult`.

    Raises:
        StartError: the multistart would cost the whole budget (names ``SRC:calibration.start.points``).
    """
    from ..calibration.start import StartResult, generic_start

    params = rig.parameters.with_nominal(start_values) if start_values else rig.parameters
    say = (lambda m: None) if args.quiet else (lambda m: print(f"start: {m}", flush=True))
    kept = (_kept_multistart(args, out, start_cfg, ccfg.seed, real, params) if start_cfg.kind == "multistart"
            else None)
    rolls = start_cfg.kind == "multistart" and kept is None
    twin = rig.make_twin()
    if ledger is not None and rolls:
        ledger.start("multistart")
    args.start_log = _early_log_file()  # the library's messages (MuJoCo's warnings): into run.log, as the run's
    try:
        with library_output_to(args.start_log, verbose=args.verbose >= 2):
            started = generic_start(twin, real, params, start_cfg if kept is None else
                                    dataclasses.replace(start_cfg, kind="nominal"), seed=ccfg.seed,
                                    budget=ccfg.rollout_budget, where=f"{src}:calibration.start",
                                    executor=executor, log=say)
    finally:
        close = getattr(twin, "close", None)
        if callable(close):
            close()
    if ledger is not None and rolls:
        ledger.add_rollouts(charged=started.rollouts)  # charged to the budget given, before the session
        ledger.start("load")
    if kept is not None:
        msg = (f"multistart: kept from the run being resumed ({kept['rollouts']} rollouts, charged once, not "
               f"rolled out again)")
        say(msg)
        started = StartResult(started.parameters.with_nominal(kept["values"]), int(kept["rollouts"]),
                              kept.get("error"), [*started.notes, msg])
    args.start_record = None if start_cfg.kind != "multistart" else {
        "kind": start_cfg.kind, "points": int(start_cfg.points), "guess": start_cfg.guess, "seed": int(ccfg.seed),
        "train_trials": [t.trial_id for t in real.train], "rollouts": int(started.rollouts),
        "error": started.error if started.error is not None and math.isfinite(started.error) else None,
        "values": {n: float(started.parameters[n].nominal) for n in started.parameters.free_names}}
    return started


def _kept_multistart(args: argparse.Namespace, out: Path | None, start_cfg, seed: int, real, params) -> dict | None:
    """The multistart :data:`START_STAGE_FILE` of the run ``--resume`` continues (in ``out``), when it was made with this
    start's kind, points, guess and seed on the same training trials and its values are the free parameters'
    within their bounds; None otherwise (no resume, ``--resume-changed``, no or another record: rolled out
    again, as before this record existed)."""
    if not getattr(args, "resume", False) or getattr(args, "resume_changed", False):
        return None
    try:
        rec = json.loads((out / START_STAGE_FILE).read_text()) if out is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("values"), dict):
        return None
    same = [rec.get(k) for k in ("kind", "points", "guess", "seed", "train_trials")] == [
        start_cfg.kind, start_cfg.points, start_cfg.guess, int(seed), [t.trial_id for t in real.train]]
    values = rec["values"]
    try:
        fits = (sorted(values) == sorted(params.free_names) and isinstance(rec.get("rollouts"), int)
                and all(params[n].lower <= float(v) <= params[n].upper for n, v in values.items()))
    except (TypeError, ValueError):
        return None
    return rec if same and fits else None


def _save_start_record(out: Path, record: dict | None) -> None:
    """Write the run's multistart record (:data:`START_STAGE_FILE`) into the started run's directory, once."""
    path = out / START_STAGE_FILE
    if record is not None and not path.is_file():
        from ..core.files import atomic_write_text

        atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def _check_active_limits(rig, real, active, src: str) -> None:
    """``calibration.active_learning``'s limits checked against the rig's actuators (named as its model
    names them) and the real trial's command rate, the way the design reads them.

    Raises:
        ConfigError: ``SRC:calibration.active_learning.KEY: expected ..., got ...``.
    """
    from ..calibration.design import ExcitationLimits, ExcitationRefused

    twin = rig.make_twin()
    try:
        ExcitationLimits.from_rig(twin, real.train_excitations, active.limits)
    except ExcitationRefused as err:
        raise ConfigError(f"{src}:{err}") from None
    finally:
        close = getattr(twin, "close", None)
        if callable(close):
            close()


def _recommend(args: argparse.Namespace, rig, real, result, ccfg, out: Path) -> dict[str, str] | None:
    """Active learning after the run: the designed trial saved as a recommendation, one line on the terminal.

    Returns:
        None, or ``{"file": "designed_trial.yaml", "error": why}`` when the design failed (the
        promised artefact is missing: the caller records it and exits 3)."""
    from ..calibration.active import recommend_trial
    from ..calibration.design import ExcitationRefused

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = recommend_trial(rig, real, result, ccfg, args.active, out, parameters=rig.parameters)
    except (ExcitationRefused, ValueError, OSError) as err:
        why = f"active learning: no trial designed: {err}"
    except Exception as err:  # noqa: BLE001 - the calibration is done and saved: a failed design never loses it
        why = f"active learning: no trial designed: {type(err).__name__}: {err}"
    else:
        why = None
    if why is not None:
        print(f"vid2sid calibrate: {why}", file=sys.stderr)
        return {"file": "designed_trial.yaml", "error": " ".join(why.split())[:500]}
    if rec is None:
        print("active learning: the identifiability check flags no parameter; no trial designed")
    elif not rec.get("files"):
        print(f"active learning: {rec['reason']} ({rec['rationale'].split('. ')[0]})")
    else:
        print(f"active learning: next trial saved in {rec['files']['trial']} and {rec['files']['csv']} "
              f"({rec['rationale'].split('. ')[0]})")


def _run_locked(args: argparse.Namespace, rig, real, proposer, fallback, ccfg, name: str, out: Path, *,
                executor, ledger) -> int:
    """The run proper, with ``out``'s run lock held: checks (:func:`_refuse_run_dir`), calibration
    (:func:`_calibrate`), the designed trial, the report (:func:`_write_report_phase`), the summary and
    the exit code (:func:`_summary`).

    ``executor`` (:mod:`vid2sid_ros.calibration.executor`) runs the batched rollouts and is closed
    here; ``ledger`` (:class:`~vid2sid_ros.calibration.phases.PhaseLedger`) times the phases."""
    from ..calibration.identifiability import IdentifiabilityWarning

    refused = _refuse_run_dir(out, rig, real, proposer, ccfg)
    if refused is not None:
        return refused
    resume = resume_command(args, out)
    log_path = out / "run.log"
    result, failure, caught, run_started = _calibrate(args, rig, real, proposer, fallback, ccfg, name, out,
                                                      executor=executor, ledger=ledger, resume=resume)
    executor.close()
    if failure is not None:
        if run_started:
            _save_real_trial(out, real)
        _log_warnings(caught, log_path if run_started else None, verbose=args.verbose >= 2,
                      identifiability=IdentifiabilityWarning,
                      show_identifiability=True)  # no summary follows to carry them
        print(failure[1], file=sys.stderr)
        return failure[0]
    _save_real_trial(out, real)
    _log_warnings(caught, log_path, verbose=args.verbose >= 2, identifiability=IdentifiabilityWarning)
    report = None
    missing = list(result.artefacts_missing)
    if getattr(args, "active", None) is not None and args.active.enabled:
        design_missing = _recommend(args, rig, real, result, ccfg, out)
        if design_missing is not None:  # asked for (--active-learning or the config): never exit 0 without it
            missing.append(design_missing)
            try:
                from ..calibration.loop import mark_artefacts_missing

                mark_artefacts_missing(out, [design_missing])
            except OSError as err2:
                print(f"vid2sid calibrate: cannot record the missing design in {out / 'result.yaml'}: "
                      f"{err2.strerror or err2}", file=sys.stderr)
    if not args.no_report:
        report = _write_report_phase(args, out, ledger, log_path, missing)
    return _summary(args, out, result, report, resume, ccfg, log_path, missing)


def _refuse_run_dir(out: Path, rig, real, proposer, ccfg) -> int | None:
    """Every refusal check on the run directory before anything is written into it (a special file in it,
    another run, a different real trial, a finished run, an unwritable directory; then it exists): the
    exit code of a refusal (its line printed), or None to go on."""
    from ..calibration.loop import CalibrationError, check_run_dir

    odd = _special_file_in(out)
    if odd is not None:  # a FIFO iterations.jsonl or result.json would block the run's read or write forever
        print(f"vid2sid calibrate: cannot use {out} as the run directory (--out): {odd}", file=sys.stderr)
        return 2
    try:  # every refusal check before anything is written into the run directory (real_trial.json included)
        pre = None
        if not (out.exists() and not out.is_dir()):
            pre = check_run_dir(out, proposer_name=proposer.name, config=ccfg, parameters=rig.parameters, real=real)
            _check_real_trial_file(out / "real_trial.json", real)
    except CalibrationError as err:
        print(f"vid2sid calibrate: {err}", file=sys.stderr)
        return 2
    if pre is not None and pre.finished:  # an ended run is not continued (that would append and re-stop it)
        more = ("; to go on, resume with a larger --iterations and --budget"
                if pre.finished in ("iterations done", "rollout budget exhausted") else "")
        print(f"vid2sid calibrate: the run in {out} is finished ({pre.finished} after {len(pre.records)} of "
              f"{ccfg.iterations} iterations); nothing to resume, nothing was changed: its results are in "
              + " and ".join(str(out / f) for f in ("result.yaml", "report.html") if (out / f).is_file()) + more)
        return EXIT_OK
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it is a file, expected a run directory")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write_test"
        probe.write_text("")  # fail now, not after the first iterations, on a read-only directory
        probe.unlink()
    except OSError as err:
        print(f"vid2sid calibrate: cannot use {out} as the run directory (--out): {err.strerror or err}",
              file=sys.stderr)
        return 2
    return None


def _calibrate(args: argparse.Namespace, rig, real, proposer, fallback, ccfg, name: str, out: Path, *,
               executor, ledger, resume: str):
    """``run_calibration`` with the terminal's progress and the library's output in ``run.log``:
    ``(result or None, (exit code, message) of a failure or None, warnings caught, whether run.json exists)``."""
    from ..calibration.loop import CalibrationError, load_history, run_calibration
    from ..calibration.objective import measurement_unit
    from ..calibration.nuisance import add_measurement_nuisances, describe_free, offset_unit
    from ..report.terminal import CalibrationTerminal

    fitted = add_measurement_nuisances(  # what run_calibration fits (was: only the rig's own free parameters)
        rig.parameters, ccfg.nuisance, keypoints=real.keypoint_names, excitations=real.train_excitations,
        real_trial=real.truth is None, unit=offset_unit(real.train), source="config")
    term = CalibrationTerminal({s.name: s.unit for s in fitted.free}, iterations=ccfg.iterations,
                               budget=ccfg.rollout_budget, unit=measurement_unit(real.train),
                               verbosity=-1 if args.quiet else min(int(args.verbose), 1), proposer=proposer.name)
    term.line(f"calibrating rig '{rig.name}' ({describe_free(fitted)}) with '{name}' against "
              f"{real.source or 'the real trial'}; budget {ccfg.rollout_budget or 'unlimited'} rollouts, "
              f"{ccfg.iterations} iterations -> {out}")
    if args.resume:  # what moved is said from where the run stopped
        try:
            term.resume_after(load_history(out)[-1])
        except (FileNotFoundError, CalibrationError):  # nothing to go on from: the run itself says so
            pass
    for w in (real.meta or {}).get("warnings", []):  # missing frames per trial, receive-time fallbacks, gaps
        term.warning(w)
    log_path = out / "run.log"
    failure: tuple[int, str] | None = None
    # run_calibration's own checks (the start-of-run effect check...) may still refuse the run: nothing goes into
    # the directory before they passed. The library log starts in a temporary file, moved into run.log once the
    # run exists (run.json); real_trial.json is written once iteration 0 is recorded.
    early_log = getattr(args, "start_log", None) or _early_log_file()  # the start stage's messages first

    def on_iteration(rec) -> None:
        _save_real_trial(out, real)
        _save_start_record(out, getattr(args, "start_record", None))
        term.iteration(rec)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            term.start()  # the bar writes to the terminal's own stderr, not to the library log below
            with library_output_to(early_log, verbose=args.verbose >= 2):  # restored before anything is printed
                result = run_calibration(rig, real, proposer, ccfg, out, fallback=fallback,
                                         on_iteration=on_iteration, on_warning=term.warning,
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
        finally:
            term.close()
            run_started = (out / "run.json").is_file()
            _move_early_log(early_log, log_path if run_started else None)
    return (None if failure is not None else result), failure, caught, run_started


def _write_report_phase(args: argparse.Namespace, out: Path, ledger, log_path: Path, missing: list) -> Path | None:
    """``report.html`` written (phase ``report``, added to ``result.json``): its path, or None when it could
    not be written (the reason appended to ``missing`` and recorded in ``result.yaml``)."""
    from ..report import ReportError, write_report

    report = None
    ledger.start("report")
    try:
        with library_output_to(log_path, verbose=args.verbose >= 2):
            report = write_report(out)
        from ..report import REPORT_SIZE_BUDGET

        size = report.stat().st_size
        if size > REPORT_SIZE_BUDGET:  # the page says why at its top
            print(f"vid2sid calibrate: warning: {report} is {size / 1e6:.2f} MB, over its "
                  f"{REPORT_SIZE_BUDGET / 1e6:g} MB budget (the embedded media of many trials; the page "
                  "names its largest sections)", file=sys.stderr)
    except (ReportError, OSError, ValueError) as err:  # the calibration result stands without its report
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        print(f"vid2sid calibrate: report not written: {why}", file=sys.stderr)
        missing.append({"file": "report.html", "error": " ".join(why.split())[:500]})
        try:
            from ..calibration.loop import mark_artefacts_missing

            mark_artefacts_missing(out, missing[-1:])
        except OSError as err2:
            print(f"vid2sid calibrate: cannot record the missing report in {out / 'result.yaml'}: "
                  f"{err2.strerror or err2}", file=sys.stderr)
    ledger.stop()
    from .phases_file import add_phase

    add_phase(out / "result.json", "report", ledger.to_dict().get("report"))
    return report


def _summary(args: argparse.Namespace, out: Path, result, report: Path | None, resume: str, ccfg, log_path: Path,
             missing: list) -> int:
    """The terminal's summary of a finished run and its exit code (0; 1 when nothing was calibrated;
    :data:`EXIT_ARTEFACT_MISSING` when a promised artefact is missing)."""
    from ..report import run_summary_lines

    for line in run_summary_lines(out, report=report, resume_command=resume,
                                  go_on=go_on_commands(args, out, ccfg)):
        print(line)
    from ..sim.mujoco_log import summary_line, take_counts

    mujoco_counts = take_counts()  # since the start: the stand-in's renders at load included
    if mujoco_counts:  # every kind in run.log (also those from before it existed); the terminal: one line
        try:
            with open(log_path, "a", encoding="utf-8") as f:
                f.writelines(f"MuJoCo warning ({n}x): {m}\n" for m, n in mujoco_counts)
        except OSError:
            pass
        print(f"warning: {summary_line(mujoco_counts, str(log_path))}")
    if args.verbose:
        for k, p in result.files.items():
            print(f"  {k}: {p}")
    else:
        print(f"results in {out}: " + ", ".join(Path(p).name for p in result.files.values()))
    if missing:  # the calibration ran, but what it promises is not all there: never exit 0
        print(f"vid2sid calibrate: the calibration ran but {len(missing)} artefact(s) could not be written: "
              + "; ".join(f"{m['file']} ({m['error']})" for m in missing)
              + f"; {out / 'result.yaml'} says status: artefacts_missing", file=sys.stderr)
        return EXIT_ARTEFACT_MISSING
    if result.status != "ok":  # a run that calibrated nothing is a failure, never exit 0
        why = next((n for r in reversed(result.history[1:]) for n in r.notes), "no iteration was run")
        print(f"vid2sid calibrate: no proposal was made in {result.iterations} iteration(s) (last: {why}); "
              f"{out / 'result.yaml'} says status: {result.status}; no calibrated model was written",
              file=sys.stderr)
        return 1
    return 0


def _special_file_in(out: Path) -> str | None:
    """Why the run directory ``out`` cannot hold the run's artefacts: an entry that is a FIFO, a device or a
    socket (``core.files.file_problem``: stat only, never opened, so never blocks), or None."""
    import stat as _stat

    from ..core.files import file_problem

    if not out.is_dir():
        return None
    try:
        entries = sorted(out.iterdir())
    except OSError:
        return None  # said by the directory's own checks
    for p in entries:
        try:
            mode = p.stat().st_mode
        except OSError:
            continue  # a dangling link: replaced by the atomic write, never opened
        if not (_stat.S_ISDIR(mode) or _stat.S_ISREG(mode)):
            return file_problem(p)
    return None


def _check_real_trial_file(path: Path, real) -> None:
    """Refuse to replace a run's ``real_trial.json`` (its hidden truth) with another truth.

    Raises:
        CalibrationError: the file holds a different (or unreadable) truth.
    """

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


def cli_prefix() -> list[str]:
    """How to call this command again so that it runs as printed: ``vid2sid`` when that name on
    PATH is the program running now; else the running program's resolved path (e.g.
    ``/home/me/vid2sid_ros/.venv/bin/vid2sid`` after ``make demo``, venv not activated); else
    (``python -m vid2sid_ros.cli``, an embedding program) this interpreter with ``-m vid2sid_ros.cli``."""
    import shutil

    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "vid2sid" and argv0.is_file():
        on_path = shutil.which("vid2sid")
        if on_path and Path(on_path).resolve() == argv0.resolve():
            return ["vid2sid"]
        return [str(argv0.resolve())]
    return [sys.executable, "-m", "vid2sid_ros.cli"]


def resume_command(args: argparse.Namespace, out: Path) -> str:
    """The exact command line that continues this run (same settings, ``--resume``), runnable as
    printed from the directory it was started in (see :func:`cli_prefix`)."""
    return _command(args, out, resume=True)


def go_on_commands(args: argparse.Namespace, out: Path, ccfg) -> dict[str, str]:
    """What continues an unconverged run, runnable as printed, by the kind of its stop:

    * ``"budget"``, ``"iterations"``: this run resumed (``--out`` the same directory, ``--resume``) with
      twice the iterations AND twice the rollout budget (whichever limit stopped it, the other would stop
      the longer run next: a run stopped at 10 iterations with 118 of 120 rollouts spent gains nothing from
      20 iterations alone); its finished iterations are kept and it goes on from the point it had reached;
    * ``"stalled"`` (only when the run's residual diagnosis finds it short of its optimum): a new run
      (``<out>_restart``, or the first free ``<out>_restartN``) started at the values the diagnosis's refit
      found, else at the run's own result (``--start NAME=VALUE,...``, every free parameter): a stalled
      run resumed would stall again at the same point.

    The summary prints one only when running longer can help (:func:`~vid2sid_ros.report.insights.go_on_advice`).
    """
    override: dict[str, Any] = {"iterations": 2 * ccfg.iterations}
    if ccfg.rollout_budget is not None:  # the budget given (a multistart's rollouts come off it again)
        override["budget"] = 2 * (int(ccfg.rollout_budget) + int(getattr(args, "start_rollouts", 0)))
    cmd = _command(args, out, resume=True, **override)
    commands = {"iterations": cmd, "budget": cmd}
    start = restart_values(out)
    if start:
        k, new = 1, out.with_name(out.name + "_restart")
        while new.exists():
            k += 1
            new = out.with_name(f"{out.name}_restart{k}")
        commands["stalled"] = _command(args, new, start=",".join(f"{n}={v:.6g}" for n, v in start.items()))
    return commands


def restart_values(out: Path) -> dict[str, float]:
    """Where a new run of the one in ``out`` should start when it stopped short of its optimum: the free
    parameters' values the residual diagnosis's refit found (verdict ``not_at_optimum``), else the run's
    identified values of its free parameters; ``{}`` when the run directory cannot be read or the
    diagnosis does not say ``not_at_optimum``."""

    from ..report.insights import optimum_values

    try:
        res = json.loads((out / "result.json").read_text(encoding="utf-8"))
        meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    diag = res.get("residual_diagnosis") if isinstance(res, dict) else None
    if not isinstance(diag, dict) or diag.get("verdict") != "not_at_optimum":
        return {}
    values = optimum_values(diag) or res.get("values") or {}
    params = (meta.get("signature") or {}).get("parameters") or []
    free = [p["name"] for p in params if isinstance(p, dict) and not p.get("frozen")]
    return {n: float(values[n]) for n in free if isinstance(values.get(n), (int, float))}


def _command(args: argparse.Namespace, out: Path, *, resume: bool = False, **override) -> str:
    import shlex

    cmd = cli_prefix() + ["calibrate"] + ([str(args.config)] if args.config else [])
    budget = override.get("budget", getattr(args, "budget", _NOT_GIVEN))
    start = override["start"] if "start" in override else ",".join(getattr(args, "start", None) or ()) or None
    for flag, value in (("--rig", args.rig), ("--proposer", args.proposer), ("--fallback", args.fallback),
                        ("--iterations", override.get("iterations", args.iterations)),
                        ("--budget", "none" if budget is None else budget),
                        ("--seed", args.seed), ("--real", args.real), ("--start", start),
                        # where the rollouts ran: a resume runs them there too (the results do not depend on it)
                        ("--executor", None if getattr(args, "executor", "serial") == "serial" else args.executor),
                        ("--workers", getattr(args, "workers", None)),
                        ("--ray-address", getattr(args, "ray_address", None))):
        if value is not None and value is not _NOT_GIVEN:
            cmd += [flag, str(value)]
    if getattr(args, "allow_code", False):  # the run's rig needed it; so does its resume
        cmd.append("--allow-code")
    return shlex.join(cmd + ["--out", str(out)] + (["--resume"] if resume else []))


def library_output_to(log_path: Path, *, verbose: bool):
    """Context: C-level stderr (OpenCV/FFmpeg codec notes) goes to ``log_path`` unless ``verbose``."""
    import contextlib

    from ..report.media import quiet_stderr

    return contextlib.nullcontext() if verbose else quiet_stderr(log_path)


def _early_log_file() -> Path:
    """A new empty temporary file (system temp directory) for the library log of a run not yet started."""
    import os
    import tempfile

    fd, name = tempfile.mkstemp(prefix="vid2sid_run_", suffix=".log")
    os.close(fd)
    return Path(name)


def _move_early_log(early: Path, log_path: Path | None) -> None:
    """Append the temporary log ``early`` to ``log_path`` (the run started) or drop it (``log_path``
    None: the run was refused and leaves nothing in its directory); ``early`` is removed."""
    try:
        data = early.read_bytes()
        if log_path is not None:
            with open(log_path, "ab") as f:  # created even when empty: the run's log is always there
                f.write(data)
    except OSError as err:
        print(f"vid2sid calibrate: cannot write {log_path}: {err.strerror or err}", file=sys.stderr)
    finally:
        with contextlib.suppress(OSError):
            early.unlink()


def _save_real_trial(out: Path, real) -> None:
    """Write the stand-in trial with its hidden truth (``real_trial.json``) into the started run's
    directory, once (an existing one was checked to hold the same truth before the run)."""
    path = out / "real_trial.json"
    if real.truth is not None and not path.is_file():
        real.save(path)


def _log_warnings(caught, log_path: Path | None, *, verbose: bool, identifiability: type,
                  show_identifiability: bool = False) -> None:
    """Every Python warning in the log (with its source), and on the terminal too with ``verbose``.
    Identifiability warnings reach the terminal through the final summary (its insights: the
    combination, the correlated pairs, a start-point warning the result did not clear), so they
    are printed here only when no summary follows (``show_identifiability``), one line each."""
    lines = [warnings.formatwarning(w.message, w.category, w.filename, w.lineno, "") for w in caught]
    if lines and log_path is not None:  # None: a refused run, whose directory receives nothing
        try:
            with open(log_path, "a", encoding="utf-8") as f:
                f.writelines(lines)
        except OSError:
            verbose = True  # the log cannot take them: do not lose them
    for w, text in zip(caught, lines):
        if verbose:
            print(text.rstrip(), file=sys.stderr)
        elif show_identifiability and issubclass(w.category, identifiability):
            print(f"warning: {w.message}", file=sys.stderr)
