"""The sim2sim benchmark: do the methods recover the *true* parameters?

For each seed a hidden ground truth is drawn inside the bounds
(:func:`~vid2sid_ros.benchmark.sim2sim.draw_ground_truth`: uniform in normalised
coordinates over [0.15, 0.85] of every free parameter's range, linear or log as its
spec says, so that no truth sits on a bound), a stand-in "real" trial is made by the
rig's twin at that truth (:func:`~vid2sid_ros.benchmark.sim2sim.make_sim2sim_trial`;
by default through the camera: rendered frames + the rig's sensor noise model + the
marker tracker, while the calibrating twin uses projected ground-truth keypoints; a rig
config's joint-state and mocap trials are driven by their recorded commands and measured as
joint or marker positions with their declared noise, as ``vid2sid calibrate`` reads them),
and every method calibrates from the spec's nominal values with the same rollout
budget on the training excitations. A rig config's ``calibration.start`` stage (a guess
plugin, a multistart; :mod:`~vid2sid_ros.calibration.start`) runs once per seed on that
seed's stand-in trial, and every method starts from its result, with its rollouts charged
to every method's budget (``start`` in the per-seed record). The best parameters are then
scored on the holdout excitations.

Metrics per method (``results.json``):

- ``mean_rel_param_error``: mean over free parameters and seeds of ``|θ − θ*| / |θ*|``
  (the paper's sim2sim metric: 8.7 % for Vid2Sid on the finger, 28–98 % for baselines);
- ``holdout_mae`` / ``train_mae``: mean over seeds of the MAE at the best parameters, in ``holdout_unit`` /
  ``unit`` (px for image keypoints, m for mocap points, rad for joints);
- ``rollouts``, ``iterations``, ``wall_s``: mean over seeds;
- ``per_parameter``: mean relative error of each parameter; ``per_seed``: everything per seed.

Identifiability at the nominal point is checked once per seed (diagnostic rollouts,
not charged) and written next to the results.

Misspecification (``misspecify``, CLI ``--misspecify KIND[=SIZE],...``): the stand-in real
side differs from the twin as :mod:`~vid2sid_ros.benchmark.misspecification` documents
(latency, frozen, friction, camera, rolling_shutter, drops). Every calibration ends with the residual
diagnosis (:mod:`~vid2sid_ros.calibration.diagnosis`); per method the results count

- ``detected``: seeds whose diagnosis named the misspecification, alone or in a set of causes
  it reports as indistinguishable (latency → ``latency``, frozen → ``frozen``, friction →
  ``friction``, camera → ``camera``, rolling_shutter → ``rolling_shutter``, drops → ``timing``);
- ``false_alarms``: seeds with any misspecification *warning* on an unmodified rig;
- ``latency_error_frames``: ``|identified − realised latency| × frame rate`` when the
  latency is misspecified and the ``latency`` nuisance is free;
- ``latency_free``: seeds whose calibration fitted the ``latency`` nuisance (with no
  latency injected there is no error to measure: the cell says so, not "not free").
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..calibration.loop import CalibrationConfig, CalibrationError, check_run_dir
from ..calibration.proposers import make_proposer
from ..calibration.start import StartConfig, StartError, check_start_budget, parse_start
from ..core.rig import Rig
from ..core.trial import jsonable
from .sim2sim import check_camera_noise, describe_stand_in, measures_image, stand_in_measurements
from .sweep import cell_keys_current

__all__ = ["run_benchmark", "format_results_markdown", "resolve_rig", "DEFAULT_METHODS"]

DEFAULT_METHODS = ("reasoner", "random", "nelder-mead", "golden-cd", "bo", "cmaes")

#: misspecification kind -> the diagnosis kind that names it
DETECTED_AS = {"latency": "latency", "frozen": "frozen", "friction": "friction", "camera": "camera",
               "rolling_shutter": "rolling_shutter", "drops": "timing", "mass": "inertia", "deadzone": "actuator",
               "backlash": "actuator", "focal": "camera"}


def resolve_rig(name: str | Rig, *, allow_code: bool = False, **options: Any) -> Rig:
    """A rig from a rig config file or a built-in rig name, through :func:`vid2sid_ros.rigs.load_rig`
    (``options`` = the built-in twin's options). A ``module:function`` reference is refused unless
    ``allow_code`` (or ``VID2SID_ALLOW_CODE=1``).

    Raises:
        UnknownRigError: unknown name (lists them). RigConfigError: a bad config or refused code.
    """
    if isinstance(name, Rig):
        return name
    from ..rigs import load_rig

    return load_rig(name, allow_code=allow_code, overrides={"rig_options": options} if options else None)


def _resolve_noise(rig: Rig, noise: str, measured: Mapping[str, Any] | None = None) -> str:
    """The stand-in's noise mode (:data:`~vid2sid_ros.benchmark.sim2sim.NOISE_MODES`) for ``noise``.

    ``auto``: ``camera`` when some trial measures image keypoints and the rig has a tracker,
    ``keypoint`` when it has none, ``sensor`` when no trial measures image keypoints (joint
    states, mocap: each trial's declared noise). ``measured``: the rig's
    :func:`~vid2sid_ros.benchmark.sim2sim.stand_in_measurements` (read when None).

    Raises:
        CalibrationError: ``camera`` or ``keypoint`` for a rig none of whose trials measures image keypoints.
    """
    from .sim2sim import measures_image, stand_in_measurements

    measured = stand_in_measurements(rig) if measured is None else measured
    image = measures_image(rig, measured)
    if noise == "auto":
        return ("camera" if rig.tracker else "keypoint") if image else "sensor"
    if noise in ("camera", "keypoint") and not image:
        kinds = ", ".join(sorted({m.kind for m in measured.values() if m is not None}))
        raise CalibrationError(f"--noise {noise}: no trial of rig '{rig.name}' measures image keypoints (they "
                               f"measure {kinds}); use --noise auto or sensor (each trial's declared noise), or none")
    return noise


def _rig_start(rig: Rig, budget: int | None) -> "StartConfig | None":
    """The rig config's ``calibration.start`` stage, or None when it is the nominal start.

    Raises:
        CalibrationError: a bad block, or start values (the benchmark draws its own truths and
            starts every method from the spec's nominal values, moved only by the start stage).
    """
    block = (getattr(rig, "calibration", None) or {}).get("start")
    if block is None:
        return None
    where = f"{rig.where}:calibration.start"
    try:
        cfg, values = parse_start(block, where, rig.parameters)
    except StartError as err:
        raise CalibrationError(str(err)) from None
    if values:
        raise CalibrationError(f"{where}: start values ({', '.join(sorted(values))}) are not used by the sim2sim "
                               "benchmark (every method starts from the spec's nominal values); remove them, or "
                               "give only kind/points/guess")
    if not cfg.guess and cfg.kind == "nominal":
        return None
    try:
        check_start_budget(cfg, len(rig.excitations.get("train", ())), budget, where, budget_key="--budget")
    except StartError as err:
        raise CalibrationError(str(err)) from None
    return cfg


def run_benchmark(
    rig: str | Rig,
    methods: Sequence[str] = DEFAULT_METHODS,
    seeds: int | Sequence[int] = 5,
    *,
    budget: int = 40,
    iterations: int = 10,
    noise: str = "auto",
    out: str | Path | None = None,
    truth_range: tuple[float, float] = (0.15, 0.85),
    final_identifiability: bool = False,
    proposer_options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool = True,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    misspecify: str | Mapping[str, float] | None = None,
    nuisance: Mapping[str, Any] | None = None,
    nominal_identifiability: bool = True,
    diagnosis: bool = True,
    executor: Any = None,
    active_learning: Any = None,
) -> dict[str, Any]:
    """Run the sim2sim benchmark (module docstring) and write ``out/results.{json,md}``.

    Args:
        rig: registered rig name, ``"module:function"`` entry point, or a :class:`Rig`.
        methods: proposer names (see :func:`~vid2sid_ros.calibration.proposers.make_proposer`).
        seeds: number of seeds (0..N-1) or explicit seeds.
        budget: rollouts per calibration. iterations: proposal iterations per calibration.
        noise: ``camera`` | ``keypoint`` | ``sensor`` | ``none`` | ``auto`` (the image trials' noise: camera when
            the rig has a tracker; ``sensor`` when no trial measures image keypoints). Joint-state and mocap
            trials are measured as their source measures them, with their declared σ (exact with ``none``).
        out: output directory (per-run directories ``seed_K/METHOD`` go inside); None = no files.
        truth_range: normalised range of the hidden truths.
        final_identifiability: also run the identifiability check at each result (diagnostic).
        proposer_options: ``{method: constructor kwargs}``.
        progress: show a tqdm bar on stderr.
        on_result: called with each per-seed, per-method result dict.
        misspecify: ``"latency=0.02,frozen"`` or ``{kind: size}`` (module docstring).
        nuisance: the calibration's ``nuisance:`` switches (default: the rig config's
            ``nuisance:`` block, else the defaults: latency free).
        nominal_identifiability: run the identifiability check at the nominal point per seed
            (``identifiability_nominal`` in the per-seed record; 4n + 1 evaluations, diagnostic).
        diagnosis: the residual diagnosis after each calibration (diagnostic rollouts).
        executor: where the seeds and cells run (:mod:`~vid2sid_ros.benchmark.sweep`: each finished
            cell persisted at once, a rerun on the same ``out`` resumes, a cell whose worker died
            twice recorded as failed); None: serially. ``threads`` is refused (cells hold whole
            calibrations: use ``pool`` or ``ray``).
        active_learning: an enabled :class:`~vid2sid_ros.calibration.active.ActiveLearningConfig`:
            every calibration runs in phases with designed trials that the stand-in runs
            (:func:`~vid2sid_ros.calibration.active.run_active_calibration`; the phases in
            ``OUT/seed_K/METHOD/phase_J``); design rollouts are charged (``rollouts``) and reported
            under ``active_learning`` in each record.

    Returns:
        The ``results.json`` content.

    Raises:
        UnknownRigError, UnknownProposerError: on bad names (checked before any work).
        MisspecificationError: a bad ``misspecify`` (checked before any work).
        Sim2SimError: camera noise on a rig whose render shows none of the tracker's marker
            colours (:func:`~vid2sid_ros.benchmark.sim2sim.check_camera_noise`, before any work), or
            a stand-in trial with no valid keypoint (a ``camera`` misspecification turning the
            camera away): raised before that seed's runs, and for the first seed before ``out`` exists.
        CalibrationError: a budget below one evaluation (checked before any work), or an `out`
            holding runs made with other settings.
    """
    settings, seed_list, methods = _checked_sweep(
        rig, methods, seeds, budget=budget, iterations=iterations, noise=noise, out=out, truth_range=truth_range,
        final_identifiability=final_identifiability, proposer_options=proposer_options, misspecify=misspecify,
        nuisance=nuisance, nominal_identifiability=nominal_identifiability, diagnosis=diagnosis,
        active_learning=active_learning)
    if executor is not None and executor.backend == "threads":
        raise CalibrationError("--executor threads runs one calibration's finite differences; a benchmark sweep "
                               "runs its cells on a process pool or Ray: use pool or ray (or serial)")
    return _run_checked_sweep(settings, seed_list, methods, executor, progress=progress, on_result=on_result)


def _run_checked_sweep(settings: Any, seed_list: list[int], methods: list[str], executor: Any, *, progress: bool,
           on_result: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    """Run a checked sweep's cells with a progress bar; partial and final ``results.{json,md}`` in ``out``."""
    from .sweep import run_sweep

    rig_obj, out_dir, mis = settings.rig, settings.out_dir, settings.mis
    stand_in = describe_stand_in(rig_obj, settings.noise)
    t_all = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(seed_list) * len(methods), desc=f"sim2sim {rig_obj.name}", unit="run")

    def cell_done(rec: dict[str, Any]) -> None:
        if bar is not None:
            bar.set_postfix_str(f"seed {rec['seed']} {rec['method']}")
            bar.update(1)
        if on_result:
            on_result(rec)

    def summary(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
        return _summarise(rig_obj, methods, per_seed, settings.budget, settings.iterations, settings.noise,
                          settings.truth_range, time.perf_counter() - t_all, mis, failures, stand_in)

    def partial(per_seed: list[dict[str, Any]]) -> None:  # partial results survive an interruption
        if out_dir is not None:
            _write(out_dir, summary(per_seed))

    failures: list[dict[str, Any]] = []
    try:
        per_seed = run_sweep(settings, seed_list, methods, executor, on_cell=cell_done, on_change=partial,
                             failures=failures)
    finally:
        if bar is not None:
            bar.close()
    results = summary(per_seed)
    if executor is not None:
        results["executor"] = executor.describe()
    if out_dir is not None:
        _write(out_dir, results)
    return results


def _checked_sweep(rig: str | Rig, methods: Sequence[str], seeds: int | Sequence[int], *, budget: int,
                   iterations: int, noise: str, out: str | Path | None, truth_range: tuple[float, float],
                   final_identifiability: bool, proposer_options: Mapping[str, Mapping[str, Any]] | None,
                   misspecify: str | Mapping[str, float] | None, nuisance: Mapping[str, Any] | None,
                   nominal_identifiability: bool, diagnosis: bool,
                   active_learning: Any) -> tuple[Any, list[int], list[str]]:
    """A benchmark's sweep settings, seeds and methods once every refusal of :func:`run_benchmark` has passed."""
    from ..calibration.nuisance import parse_nuisance_config, rig_nuisance
    from .misspecification import check_misspecification, parse_misspecify
    from .sweep import SweepSettings

    mis = parse_misspecify(misspecify)
    rig_obj = resolve_rig(rig)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    methods = list(methods)
    for m in methods:  # fail fast on a bad name
        make_proposer(m, **dict((proposer_options or {}).get(m, {})))
    n_train = len(rig_obj.excitations.get("train", ()))
    if n_train and budget is not None and budget < n_train:  # fail before the (slow) stand-in trials are built
        raise CalibrationError(f"rollout budget {budget} cannot pay for one evaluation of rig '{rig_obj.name}' "
                               f"({n_train} training excitations = {n_train} rollouts); use a budget >= {n_train}")
    measured = stand_in_measurements(rig_obj)  # what each trial measures (joints, mocap, image keypoints)
    noise_mode = _resolve_noise(rig_obj, noise, measured)
    if noise_mode == "camera" and measures_image(rig_obj, measured):  # a render the tracker finds nothing in:
        check_camera_noise(rig_obj)  # refused before any rollout or file
    check_misspecification(rig_obj, mis)  # a kind the rig cannot express: refused before any file is written
    if nuisance is not None:  # an explicit block (the CLI's --no-latency) is checked like the config's
        parse_nuisance_config(nuisance, source="nuisance")
        nuisance = dict(nuisance)
    else:
        nuisance = rig_nuisance(rig_obj, source=rig_obj.where)
    start_cfg = _rig_start(rig_obj, budget)  # a bad calibration.start block: refused before any file is written
    out_dir = Path(out) if out is not None else None
    active = active_learning if active_learning is not None and active_learning.enabled else None
    if out_dir is not None:  # every run directory's refusal checks before anything is written
        if out_dir.exists() and not out_dir.is_dir():
            raise CalibrationError(f"{out_dir} is a file, expected the benchmark's output directory")
        for seed in seed_list:
            for m in methods:
                rd = out_dir / f"seed_{seed}" / m
                if active is not None:
                    rd = rd / "phase_0"  # the phases of an active-learning run are run directories of their own
                check_run_dir(rd, proposer_name=m, real=None, parameters=rig_obj.parameters,
                              config=CalibrationConfig(resume=(rd / "run.json").is_file(), nuisance=nuisance))
    settings = SweepSettings(rig=rig_obj, budget=budget, iterations=iterations, noise=noise_mode,
                             truth_range=truth_range, final_identifiability=final_identifiability,
                             proposer_options=dict(proposer_options or {}), mis=dict(mis or {}),
                             nuisance=None if nuisance is None else dict(nuisance),
                             nominal_identifiability=nominal_identifiability, diagnosis=diagnosis,
                             start=start_cfg, out_dir=out_dir, detected_as=DETECTED_AS, active_learning=active)
    return settings, seed_list, methods


def _active_run(rig: Rig, real: Any, method: str, proposer_options: Mapping[str, Mapping[str, Any]] | None,
                cfg: CalibrationConfig, active: Any, run_dir: Path | None, truth: Mapping[str, float], seed: int,
                noise: str, mis: Mapping[str, float] | None, parameters: Any) -> tuple[Any, dict[str, Any]]:
    """One calibration with active learning: the stand-in runs the designed trials (calibration/active.py)."""
    from ..calibration.active import run_active_calibration
    from .sim2sim import sim2sim_stand_in

    stand_in = sim2sim_stand_in(rig, truth, seed=seed, noise=noise, misspecify=dict(mis) if mis else None)
    out = run_active_calibration(rig, real, lambda: make_proposer(method, **dict((proposer_options or {}).get(
        method, {}))), replace(cfg, resume=False), active, run_dir, stand_in=stand_in,
        **({"parameters": parameters} if parameters is not None else {}))
    return out.result, {"active_learning": {
        "rollouts_charged": out.rollouts, "design_rollouts": out.design_rollouts, "robot_trials": out.robot_trials,
        "warning_before": out.warning_before, "warning_after": out.warning_after,
        "rationale": [d.get("rationale") or d.get("reason") for d in out.designs]}}


def _common(units: Sequence[str | None]) -> str | None:
    """The one unit every record names, or None (records of earlier versions name none; mixed)."""
    return units[0] if units and units[0] is not None and all(u == units[0] for u in units) else None


def error_columns(results: Mapping[str, Any]) -> tuple[float, str, float, str]:
    """``(factor, unit label, holdout factor, holdout unit label)`` of a benchmark's error columns:
    metres shown in mm (:func:`vid2sid_ros.core.trajectory.display_unit`); "unit?" when the
    results do not say (written by an earlier version)."""
    from ..core.trajectory import display_unit

    ms = list((results.get("methods") or {}).values())
    u = _common([m.get("unit") for m in ms])
    hu = _common([m.get("holdout_unit") or m.get("unit") for m in ms])
    f, lu = display_unit(u) if u else (1.0, "unit?")
    hf, lhu = display_unit(hu) if hu else (1.0, "unit?")
    return f, lu, hf, lhu


def _scaled(x: float | None, f: float) -> float | None:
    return None if x is None else x * f


def _mean(xs: Sequence[float | None]) -> float | None:
    v = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return float(np.mean(v)) if v else None


def _summarise(rig: Rig, methods: Sequence[str], per_seed: list[dict[str, Any]], budget: int, iterations: int,
               noise: str, truth_range: tuple[float, float], wall: float,
               mis: Mapping[str, float] | None = None, failures: Sequence[Mapping[str, Any]] = (),
               stand_in: tuple[str, str] | None = None) -> dict[str, Any]:
    """``results.json``: per-method summaries over ``per_seed``; ``stand_in`` = the protocol's (real side,
    sim side) wording (:func:`~vid2sid_ros.benchmark.sim2sim.describe_stand_in`, read from the rig when None)."""
    free = rig.parameters.free_names
    summary: dict[str, Any] = {}
    for m in methods:
        recs = [cell_keys_current(s["methods"][m]) for s in per_seed if m in s["methods"]]  # earlier: *_px keys
        if not recs:
            continue
        rel_all = [r["rel_error"][n] for r in recs for n in free]
        seed_means = [r["mean_rel_error"] for r in recs]
        summary[m] = {
            "mean_rel_param_error": float(np.mean(rel_all)),
            "std_rel_param_error_over_seeds": float(np.std(seed_means)),
            "median_rel_param_error": float(np.median(rel_all)),
            "holdout_mae": _mean([r["holdout_mae"] for r in recs]),
            "train_mae": _mean([r["train_mae"] for r in recs]),
            "unit": _common([r.get("unit") for r in recs]),
            "holdout_unit": _common([r.get("holdout_unit") for r in recs]),
            "rollouts": _mean([r["rollouts"] for r in recs]),
            "iterations": _mean([r["iterations"] for r in recs]),
            "wall_s": _mean([r["wall_s"] for r in recs]),
            "per_parameter": {n: float(np.mean([r["rel_error"][n] for r in recs])) for n in free},
            "seeds": len(recs),
        }
        own = [r.get("own_rel_error") or r["rel_error"] for r in recs]  # unmoved cells: their own point already
        if any(r.get("own_rel_error") for r in recs):
            summary[m]["own_point_mean_rel_param_error"] = float(np.mean([o[n] for o in own for n in free]))
            summary[m]["bias_corrected_seeds"] = int(sum(bool(r.get("own_rel_error")) for r in recs))
        if mis:
            summary[m]["detected"] = {k: int(sum(bool((r.get("detected") or {}).get(k)) for r in recs)) for k in mis}
        else:
            summary[m]["false_alarms"] = int(sum(bool(r.get("false_alarm")) for r in recs))
        summary[m]["latency_free"] = int(sum("latency" in (r.get("nuisance") or {}) for r in recs))
        al = [r["active_learning"] for r in recs if r.get("active_learning")]
        if al:  # designed trials: design rollouts (included in rollouts), trials run, warnings before/after
            summary[m]["active_learning"] = {
                "design_rollouts": float(np.mean([a["design_rollouts"] for a in al])),
                "robot_trials": int(sum(a["robot_trials"] for a in al)),
                "warning_before": int(sum(a["warning_before"] is not None for a in al)),
                "warning_after": int(sum(a["warning_after"] is not None for a in al))}
        lat = [r["latency_error_frames"] for r in recs if r.get("latency_error_frames") is not None]
        if lat:
            summary[m]["latency_error_frames"] = {"mean": float(np.mean(lat)), "max": float(np.max(lat))}
    return jsonable({
        "rig": rig.name, "free_parameters": free, "methods": summary, "budget_rollouts": budget,
        "iterations": iterations, "noise": noise, "truth_range_normalised": list(truth_range),
        "seeds": [s["seed"] for s in per_seed], "wall_s_total": wall,
        "failed_cells": list(failures or []), "misspecification": dict(mis or {}),
        "protocol": ("hidden truth uniform in normalised [{:.2f}, {:.2f}] per free parameter; real side: twin at the "
                     "truth{}; sim side: {}; calibration from the nominal values on the "
                     "training excitations; scores at the reported parameters (the best seen, or the point a convergence test passed at); holdout on the holdout excitations"
                     ).format(truth_range[0], truth_range[1], *(stand_in or describe_stand_in(rig, noise)))
                    + ("; the real side is misspecified: " + ", ".join(f"{k}={v:g}" for k, v in (mis or {}).items())
                       if mis else ""),
        "per_seed": per_seed})


def _write(out_dir: Path, results: Mapping[str, Any]) -> None:
    """``results.json`` and ``results.md``, each written atomically (a reader never sees half a file)."""
    for name, text in (("results.json", json.dumps(results, indent=1)), ("results.md", format_results_markdown(results))):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, out_dir / name)


def _f(x: Any, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def _spread(r: Mapping[str, Any]) -> str:
    """The ± of the error column: std over seeds, or why there is none."""
    n = int(r.get("seeds", 0) or 0)
    return f"±{100 * r['std_rel_param_error_over_seeds']:.1f} over {n} seeds" if n > 1 else "1 seed: no spread"


def detection_cell(method: Mapping[str, Any]) -> str:
    """The "misspecification detected" cell of one method's summary (``results["methods"][m]``).

    The one wording of ``results.md`` and ``report.html``: ``"latency 4/5, frozen 3/5"``
    (seeds whose diagnosis named each injected kind), ``"none injected; false alarms 1/5"``
    (an unmodified rig: seeds whose diagnosis still said misspecified), or ``"not tested
    (no --misspecify)"`` for a summary that has neither count.
    """
    n = int(method.get("seeds", 0) or 0)
    if "detected" in method:
        return ", ".join(f"{k} {v}/{n}" for k, v in method["detected"].items())
    if "false_alarms" in method:
        return f"none injected; false alarms {method['false_alarms']}/{n}"
    return "not tested (no --misspecify)"


def latency_error_cell(method: Mapping[str, Any]) -> str:
    """The "latency error" cell (frames): ``"0.120 (max 0.310)"``, or why there is none.

    Args:
        method: one method's summary (``results["methods"][m]``): ``latency_error_frames``
            ``{"mean", "max"}`` (frames) when a latency was injected and fitted,
            ``latency_free`` (seeds that fitted the latency nuisance; absent in old results).

    Returns:
        the numbers; ``"n/a (latency fitted, none injected)"`` when the latency was free but
        the real side had none to recover; ``"n/a (latency not free)"`` otherwise.
    """
    le = method.get("latency_error_frames")
    if le:
        return f"{le['mean']:.3f} (max {le['max']:.3f})"
    return "n/a (latency fitted, none injected)" if method.get("latency_free") else "n/a (latency not free)"


def diagnosis_lines(results: Mapping[str, Any]) -> list[str]:
    """What the residual diagnosis said, per method, before any parameter figure (Markdown lines).

    ``"Residual diagnosis: reasoner warned in 5/5 calibrations (named: offset 5/5): those parameters
    are probably compensating a model error, not physical."``; one line per method that warned, with
    the kinds its warnings and notes named and in how many seeds; nothing when no calibration warned.
    """
    out = []
    for m in results["methods"]:
        recs = [s["methods"][m] for s in results.get("per_seed", []) if m in s.get("methods", {})]
        warned = [r for r in recs if (r.get("diagnosis") or {}).get("misspecified")]
        if not warned:
            continue
        kinds: dict[str, int] = {}
        for r in warned:
            for k in dict.fromkeys(r["diagnosis"].get("kinds") or []):
                kinds[k] = kinds.get(k, 0) + 1
        named = ", ".join(f"{k} {v}/{len(recs)}" for k, v in kinds.items())
        out.append(f"Residual diagnosis: {m} warned in {len(warned)}/{len(recs)} calibrations (named: {named}): those "
                   "parameters are probably compensating a model error, not physical.")
    return out + [""] if out else []


def format_results_markdown(results: Mapping[str, Any]) -> str:
    """The results table (and per-parameter / per-seed tables) as Markdown."""
    methods = {m: cell_keys_current(r) for m, r in results["methods"].items()}
    free = results["free_parameters"]
    f, lu, hf, lhu = error_columns({"methods": methods})
    # a column only when the tracker-bias correction moved some cell (filmed stand-ins)
    own_head = (" own point, before the bias correction |"
                if any(r.get("own_point_mean_rel_param_error") is not None for r in methods.values()) else "")
    lines = [f"# sim2sim benchmark: {results['rig']}", "",
             f"{len(results['seeds'])} seeds ({', '.join(map(str, results['seeds']))}), budget "
             f"{results['budget_rollouts']} rollouts and {results['iterations']} iterations per calibration, "
             f"noise: {results['noise']}.", "", f"Protocol: {results['protocol']}.", "",
             *diagnosis_lines(results),
             f"| method | mean rel. param. error |{own_head} holdout MAE ({lhu}) "
             f"| train MAE ({lu}) | rollouts | iterations "
             "| wall (s) "
             "| misspecification detected | latency error (frames) |",
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if own_head else "")]
    order = sorted(methods, key=lambda m: methods[m]["mean_rel_param_error"])
    for m in order:
        r = methods[m]
        own = r.get("own_point_mean_rel_param_error")
        own_cell = ((f" {100 * own:.2g} % ({r['bias_corrected_seeds']} of {r['seeds']} seeds moved) |" if own is not None
                     else " not moved |") if own_head else "")
        lines.append(f"| {m} | {100 * r['mean_rel_param_error']:.1f} % ({_spread(r)}) |{own_cell}"
                     f" {_f(_scaled(r.get('holdout_mae'), hf), '.3g')} | {_f(_scaled(r.get('train_mae'), f), '.3g')} "
                     f"| {_f(r['rollouts'], '.0f')} "
                     f"| {_f(r['iterations'], '.1f')} | {_f(r['wall_s'], '.1f')} | {detection_cell(r)} "
                     f"| {latency_error_cell(r)} |")
    active = [m for m in order if methods[m].get("active_learning")]
    if active:
        lines += ["", "Active learning (designed trials run by the stand-in; their design rollouts are included in "
                  "the rollouts above):", "", "| method | design rollouts (mean) | trials run | identifiability "
                  "warning before → after (seeds) |", "|---|---|---|---|"]
        for m in active:
            a = methods[m]["active_learning"]
            lines.append(f"| {m} | {a['design_rollouts']:.0f} | {a['robot_trials']} | {a['warning_before']} → "
                         f"{a['warning_after']} |")
    if any(methods[m].get("own_point_mean_rel_param_error") is not None for m in order):
        lines += ["", "The reported values are corrected for the tracker's bias (the least-squares optimum with the twin "
                  "filmed like the robot, from the final identifiability check's diagnostic rollouts, which the budget "
                  "does not charge); the 'own point' column is each method's own result at the budget, before that "
                  "correction: compare methods there."]
    lines += ["", "± = standard deviation over seeds of each seed's mean error (needs two seeds or more); n/a = not "
              "measured for that method (no holdout excitation, no evaluation, latency not free, or no latency injected)."]
    lines += ["", "Mean relative error per parameter:", "",
              "| method | " + " | ".join(free) + " |", "|---|" + "---|" * len(free)]
    for m in order:
        pp = methods[m]["per_parameter"]
        lines.append(f"| {m} | " + " | ".join(f"{100 * pp[n]:.1f} %" for n in free) + " |")
    lines += ["", "Mean relative parameter error per seed:", "",
              "| seed | " + " | ".join(order) + " |", "|---|" + "---|" * len(order)]
    for s in results["per_seed"]:
        cells = [f"{100 * s['methods'][m]['mean_rel_error']:.1f} %" if m in s["methods"] else "not run" for m in order]
        lines.append(f"| {s['seed']} | " + " | ".join(cells) + " |")
    warns = [f"- seed {s['seed']}: {s['identifiability_warning']}" for s in results["per_seed"]
             if s.get("identifiability_warning")]
    if warns:
        lines += ["", "Identifiability warnings at the nominal point:", ""] + warns
    lines.append("")
    return "\n".join(lines)
