"""``vid2sid demo``: calibrate a pendulum twin from the shipped real clip and write the report.

The README's main job on real input, end to end, offline (no API key):

1. track the red apple in ``vid2sid_ros/data/pendulum_redapple/redapple_480p.mov``
   (colour marker, hue wrapping through red);
2. split the clip: the first 60 % is fitted, the last 40 % is the holdout;
3. read the start point off the clip (pivot by circle fit, camera roll, period → length,
   initial angle and angular velocity: the optional ``pendulum_circle`` start plugin of the
   rig config, which only suggests nominal values — :mod:`vid2sid_ros.calibration.start`);
4. calibrate physics + camera nuisance parameters with the offline ``reasoner``, and
   with every method in ``--methods`` at the same rollout budget from the same start;
5. test which damping the data support (linear pivot damping, quadratic air drag, both);
6. write ``report.html`` (one self-contained file) and print the key numbers.

Run directories: ``<out>/<method>/`` (``iterations.jsonl``, ``result.yaml``, calibrated
model), ``<out>/drag_*`` (damping model test), ``<out>/overlay.webm``,
``<out>/summary.json``, ``<out>/report.html``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .calibrate import positive_budget_arg

HELP = "calibrate a pendulum twin from the shipped real phone clip (offline reasoner) and write an HTML report"

_BASELINES = ("random", "nelder-mead", "golden-cd", "bo", "cmaes")
#: the footage video's frames at most and width (px): with the run's overlay, figures and plotly.js the
#: report stays within :data:`vid2sid_ros.report.REPORT_SIZE_BUDGET` (about 300 kB of WebM)
FOOTAGE_MAX_FRAMES, FOOTAGE_WIDTH = 150, 256


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    parser.add_argument("--config", default=None,
                        help="rig config YAML (default: the built-in pendulum rig, vid2sid_ros/rigs/builtin/pendulum.yaml)")
    parser.add_argument("--proposer", default="reasoner", help="main proposer (default: reasoner, offline)")
    parser.add_argument("--budget", type=positive_budget_arg, default=None, metavar="N",
                        help="rollout budget per method (default: the config's calibration.rollout_budget)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="iterations per method (default: the config's calibration.iterations)")
    parser.add_argument("--methods", nargs="*", default=None,
                        help="other proposers run at the same budget and start for comparison, e.g. "
                             "'baselines' (the five black-box baselines: random nelder-mead golden-cd bo cmaes) "
                             "or 'cmaes nelder-mead'; default none (bo alone takes several minutes)")
    parser.add_argument("--no-variants", action="store_true",
                        help="skip the model-variant tests (linear vs quadratic damping, no camera drift)")
    parser.add_argument("--no-video", action="store_true", help="do not write/embed the overlay video")
    parser.add_argument("--seed", type=int, default=0, help="seed of stochastic proposers")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference in --config (runs that code; also "
                             "VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--verbose", action="store_true",
                        help="show library messages (Python warnings, OpenCV/FFmpeg) instead of only in OUT/run.log")


def _methods(arg: list[str] | None, main: str) -> list[str]:
    if arg is None:
        arg = []
    out: list[str] = []
    for m in arg:
        if m == "none":
            continue
        for name in (_BASELINES if m == "baselines" else [m]):
            if name != main and name not in out:
                out.append(name)
    return out


class DemoError(RuntimeError):
    """The demo cannot run as asked (an unusable ``--out``); the message is one line naming it."""


def _check_out(out: Path) -> None:
    """Refuse an unusable output directory ``out`` WITHOUT creating anything (before the slow work).

    Raises:
        DemoError: ``out`` is a file, lies under a file, or its nearest existing parent
            cannot be written (read-only).
    """
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {out}: exists and is not a directory; give a directory path")
    for parent in [out, *out.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise DemoError(f"--out {out}: cannot write there ({parent}: is a file, not a directory); choose a "
                                "writable directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise DemoError(f"--out {out}: cannot write there ({parent}: permission denied or read-only); "
                                "choose a writable directory")
            return


def _prepare_out(out: Path) -> None:
    """Create the output directory ``out`` and check that files can be written in it.

    Called once every refusal check has passed (:func:`_check_out` ran before the slow work).

    Raises:
        DemoError: ``out`` is a file, lies under a file, or cannot be created or written.
    """
    _check_out(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".vid2sid_write_check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        where = err.filename or out
        raise DemoError(f"--out {out}: cannot write there ({where}: {err.strerror or err}); choose a writable "
                        "directory") from None


def _report_unfinished(state: dict[str, Any], err: BaseException) -> Path:
    """Write ``<out>/report.html`` for a demo whose main calibration finished but a later step failed.

    ``state`` is what :func:`run_demo` recorded once the main calibration was saved
    (``out``, ``runs``, ``proposer``). Returns the report path.
    """
    from ..report import ReportSection, render_report

    out = Path(state["out"])
    section = ReportSection("The demo did not finish", [
        f"The calibration with the {state['proposer']} finished and is saved in {state['runs'][state['proposer']]} "
        f"(result.yaml, iterations.jsonl); a later step failed: {type(err).__name__}: {err}. The checks, the model "
        "variants and the overlay video after that step are missing from this report."])
    return render_report(out / "report.html", state["runs"], main=state["proposer"],
                         title="vid2sid: pendulum twin calibrated from a real clip (incomplete)", sections=[section])


def _is_replaceable(path: Path) -> bool:
    """True if ``path`` may be (re)used as a method's run directory: absent, empty, or a calibration run."""
    if not path.exists():
        return True
    from ..calibration.run_lock import LOCK_NAME

    # the run lock's file alone (a run refused or killed before it wrote anything) leaves the directory empty
    return path.is_dir() and ((path / "run.json").is_file() or not any(p.name != LOCK_NAME for p in path.iterdir()))


def _check_run_dirs(out: Path, labels: list[str]) -> None:
    """Refuse, before any work, a method directory ``out/<label>`` that is something else than a run.

    Raises:
        DemoError: naming the first such directory.
    """
    for label in labels:
        if not _is_replaceable(out / label):
            raise DemoError(f"--out {out}: {out / label} exists and is not a calibration run (no run.json); the "
                            "demo would replace it: move it away or choose another --out")


def _fresh_dir(path: Path) -> Path:
    """Clear a previous calibration run in ``path`` (checked by :func:`_check_run_dirs` first)."""
    if path.exists():
        if not _is_replaceable(path):  # appeared since the checks
            raise DemoError(f"{path} exists and is not a calibration run; choose another --out")
        shutil.rmtree(path)
    return path


def _run_labels(proposer: str, methods: list[str], params, variants: bool) -> list[str]:
    """The run directories (under ``--out``) a demo with these settings writes, in order."""
    labels = [proposer, *methods]
    if variants:
        free = set(params.free_names)
        if {"damping", "drag_density"} <= free:
            labels += ["drag_linear_only", "drag_quadratic_only"]
        if free & {"camera_drift_x", "camera_drift_y"}:
            labels.append("no_camera_drift")
    return labels


def run_demo(*, out: str | Path = "runs/demo", config: str | Path | None = None, proposer: str = "reasoner",
             budget: int | None = None, iterations: int | None = None, methods: list[str] | None = None,
             variants: bool = True, video: bool = True, seed: int = 0, train_fraction: float | None = None,
             max_frames: int | None = None, video_path: str | Path | None = None, log=print,
             state: dict[str, Any] | None = None, allow_code: bool = False) -> dict[str, Any]:
    """The demo pipeline (see the module docstring); returns the summary dict.

    Args:
        out: output directory. config: user-rig YAML (default: shipped pendulum).
        proposer: main proposer. budget, iterations: per method (default from the config).
        methods: other proposers (already expanded names). variants: run the model-variant
            tests (damping laws, no camera drift) with the main proposer.
        video: write the overlay video. seed: proposer seed.
        train_fraction, max_frames, video_path: trial overrides (tests use short clips).
        log: where progress lines go.
        state: if given, ``checked`` is set once every refusal check has passed and ``out``
            exists (before that nothing is written there, not even a log), and ``out``, ``runs``
            and ``proposer`` as soon as the main calibration is saved, so a caller can still
            report it when a later step raises.

    Raises:
        DemoError: ``out`` cannot be used (a file, read-only, ...).
        vid2sid_ros.io.video.VideoError: missing or corrupt clip.
        vid2sid_ros.sim.user_model.UserModelError: the marker is not found, the clip is too
            short to estimate a period, or the config is malformed (messages say which).
    """
    from ..calibration.proposers import PROPOSERS, UnknownProposerError

    for name in [proposer, *(methods or [])]:
        if name not in PROPOSERS:  # fail before the clip is decoded
            raise UnknownProposerError(f"unknown proposer {name!r}; valid proposers: {', '.join(PROPOSERS)}")
    t_start = time.perf_counter()
    out = Path(out)
    rig, file = _demo_rig(config, train_fraction=train_fraction, max_frames=max_frames, video_path=video_path,
                          allow_code=allow_code)
    # every refusal check passes before anything is written under --out (the directory is not even
    # created): the config's checks and --out's here, the clip's and the start's after the tracking
    vblock = rig.trials[0].source["video"]
    budget, iterations, nuisance, start_cfg, params = _demo_settings(rig, file, budget, iterations)
    _check_out(out)
    _check_run_dirs(out, _run_labels(proposer, list(methods or []), params, variants))

    clip, rec, real, twin = _track_demo_clip(rig, video, log)
    n_train = int(real.train_excitations[0].num_steps)
    params, budget = _demo_start(twin, real, params, start_cfg, seed=seed, budget=budget, file=file, log=log)
    _prepare_out(out)  # every check has passed: now --out is created and written
    if state is not None:
        state["checked"] = True
    real.save(out / "real_trial.json")

    cal_run = _DemoCalibrations(rig, real, out, nuisance, budget=budget, iterations=iterations, seed=seed, log=log)
    log(f"calibrating ({budget} rollouts, {iterations} iterations per method, start from the clip):")
    main_res = cal_run.calibrate(proposer, proposer, params, final_check=True)
    if state is not None:  # saved: from here on a failure still gets this run reported
        state.update(out=out, runs=cal_run.runs, proposer=proposer)
    if not real.holdout:
        log(f"  holdout: no valid frame of the marker after frame {n_train}: nothing to score it on")
    for name in methods or []:
        try:
            cal_run.calibrate(name, name, params, final_check=False)
        except Exception as err:  # noqa: BLE001 - one failing comparison method never stops the demo
            log(f"  {name:24s} failed: {type(err).__name__}: {err}")
    drag_rows, no_drift = cal_run.variants(proposer, params, main_res) if variants else ([], None)

    best = main_res.values
    whole = _twin_on_clip(real, clip, rec, twin, params, nuisance, best, n_train,
                          retime=bool(vblock.get("repair_frame_timing", True)))
    from ..report import TrajectoryPanel, save_trajectories

    kp_text = " and ".join(f"'{n}'" for n in real.keypoint_names)  # captions name the rig's own keypoints
    panel = TrajectoryPanel(f"{rig.name}: keypoint {kp_text} in the real clip vs the calibrated twin",
                            whole["real"], whole["sim"], whole["split_t"], whole["derived"])
    save_trajectories(cal_run.runs[proposer] / "trajectories.json", [panel])

    length, length_section = _length_section(rig, clip, whole, main_res)
    sections = [length_section]
    if drag_rows:
        sections.append(_damping_section(proposer, drag_rows, main_res))
    drift = _background_drift(clip, vblock.get("background_region"), best, no_drift, log, kp_text)
    if drift is not None:
        sections.append(drift)
    sections.extend(_clip_sections(real, clip, kp_text))

    videos = _demo_videos(out, rig, clip, whole, best, n_train, kp_text, log) if video else []
    hold = main_res.holdout_mae_px
    unreliable = _unreliable_because(cal_run.runs[proposer], "length")
    L, std, period = length["L"], length["std"], length["period"]
    report = _demo_report(out, cal_run, proposer, main_res, length, unreliable, budget, videos, sections)
    summary = {
        "report": str(report), "clip": str(clip.path), "frames": clip.trajectory.num_frames, "fps": clip.fps,
        "train_frames": n_train,
        "proposer": proposer, "holdout_mae_px": hold, "training_mae_px": main_res.error_px,
        "length_m": L, "length_std_m": std, "length_unreliable_because": unreliable,
        "measured_period_s": period.period_s,
        "amplitude_rad": period.amplitude_rad, "period_small_angle_s": length["period_small"],
        "period_finite_amplitude_s": length["period_finite"], "twin_period_s": length["twin_period"], "values": best,
        **_runs_summary(cal_run), "warnings": list(clip.warnings), "retimed": list(real.meta.get("retimed", [])),
        "wall_s": time.perf_counter() - t_start}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
    return summary


def _demo_report(out: Path, cal_run: "_DemoCalibrations", proposer: str, main_res, length: Mapping[str, Any],
                 unreliable: list[str], budget: int, videos: list, sections: list) -> Path:
    """Write the demo's ``report.html`` (the key numbers: holdout and training MAE in px, the identified length
    in m with its spread and any UNRELIABLE reason, the video's and the twin's periods in s, the rollouts
    spent); returns its path."""
    from ..report import render_report

    hold = main_res.holdout_mae_px
    L, std, period = length["L"], length["std"], length["period"]
    key = [("holdout MAE (last 40 %)", f"{_f(hold)} px"), ("training MAE", f"{main_res.error_px:.2f} px"),
           ("identified length", f"{L:.4f} m" + (f" ± {std:.4f} m" if std else "")
            + (f" UNRELIABLE ({'; '.join(unreliable)})" if unreliable else "")),
           ("period: video / twin", f"{period.period_s:.4f} / {length['twin_period']:.4f} s"),
           ("rollouts", f"{main_res.rollouts} of {budget}")]
    return render_report(out / "report.html", cal_run.runs, main=proposer,
                         title="vid2sid: pendulum twin calibrated from a real phone clip",
                         videos=videos, sections=sections, key_numbers=key,
                         comparison_columns=["length", "drag_density", "damping", "camera_drift_y"])


def _demo_videos(out: Path, rig, clip, whole: Mapping[str, Any], best: dict[str, float], n_train: int,
                 kp_text: str, log) -> list:
    """The overlay video for the report, ``[(caption, paths)]``; ``[]`` without thumbnails or when it fails."""
    if clip.thumbnails is None:
        return []
    try:
        paths = _overlay_video(out, clip, whole["sim"], best, n_train, whole["frame_slot"])
    except Exception as err:  # noqa: BLE001 - the report is still useful without the video
        log(f"  overlay video not written: {type(err).__name__}: {err}")
        return []
    return [(f"Real clip of {rig.name} with the calibrated twin drawn over it: dots = tracked keypoint "
             f"{kp_text}, rings and grey line from the pivot = twin; half resolution, every 2nd frame", paths)]


def _runs_summary(cal_run: "_DemoCalibrations") -> dict[str, Any]:
    """The summary's ``methods`` and ``variants``: per label, training and holdout MAE (px), rollouts, values."""
    return {
        "methods": {k: {"training_mae_px": r.error_px, "holdout_mae_px": r.holdout_mae_px, "rollouts": r.rollouts,
                        "wall_s": r.wall_s, "values": r.values} for k, r in cal_run.results.items()},
        "variants": {k: {"training_mae_px": r.error_px, "holdout_mae_px": r.holdout_mae_px, "rollouts": r.rollouts,
                         "values": r.values} for k, r in cal_run.variant_results.items()}}


def _demo_rig(config: str | Path | None, *, train_fraction: float | None, max_frames: int | None,
              video_path: str | Path | None, allow_code: bool):
    """The demo's rig (``config``, default the built-in pendulum) with the trial overrides applied; ``(rig, file)``.

    Raises:
        RigConfigError: the config is malformed, or its first trial is not a video.
    """
    from ..rigs import RigConfigError, load_rig, read_config
    from ..rigs.loader import BUILTIN_RIGS

    doc, file, base = read_config(config if config is not None else BUILTIN_RIGS["pendulum"])
    if train_fraction is not None or max_frames is not None or video_path is not None:
        if doc.get("trial"):  # legacy single-trial form
            t = dict(doc["trial"])
            t.update({k: v for k, v in (("train_fraction", train_fraction), ("max_frames", max_frames),
                                         ("video", None if video_path is None else str(Path(video_path).resolve())))
                      if v is not None})
            doc["trial"] = t
        elif doc.get("trials"):
            t = dict(doc["trials"][0])
            if train_fraction is not None:
                t["split"] = {"train_fraction": train_fraction}
            if max_frames is not None:
                t["frames"] = {"start": (t.get("frames") or {}).get("start", 0), "stop":
                               (t.get("frames") or {}).get("start", 0) + int(max_frames)}
            if video_path is not None:
                src = dict(t["source"])
                v = src.get("video")
                src["video"] = ({**v, "path": str(Path(video_path).resolve())} if isinstance(v, dict)
                                else str(Path(video_path).resolve()))
                t["source"] = src
            doc["trials"] = [t] + list(doc["trials"][1:])
    rig = load_rig(doc, source=(file, base), allow_code=allow_code)
    if not rig.trials or rig.trials[0].kind != "video":
        raise RigConfigError(f"{file}:trials: the demo needs a rig whose first trial is a video")
    return rig, file


def _demo_settings(rig, file, budget: int | None, iterations: int | None):
    """The rig config's calibration settings for the demo, ``(budget, iterations, nuisance, start, parameters)``.

    ``budget``/``iterations`` override the config's ``calibration.rollout_budget`` (default 120) and
    ``calibration.iterations`` (default 8); ``nuisance`` is the config's ``nuisance:`` block as calibrate
    reads it; ``start`` the parsed ``calibration.start``; ``parameters`` the rig's with the start's values.
    """
    from ..calibration.nuisance import rig_nuisance
    from ..calibration.start import parse_start

    cal = dict(rig.calibration or {})
    budget = int(budget or cal.get("rollout_budget", 120))
    iterations = int(iterations or cal.get("iterations", 8))
    nuisance = rig_nuisance(rig, cal, source=str(file))  # the rig config's nuisance: block, as calibrate reads it
    start_cfg, start_values = parse_start(cal.get("start"), f"{file}:calibration.start", rig.parameters)
    params = rig.parameters.with_nominal(start_values) if start_values else rig.parameters
    return budget, iterations, nuisance, start_cfg, params


def _track_demo_clip(rig, video: bool, log):
    """Track the rig's first (video) trial and build the real trial from it; ``(clip, recording, real, twin)``."""
    from ..io.clip import track_clip
    from ..io.sources import recording_from_clip
    from ..perception.quality import min_tracked_fraction
    from ..rigs import build_real_trial

    spec = rig.trials[0]
    vblock = spec.source["video"]
    log(f"tracking {vblock['path']} ...")
    start_frame, stop = spec.frames
    clip = track_clip(vblock["path"], rig.tracker, fps=vblock.get("fps"),
                      max_frames=None if stop is None else stop - start_frame, start_frame=start_frame,
                      thumb_scale=0.5 if video else None, thumb_every=2,
                      min_tracked_fraction=min_tracked_fraction(rig.config, rig.where))
    T = clip.trajectory.num_frames
    valid_frac = float(clip.trajectory.valid.all(axis=1).mean())
    log(f"  {T} frames at {clip.fps:.3f} fps ({T / clip.fps:.1f} s), {clip.size[0]}x{clip.size[1]} px, "
        f"marker found in {100 * valid_frac:.1f} % of frames")
    for w in clip.warnings:
        log(f"  warning: {w}")
    twin = rig.make_twin()
    rec = recording_from_clip(clip, name=spec.name, retime=bool(vblock.get("repair_frame_timing", True)),
                              start_frame=start_frame, background_region=vblock.get("background_region"))
    real = build_real_trial(rig, recordings={spec.name: rec})
    for n in rec.meta.get("retimed", []):
        log(f"  timing: {n}")
    return clip, rec, real, twin


def _demo_start(twin, real, params, start_cfg, *, seed: int, budget: int, file, log):
    """The generic start (no rig-specific code): the config's ``calibration.start``, e.g. the optional
    pendulum_circle guess (suggests nominal values only) and/or a multistart charged to the budget.

    Returns:
        ``(parameters with the start's nominal values, the budget left for each method)``.

    Raises:
        RigConfigError: the start is malformed or costs the whole budget.
    """
    from ..calibration.start import StartError, generic_start
    from ..rigs import RigConfigError

    try:  # a multistart costing the whole budget is refused before any rollout
        started = generic_start(twin, real, params, start_cfg, seed=seed, log=lambda s: log(f"  start: {s}"),
                                budget=budget, where=f"{file}:calibration.start")
    except StartError as err:
        raise RigConfigError(str(err)) from None
    if started.rollouts >= budget:
        raise RigConfigError(f"{file}:calibration.start.points: the multistart costs {started.rollouts} rollouts, "
                             f"the whole budget is {budget}")
    return started.parameters, budget - started.rollouts


class _DemoCalibrations:
    """The demo's calibrations, each in its own run directory under ``out``, at one budget and start.

    ``runs``/``results``: the main and comparison methods' run directories and results by label;
    ``variant_results``: the model-variant calibrations' results (not in the report's run table).
    """

    def __init__(self, rig, real, out: Path, nuisance, *, budget: int, iterations: int, seed: int, log) -> None:
        self.rig, self.real, self.out, self.nuisance = rig, real, out, nuisance
        self.budget, self.iterations, self.seed, self.log = budget, iterations, seed, log
        self.runs: dict[str, Path] = {}
        self.results: dict[str, Any] = {}
        self.variant_results: dict[str, Any] = {}

    def calibrate(self, label: str, name: str, parameters, *, final_check: bool, variant: bool = False) -> Any:
        """One calibration with proposer ``name`` into ``out/label``; its one-line summary goes to the log."""
        from ..calibration.loop import CalibrationConfig, run_calibration
        from ..calibration.proposers import make_proposer

        rd = _fresh_dir(self.out / label)
        t0 = time.perf_counter()
        cfg_cal = CalibrationConfig(iterations=self.iterations, rollout_budget=self.budget, seed=self.seed,
                                    identifiability=False, final_identifiability=final_check, video=False,
                                    nuisance=self.nuisance)
        res = run_calibration(self.rig, self.real,
                              make_proposer(name, **({"seed": self.seed} if name in _BASELINES else {})),
                              cfg_cal, rd, parameters=parameters)
        if variant:
            self.variant_results[label] = res
        else:
            self.runs[label] = rd
            self.results[label] = res
        h = "–" if res.holdout_mae_px is None else f"{res.holdout_mae_px:.2f}"
        self.log(f"  {label:24s} train {res.error_px:6.2f} px  holdout {h:>6s} px  rollouts {res.rollouts:4d}  "
                 f"{time.perf_counter() - t0:5.1f} s")
        return res

    def variants(self, proposer: str, params, main_res) -> tuple[list, Any]:
        """The model-variant tests with the main proposer: linear vs quadratic damping, no camera drift.

        Returns:
            ``([(damping model text, result), ...] with the main run last, or [];
            the no-drift result or None)``.
        """
        drag_rows = []
        no_drift = None
        self.log("model variants (main proposer, same budget):")
        if {"damping", "drag_density"} <= set(params.free_names):
            for label, text, off in (("drag_linear_only", "linear pivot damping only", "drag_density"),
                                     ("drag_quadratic_only", "quadratic air drag only", "damping")):
                p = params.with_nominal({off: 0.0}).with_frozen([off])
                drag_rows.append((text, self.calibrate(label, proposer, p, final_check=False, variant=True)))
            drag_rows.append(("both (main run)", main_res))
        drift_names = [n for n in ("camera_drift_x", "camera_drift_y") if n in params.free_names]
        if drift_names:
            p = params.with_nominal({n: 0.0 for n in drift_names}).with_frozen(drift_names)
            no_drift = self.calibrate("no_camera_drift", proposer, p, final_check=False, variant=True)
        return drag_rows, no_drift


def _twin_on_clip(real, clip, rec, twin, params, nuisance, best: dict[str, float], n_train: int, *,
                  retime: bool) -> dict[str, Any]:
    """The calibrated twin over the whole clip (training and holdout), paired with the real keypoints.

    Returns:
        ``{"sim", "real"}``: the twin's measured and the real trajectories over the clip; ``"roll"``: the
        rollout; ``"frame_slot"``: the time slot of every video frame (-1: a repeated frame), shape (T,);
        ``"split_t"``: the train/holdout split time (s) or None; ``"derived"``: the swing angle (rad) of both,
        when the rig has a pivot and a camera roll.
    """
    # the twin takes its own parameters; measurement nuisances the config switched on (latency, marker
    # offsets) act on its trajectory, as in the calibration
    from ..calibration.nuisance import MeasurementModel, add_measurement_nuisances
    from ..perception.frame_timing import repair_frame_timing

    measurement = MeasurementModel(add_measurement_nuisances(
        params, nuisance, keypoints=twin.keypoint_names, excitations=real.train_excitations, real_trial=True))
    twin.set_parameters(measurement.split(best)[0])
    full_exc = real.holdout_excitations[0] if real.holdout_excitations else real.train_excitations[0]
    roll = twin.rollout(full_exc)
    sim_full = measurement.apply(roll.trajectory, best)
    real_full = repair_frame_timing(clip.trajectory, clip.fps)[0] if retime else clip.trajectory
    T = clip.trajectory.num_frames
    frame_slot = np.arange(T)  # time slot of every video frame (-1: a repeated frame, no slot of its own)
    if "frame_index" in real_full.meta:
        frame_slot = np.full(T, -1)
        frame_slot[np.asarray(real_full.meta["frame_index"])] = real_full.steps
    slots_total = int(np.asarray(rec.trajectory.steps)[-1]) + 1
    split_t = n_train / clip.fps if n_train < slots_total else None
    derived = {}
    if {"pivot_x", "pivot_y", "camera_roll"} <= set(best) and "qpos" in roll.state:
        t = real_full.time
        px = best["pivot_x"] + best.get("camera_drift_x", 0.0) * t
        py = best["pivot_y"] + best.get("camera_drift_y", 0.0) * t
        k0 = real_full.keypoints[:, 0]
        ang_real = np.arctan2(k0[:, 0] - px, k0[:, 1] - py) + best["camera_roll"]
        q = np.asarray(roll.state["qpos"])
        steps = np.asarray(real_full.steps)
        inside = steps < q.shape[0]  # the twin ran the training part only when the holdout has no valid frame
        ang_sim = np.full(steps.shape, np.nan)
        ang_sim[inside] = q[steps[inside], 0]  # rows paired by time slot
        derived["swing angle"] = ("rad", ang_real, ang_sim)
    return {"sim": sim_full, "real": real_full, "roll": roll, "frame_slot": frame_slot, "split_t": split_t,
            "derived": derived}


def _length_section(rig, clip, whole: Mapping[str, Any], main_res):
    """The check of the identified length against the swing period measured in the video.

    Returns:
        ``(numbers, section)``: ``numbers`` holds ``L`` (m), ``std`` (m or None), ``period`` (the video's
        period estimate over the whole clip), ``twin_period``, ``period_small``, ``period_finite`` (s).
    """
    from ..report import ReportSection
    from ..sim.pendulum import STANDARD_GRAVITY, estimate_start as _est, pendulum_period

    best = main_res.values
    T = clip.trajectory.num_frames
    whole_p = _est(whole["real"], rig.parameters)  # period and amplitude over the whole clip
    try:
        twin_period = _est(whole["sim"], rig.parameters).period_s  # the twin's swing, measured the same way
    except Exception:  # noqa: BLE001 - a twin that does not swing: no period to compare
        twin_period = math.nan
    L = best.get("length", math.nan)
    period_small = pendulum_period(L, 0.0) if L > 0 else math.nan
    period_finite = pendulum_period(L, whole_p.amplitude_rad) if L > 0 else math.nan
    std = (main_res.uncertainty or {}).get("length")
    section = ReportSection(
        "Is the identified length consistent with the swing period?",
        [f"Measured in the video: period {whole_p.period_s:.4f} s (from the rest crossings over the whole "
         f"{T / clip.fps:.1f} s clip), mean amplitude {whole_p.amplitude_rad:.3f} rad "
         f"({math.degrees(whole_p.amplitude_rad):.1f}°). "
         f"For a simple pendulum T = 2π√(L/g) for small swings, times 2K(sin²(θ₀/2))/π at amplitude θ₀ "
         f"(complete elliptic integral K; g = {STANDARD_GRAVITY} m/s²).",
         f"Identified length {L:.4f} m" + (f" (± {std:.4f} m, Gauss–Newton: assumes independent pixel errors, "
                                           "so it is optimistic)" if std else "") +
         f": small-angle period {period_small:.4f} s, with the finite-amplitude correction {period_finite:.4f} s "
         f"({100 * (period_finite - whole_p.period_s) / whole_p.period_s:+.2f} % vs measured); the calibrated "
         f"twin's swing, measured in its own trajectory the same way as the video's, has a period of "
         f"{twin_period:.4f} s. Lengths implied by the "
         f"measured period: {whole_p.length_small_angle_m:.4f} m (small-angle) and {whole_p.length_m:.4f} m "
         "(finite amplitude). The twin is a physical pendulum (sphere of radius 38 mm), whose equivalent length "
         "exceeds the centre distance by 2r²/(5L) ≈ 0.5 mm."],
        ["quantity", "value"],
        [["measured period [s]", whole_p.period_s], ["mean amplitude [rad]", whole_p.amplitude_rad],
         ["identified length [m]", L], ["period, small-angle formula [s]", period_small],
         ["period, finite-amplitude formula [s]", period_finite],
         ["period of the calibrated twin's trajectory [s]", twin_period],
         ["length from measured period, small-angle [m]", whole_p.length_small_angle_m],
         ["length from measured period, finite-amplitude [m]", whole_p.length_m]])
    numbers = {"L": L, "std": std, "period": whole_p, "twin_period": twin_period, "period_small": period_small,
               "period_finite": period_finite}
    return numbers, section


def _damping_section(proposer: str, drag_rows: Sequence[tuple[str, Any]], main_res):
    """Which damping law the data support: linear pivot damping, quadratic air drag, both (the main run)."""
    from ..report import ReportSection

    best = main_res.values
    rows = []
    for text, r in drag_rows:
        v = r.values
        rows.append([text, r.error_px, r.holdout_mae_px, v.get("damping"), v.get("drag_density"), v.get("length")])
    lin, quad = drag_rows[0][1], drag_rows[1][1]
    verdict = ("quadratic drag fits better" if quad.error_px < lin.error_px else "linear damping fits better")
    both_v = main_res.values
    return ReportSection(
        "Which damping do the data support?",
        [f"Three calibrations with the {proposer} at the same budget: {verdict} on the training part "
         f"({quad.error_px:.3f} vs {lin.error_px:.3f} px) and the holdout "
         f"({_f(quad.holdout_mae_px)} vs {_f(lin.holdout_mae_px)} px). With both free the fit keeps "
         f"damping = {both_v.get('damping', math.nan):.2e} N·m·s/rad and drag_density = "
         f"{both_v.get('drag_density', math.nan):.3g} kg/m³ (still air: 1.2). The amplitude only decays from "
         f"about {abs(best.get('initial_angle', math.nan)):.2f} rad by ~15 % over the clip, so the two decay "
         "laws (exponential vs. 1/(1+ct)) differ little here: the preference is weak and should not be "
         "over-read. Damping and drag are identified for the assumed bob mass (frozen); only their ratios "
         "to the mass are visible in a video."],
        ["damping model", "training MAE [px]", "holdout MAE [px]", "damping [N·m·s/rad]", "drag_density [kg/m³]",
         "length [m]"], rows)


def _clip_sections(real, clip, kp_text: str) -> list:
    """Report sections about the clip itself: the repaired frame timing, the tracking warnings."""
    from ..report import ReportSection

    sections = []
    if real.meta.get("retimed"):
        sections.append(ReportSection(
            "Frame timing repaired",
            ["The container stamps a constant frame rate, but the phone dropped or repeated single frames. "
             f"Where keypoint {kp_text} moves fast such a glitch is unmistakable (about twice or zero times the expected "
             "displacement between two frames), so each frame was given the time slot it was really captured in "
             "before fitting (model-free, the same rule on the training and holdout parts; "
             "vid2sid_ros.perception.frame_timing.repair_frame_timing):"] + list(real.meta["retimed"])))
    if clip.warnings:
        sections.append(ReportSection("Tracking warnings", list(clip.warnings)))
    return sections


def _unreliable_because(run_dir: Path, name: str) -> list[str]:
    """Why the value of ``name`` in the run ``run_dir`` is UNRELIABLE, by the rule ``vid2sid calibrate``
    prints (:attr:`~vid2sid_ros.report.insights.ParameterRow.flagged`: the run did not converge, the value
    is at a bound, or it is in a poorly identifiable combination); [] when it is not flagged.

    Raises:
        ReportError: ``run_dir`` is not a finished run directory.
    """
    from ..report.insights import parameter_rows
    from ..report.run import load_run

    row = next((r for r in parameter_rows(load_run(run_dir)) if r.name == name), None)
    if row is None or not row.flagged:
        return []
    return list(row.unreliable_because) or ["interval not reliable"]


def _f(x: Any) -> str:
    return "–" if x is None or not math.isfinite(float(x)) else f"{float(x):.2f}"


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def _background_drift(clip, region, best: dict[str, float], no_drift, log, keypoint: str = "the keypoint"):
    """Independent check of the identified camera drift on a static patch of the wall."""
    if not region or clip.thumbnails is None or "camera_drift_x" not in best:
        return None
    from ..report import ReportSection
    from ..sim.image_projection import ProjectionError, measure_background_shift

    s = clip.thumb_scale
    x0, y0, x1, y1 = (int(round(v * s)) for v in region)
    kp = clip.trajectory.keypoints[::clip.thumb_every, 0]
    # usable: the bob (and its shadows, right of it) well clear of the patch
    usable = np.isfinite(kp[:, 0]) & ((kp[:, 0] - 60 > region[2]) | (kp[:, 0] + 160 < region[0]))
    try:
        idx, shift, score = measure_background_shift(clip.thumbnails, (x0, y0, x1, y1), usable=usable,
                                                     search_px=8, stride=3)
    except ProjectionError as err:
        log(f"  background drift not measured: {err}")
        return None
    good = score > 0.6
    if good.sum() < 5:
        return None
    t = idx[good] * clip.thumb_every / clip.fps
    sh = shift[good] / s
    rate = [float(np.polyfit(t, sh[:, c], 1)[0]) for c in (0, 1)]
    total = sh[-1] - sh[0]
    return ReportSection(
        "Camera drift: identified vs measured on the wall",
        [f"The phone moves during the clip. Template matching of a textured patch of the wall (x {region[0]}–"
         f"{region[2]}, y {region[1]}–{region[3]} px, {int(good.sum())} frames where {keypoint} is clear of it) "
         f"shows the background sliding by ({total[0]:+.1f}, {total[1]:+.1f}) px over {t[-1] - t[0]:.1f} s, a "
         f"mean rate of ({rate[0]:+.3f}, {rate[1]:+.3f}) px/s. The calibration, which never saw this "
         f"measurement, identified camera_drift = ({best['camera_drift_x']:+.3f}, {best['camera_drift_y']:+.3f}) "
         f"px/s from {keypoint} alone."
         + ("" if no_drift is None else
            f" With the drift frozen at 0 the same calibration reaches {_f(no_drift.error_px)} px on the training "
            f"part and {_f(no_drift.holdout_mae_px)} px on the holdout (the swing's lowest point creeps up the "
            "image and the twin cannot follow).")],
        ["", "x [px/s]", "y [px/s]"],
        [["measured on the wall (linear fit)", rate[0], rate[1]],
         ["identified (camera_drift_x/y)", best["camera_drift_x"], best["camera_drift_y"]]])


def _overlay_video(out: Path, clip, sim, best: dict[str, float], n_train: int, frame_slot: np.ndarray) -> list[Path]:
    """Thumbnails with the twin (string + ring) and the tracked apple (dot); WebM/VP8.

    ``frame_slot`` maps each video frame to its time slot (the sim row drawn on it)."""
    import cv2

    from ..core.trajectory import Trajectory
    from ..io.video import write_side_by_side

    s, every = clip.thumb_scale, clip.thumb_every
    idx = np.arange(0, clip.trajectory.num_frames, every)[: len(clip.thumbnails)]
    sub = max(1, int(np.ceil(len(idx) / FOOTAGE_MAX_FRAMES)))  # the report's size budget
    idx, every = idx[::sub], every * sub
    frames = clip.thumbnails[::sub][: len(idx)]
    f = min(1.0, FOOTAGE_WIDTH / frames.shape[2])
    if f < 1.0:  # a smaller picture: VP8 bytes grow with the area
        size = (FOOTAGE_WIDTH, int(round(frames.shape[1] * f / 2)) * 2)
        frames = np.stack([cv2.resize(fr, size, interpolation=cv2.INTER_AREA) for fr in frames])
        s *= f
    frames = np.ascontiguousarray(frames)
    real_kp = clip.trajectory.keypoints[idx] * s
    slots = frame_slot[idx]
    sim_kp = np.full(real_kp.shape, np.nan)
    ok = (slots >= 0) & (slots < sim.num_frames)
    sim_kp[ok] = sim.keypoints[slots[ok]] * s
    for j, k in enumerate(idx):
        t = (slots[j] if slots[j] >= 0 else k) / clip.fps
        if "pivot_x" in best and np.all(np.isfinite(sim_kp[j, 0])):
            piv = ((best["pivot_x"] + best.get("camera_drift_x", 0.0) * t) * s,
                   (best["pivot_y"] + best.get("camera_drift_y", 0.0) * t) * s)
            cv2.line(frames[j], (int(round(piv[0])), int(round(piv[1]))),
                     (int(round(sim_kp[j, 0, 0])), int(round(sim_kp[j, 0, 1]))), (90, 90, 90), 1, cv2.LINE_AA)
        holdout = (slots[j] if slots[j] >= 0 else k) >= n_train
        label = f"{'HOLDOUT' if holdout else 'TRAIN'}  t={t:5.2f} s"  # bottom left: the top holds the legend
        cv2.putText(frames[j], label, (4, frames.shape[1] - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
                    (200, 30, 30) if holdout else (30, 30, 30), 1, cv2.LINE_AA)
    valid_r = clip.trajectory.valid[idx]
    tr = Trajectory(idx / clip.fps, real_kp, valid_r, clip.trajectory.names, "real")
    ts = Trajectory(idx / clip.fps, sim_kp, np.all(np.isfinite(sim_kp), axis=2), sim.names, "sim")
    fps = clip.fps / every
    # WebM only (VP8: Chromium, Firefox and Safari play it); no MPEG-4 Part 2 copy, which Chromium cannot play
    return [write_side_by_side(out / "overlay.webm", frames, None, fps, traj_a=tr, traj_b=ts,
                               labels=("real", "twin"), codec="VP80")]


def _unfinished(state: dict[str, Any], err: BaseException) -> int:
    """The main calibration is saved but a later step raised: report it, say so in one line, exit 1."""
    run_dir = state["runs"][state["proposer"]]
    try:
        report = f"report (incomplete): {_report_unfinished(state, err)}"
    except Exception as rerr:  # noqa: BLE001 - the run directory is still there
        report = f"no report ({type(rerr).__name__}: {rerr})"
    print(f"vid2sid demo: the calibration finished and is saved in {run_dir}, but a later step failed: "
          f"{type(err).__name__}: {err}; {report}", file=sys.stderr)
    return 1


def summary_lines(s: Mapping[str, Any], lines: Sequence[str]) -> list[str]:
    """The demo's terminal summary: the stop reason, the holdout error, the residual diagnosis's
    warnings (before any claim that the identified length is physical), the length, the other
    warnings, the period checks, the methods, where the report is.

    The identified length carries the mark UNRELIABLE when ``s["length_unreliable_because"]`` lists a
    reason (the rule ``vid2sid calibrate`` prints by, :func:`_unreliable_because`); a reason the stop line
    already gives is not repeated.

    Args:
        s: the demo's summary dict (``summary.json``). lines: :func:`~vid2sid_ros.report.run_summary_lines`
            of the main run, unwrapped (may be empty).
    """
    from ..report.insights import unconverged_reason

    out: list[str] = []
    if lines:
        out.append(lines[0])  # the stop reason first
    out.append(f"holdout MAE (last 40 % of the clip, never fitted): {_f(s['holdout_mae_px'])} px "
               f"(training {s['training_mae_px']:.2f} px, {s['proposer']})")
    residual = [ln for ln in lines if ln.startswith("warning: Residual diagnosis")]
    for line in residual:  # the model is probably wrong: said before the identified length
        out.append(line)
    std = s.get("length_std_m")
    because = list(s.get("length_unreliable_because") or [])
    stop = unconverged_reason(lines[0].removeprefix("stopped: ")) if lines else ""
    own = [c for c in because if not (stop and "UNRELIABLE" in lines[0] and c == stop)]  # the stop line says it
    out.append(f"identified length: {s['length_m']:.4f} m"
               + (f" ± {std:.4f} m (1σ, Gauss–Newton: local, optimistic)" if std else "")
               + (" UNRELIABLE" + (f" ({'; '.join(own)})" if own else "") if because else ""))
    for line in lines:
        if line.startswith("warning:") and line not in residual:  # e.g. damping and drag poorly identified
            out.append(line)
    out.append(f"period: measured in the video {s['measured_period_s']:.4f} s; calibrated twin "
               f"{s['twin_period_s']:.4f} s; T(L) = {s['period_finite_amplitude_s']:.4f} s at the clip's "
               f"{s['amplitude_rad']:.3f} rad amplitude "
               f"({s['period_small_angle_s']:.4f} s small-angle)")
    if len(s["methods"]) > 1:
        out.append("methods (same budget, same start):")
        for k, m in s["methods"].items():
            out.append(f"  {k:24s} train {m['training_mae_px']:6.2f} px  holdout {_f(m['holdout_mae_px']):>6s} px  "
                       f"L = {m['values'].get('length', math.nan):.4f} m")
    out.append(f"total {s['wall_s']:.0f} s")
    out.append(f"report: {s['report']}")
    return out


def run(args) -> int:
    """Entry point of ``vid2sid demo``."""
    from ..calibration.proposers import UnknownProposerError
    from ..io.video import VideoError
    from ..io.clip import ClipError
    from ..rigs import RigConfigError, UnknownRigError
    from ..sim.user_model import UserModelError

    from ..core.parameters import ParameterSpecError
    from ..calibration.nuisance import NuisanceConfigError
    from ..calibration.start import StartError

    import contextlib
    import warnings

    from ..report.media import quiet_stderr

    state: dict[str, Any] = {}
    log_path = Path(args.out) / "run.log"
    import tempfile

    # library noise (Python warnings, OpenCV/FFmpeg codec notes printed from C) goes to the run's log; it is
    # collected in a temporary file first, so nothing is written to --out before run_demo's checks pass
    noise = None
    if not args.verbose:
        fd, noise = tempfile.mkstemp(prefix="vid2sid_demo_", suffix=".log")
        os.close(fd)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with quiet_stderr(noise) if noise else contextlib.nullcontext():
                    s = run_demo(out=args.out, config=args.config, proposer=args.proposer, budget=args.budget,
                                 iterations=args.iterations, methods=_methods(args.methods, args.proposer),
                                 variants=not args.no_variants, video=not args.no_video, seed=args.seed,
                                 state=state, allow_code=args.allow_code)
            finally:
                _keep_log(noise, log_path if state.get("checked") else None)
        _log_warnings(caught, log_path, verbose=args.verbose)
    except (VideoError, ClipError, RigConfigError, UnknownRigError, UserModelError, FileNotFoundError,
            UnknownProposerError, ImportError, DemoError, ParameterSpecError, StartError, NuisanceConfigError) as err:
        if "runs" not in state:
            print(f"vid2sid demo: {err}", file=sys.stderr)
            return 1
        return _unfinished(state, err)
    except Exception as err:  # noqa: BLE001 - after the calibration: report what finished, then fail
        if "runs" not in state:
            raise
        return _unfinished(state, err)
    from ..report import ReportError, run_summary_lines

    from ..report.terminal import terminal_width, wrap_line

    print()
    try:
        lines = run_summary_lines(Path(args.out) / s["proposer"], width=1 << 30)  # picked from whole, wrapped below
    except ReportError:
        lines = []
    width = terminal_width()
    for line in summary_lines(s, lines):
        for part in wrap_line(line, width):
            print(part)
    return 0


def _keep_log(tmp: str | None, log_path: Path | None) -> None:
    """Append the collected library messages to ``log_path`` (None: the run was refused, keep nothing);
    drop the temp file."""
    if not tmp:
        return
    try:
        text = Path(tmp).read_bytes()
        if text and log_path is not None and log_path.parent.is_dir():
            with open(log_path, "ab") as f:
                f.write(text)
    except OSError:
        pass
    finally:
        Path(tmp).unlink(missing_ok=True)


def _log_warnings(caught, log_path: Path, *, verbose: bool) -> None:
    """Every Python warning into the run's log (with its source line); on the terminal only with --verbose."""
    lines = [warnings_format(w) for w in caught]
    if not lines:
        return
    try:
        with open(log_path, "a", encoding="utf-8") as f:
            f.writelines(lines)
    except OSError:
        verbose = True
    if verbose:
        for text in lines:
            print(text.rstrip(), file=sys.stderr)


def warnings_format(w) -> str:
    import warnings

    return warnings.formatwarning(w.message, w.category, w.filename, w.lineno, "")
