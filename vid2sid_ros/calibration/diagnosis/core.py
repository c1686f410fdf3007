"""The diagnosis entry point: build the context, compare the causes, say what was found."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ...core.parameters import ParameterSet
from ..nuisance import LATENCY, MEASUREMENT_PREFIX
from ..objective import NOISE_UNIT, TrialObjective, resolution_floor
from ..proposers.rationale import format_value
from .advice import how_to_free, separating_trial
from .causes import Composite, FrozenParameter, candidate_causes
from .chi2 import chi2_ppf
from .compare import (Refit, Score, _at_edge, decide, far_start, free_columns, held_out_check, line_scan, polish,
                      refit, refit_far, screen)
from .consider import ConsiderResult, consider
from .context import ProbeContext
from .result import THRESHOLDS, Diagnosis, Finding

__all__ = ["diagnose"]


def diagnose(objective: TrialObjective, values: Mapping[str, float], *, parameters: ParameterSet | None = None,
             probe: bool = True, holdout: TrialObjective | None = None,
             families: Sequence[str] | None = None,
             intervals: Mapping[str, Sequence[float]] | None = None,
             measurement_bias: Sequence[Any] | None = None,
             tracker_bias_candidate: Sequence[Any] | str | None = None,
             free_jacobian: np.ndarray | None = None, resolution_scale: float | None = None,
             far_refit: bool = True, far_refit_why_not: str = "the calibration did not converge",
             converged: bool | None = None) -> Diagnosis:
    """Compare candidate causes of the residual at ``values`` (package docstring).

    Args:
        objective: the calibration's training objective (twin, excitations, real trajectories).
        values: the identified values (full or partial, SI).
        parameters: the spec (default ``objective.parameters``): which parameters are free.
        probe: run the comparison (diagnostic rollouts: one evaluation per free physics parameter
            and per model-side cause, a few per refit); False keeps only the latency note and the
            whiteness test.
        holdout: the holdout trials' objective (same twin) for the check of a recommendation;
            None: the last part of each training trial is held out instead.
        families: restrict the candidates to these :data:`~.causes.CAUSE_FAMILIES` (default all).
        intervals: ``{free name: [lower, upper]}`` the run's statistical 95 % intervals (its unit), for the
            consider analysis (:mod:`.consider`); None: Gauss–Newton on the diagnosis's own columns.
        measurement_bias: the tracker's bias per training excitation, measured by filming the twin at
            ``values`` like the robot (:func:`~vid2sid_ros.calibration.tracker_bias.twin_tracker_bias`;
            the run's ``final_identifiability.bias_trajectories``): added to the twin's keypoints in every
            training residual, as the interval does (:class:`~.context.ProbeContext`). None: none measured.
        tracker_bias_candidate: when ``measurement_bias`` is None, the tracker's bias measured on renders
            of the twin at ``values`` (same form): a candidate cause of its own (:class:`~.causes.TrackerBias`),
            compared with the camera and marker candidates it would otherwise be taken for; or a string, why it
            could not be measured (kept in ``statistics["tracker_bias_candidate_not_measured"]``); None: not
            looked for.
        free_jacobian: (M, F) the free columns :func:`~.compare.free_columns` would measure (forward
            differences of the training residual at ``values`` on ``objective``, step ``probe_step`` of
            :data:`~.result.THRESHOLDS`, ``parameters.free`` order) already measured by the caller (the run's
            final identifiability check, :attr:`~vid2sid_ros.calibration.identifiability.IdentifiabilityReport.forward_jacobian`):
            used instead of measuring them again (F diagnostic rollouts saved); None, or a matrix of another
            shape, measures them.
        far_refit: refit from afar where the local refits leave a systematic part (step 7; thousands of
            rollouts on a small rig). False: not (``statistics.far_refit_skipped`` says why: ``far_refit_why_not``).
        far_refit_why_not: the reason kept in ``statistics.far_refit_skipped`` when ``far_refit`` is False.
        converged: the calibration stopped ``converged`` (None: unknown). False, with ``far_refit``: the free
            parameters are refitted from afar before a cause is named (``statistics.far_null_check``).
        resolution_scale: the misfit's scale for the simulation's resolution (measurement unit: the training
            MAE at the start of the calibration, as the reasoner's convergence test reads it;
            :func:`~vid2sid_ros.calibration.objective.resolution_floor`): a refit of the free parameters that
            lowers the squared residual by no more than that floor is no evidence against the optimum, as for
            the convergence test. None: the error at ``values`` alone sets the scale.

    Returns:
        :class:`Diagnosis`. A point that cannot be simulated gives one ``structure`` warning saying so.
        With ``probe``, ``consider`` holds the consider analysis and a ``caveat`` finding names the
        identified values that rest on a nominal value these trials cannot check.
    """
    params = parameters if parameters is not None else objective.parameters
    candidate = None if isinstance(tracker_bias_candidate, str) else tracker_bias_candidate
    ctx = ProbeContext(objective, values, params, holdout, bias=measurement_bias, bias_candidate=candidate)
    if ctx.failed:
        return Diagnosis([Finding("structure", "warning", f"The identified parameters cannot be simulated "
                                                          f"({ctx.base.message}); nothing else can be diagnosed.")],
                         {}, ctx.rollouts, verdict="failed")
    stats = _base_stats(ctx, tracker_bias_candidate)
    findings = _latency_note(ctx) + _initial_state_note(ctx)
    verdict, recommendation, considered = "none", None, None
    causes: list[dict[str, Any]] = []
    if _at_simulation_resolution(ctx, stats, findings):
        return Diagnosis(findings, stats, ctx.rollouts, verdict="none")
    if probe:
        verdict, recommendation, found, considered = _compare(
            ctx, stats, families, intervals, free_jacobian, None if far_refit else far_refit_why_not, resolution_scale,
            converged)
        findings += found
        if found and (verdict in ("named", "indistinguishable") or found[0].evidence.get("causes")):  # its finding
            ev = found[0].evidence
            causes = [dict(c) for c in ev.get("causes") or ev.get("group") or []] or [
                {"cause": ev.get("cause", ""), "kind": found[0].kind, "fields": list(ev.get("fields") or [])}]
    if verdict == "none":
        findings += _structure(ctx, stats)
        if any(f.kind == "structure" for f in findings):
            verdict = "unexplained"
    if verdict in ("named", "indistinguishable", "unexplained") and any(
            f.severity == "warning" and f.kind != "latency" for f in findings):
        findings = [_latency_in_doubt(f) if f.kind == "latency" and f.severity == "note" else f for f in findings]
    if considered is not None and considered.caveats:
        named = [c["parameter"] for c in considered.caveats]
        ev = {"caveats": considered.caveats, "intervals": {n: considered.intervals.get(n) for n in named}}
        msg = considered.message
        if verdict == "none" and considered.unchecked:  # at the noise level, but resting on unchecked nominals
            verdict = "unchecked"
            lead, listed, sep = _unchecked(considered.unchecked)
            msg = lead + " " + msg
            ev.update(causes=listed, set_size=len(considered.unchecked), separate_with=sep)
            causes = [dict(c) for c in listed]
        findings.append(Finding("consider", "caveat", msg, ev))
    findings.sort(key=lambda f: {"warning": 0, "caveat": 1}.get(f.severity, 2))
    size = len(considered.unchecked) if verdict == "unchecked" else \
        len(causes) + (1 if verdict == "not_at_optimum" and causes else 0)  # the optimum is one of that set
    return Diagnosis(findings, stats, ctx.rollouts, verdict=verdict, recommendation=recommendation,
                     consider=considered.to_dict() if considered is not None else None, causes=causes, set_size=size)


def _base_stats(ctx: ProbeContext, tracker_bias_candidate: Any) -> dict[str, Any]:
    """The statistics every diagnosis reports: unit, frame rate, samples, residual and noise RMS, the tracker's bias."""
    n = int(ctx.ok.sum())
    ssr0 = ctx.ssr(ctx.r0)
    stats: dict[str, Any] = {"unit": ctx.unit, "frame_rate_hz": ctx.rate, "samples": n,
                             "residual_rms": math.sqrt(ssr0 / max(n, 1)), "noise_rms": math.sqrt(ctx.sigma2),
                             "noise_estimator": "successive differences (von Neumann 1941; Rice 1984)",
                             "tracker_bias": ctx.bias is not None,
                             "tracker_bias_candidate": ctx.bias_candidate is not None}
    if ctx.bias_candidate is not None:
        stats["tracker_bias_candidate_rms"] = ctx.candidate_bias_rms
    elif isinstance(tracker_bias_candidate, str) and ctx.bias is None:
        stats["tracker_bias_candidate_not_measured"] = tracker_bias_candidate
    return stats


def _at_simulation_resolution(ctx: ProbeContext, stats: dict[str, Any], findings: list[Finding]) -> bool:
    """Whether the fit reproduces the measurement to the simulation's resolution (noise-free data): then a
    ``resolution`` note is appended to ``findings``, ``stats`` says so, and nothing else is diagnosed."""
    resolution = _simulation_resolution(ctx)
    if resolution is not None and stats["residual_rms"] <= resolution:
        # an exact fit of noise-free data: what is left is the simulator's round-off, no cause can be compared on
        # it (its successive-difference "noise" is round-off too: every refit would look significant)
        stats["simulation_resolution_rms"] = resolution
        stats["at_simulation_resolution"] = True
        findings.append(Finding("resolution", "note", (
            f"The twin reproduces the measurement to the simulation's resolution (training residual "
            f"{stats['residual_rms']:.3g} {ctx.unit} RMS, within 1e-9 of the measured motion: "
            f"{resolution:.3g} {ctx.unit}): nothing is left to diagnose."),
            {"residual_rms": stats["residual_rms"], "resolution_rms": resolution, "unit": ctx.unit}))
        return True
    return False


def _simulation_resolution(ctx: ProbeContext) -> float | None:
    """The residual RMS below which the twin reproduces the measurement to the simulation's resolution
    (the measurement's unit), or None when the residual is in noise units (mixed units).

    ``1e-9`` times the RMS of the measured motion (each trial's keypoint coordinates about their mean, valid
    samples): a rollout's residual is a smooth function of the parameters only down to about 1e-9 of the
    scale of the data (integrator and float64 round-off over thousands of steps; the reasoner's convergence
    test ends noise-free fits at the same relative level, :meth:`~..proposers.reasoner.Reasoner._floor`).
    """
    if ctx.unit == NOISE_UNIT:
        return None
    parts = []
    for r in ctx.reals:
        k = np.asarray(r.keypoints, float)
        v = np.asarray(r.valid, bool)
        if not v.any():
            continue
        mean = np.nanmean(np.where(v[..., None], k, np.nan), axis=0)
        parts.append((k - mean)[v].ravel())
    if not parts:
        return None
    d = np.concatenate(parts)
    d = d[np.isfinite(d)]
    return 1e-9 * float(np.sqrt(np.mean(d ** 2))) if d.size else None


def _unchecked(unchecked: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """The ``unchecked`` verdict's sentence, its listed causes (at most ``set_max_causes``, those that move an
    identified value furthest first) and the trial that would check them."""
    cap = int(THRESHOLDS["set_max_causes"])
    keys = ("cause", "kind", "fields", "parameters", "max_shift_relative")
    listed = [{k: u[k] for k in keys} for u in unchecked[:cap]]
    more = f" and {len(unchecked) - cap} more" if len(unchecked) > cap else ""
    names = "; ".join(f"{u['cause']} (moves {', '.join(u['parameters'])} by up to "
                      f"{100 * u['max_shift_relative']:.0f} %)" for u in listed)
    kinds = [u["kind"] for u in listed] + [k for u in listed for k in u.get("parameter_kinds", [])]
    sep = separating_trial([_KindOf(k) for k in dict.fromkeys(kinds)])  # the causes against what they move
    lead = (f"Nothing beyond the noise, but these trials cannot check {len(unchecked)} nominal value(s) the identified "
            f"values rest on: {names}{more}. With these trials a plausible error in any of them is indistinguishable "
            f"from none; {sep} would tell.")
    return lead, listed, sep


class _KindOf:
    """A stand-in with a ``kind`` for :func:`~.advice.separating_trial`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind


def _latency_note(ctx: ProbeContext) -> list[Finding]:
    lat = next((s for s in ctx.params.free if s.target == MEASUREMENT_PREFIX + "latency"), None)
    if lat is None:
        return []
    tau = float(ctx.full[lat.name])
    span = float(lat.upper - lat.lower)
    at = ("upper" if lat.upper - tau <= 0.005 * span else "lower" if tau - lat.lower <= 0.005 * span else None)
    if at is not None:  # free already: never "free the latency"; a latency on its bound may be larger still
        return [Finding("latency", "warning",
                        f"The '{lat.name}' nuisance sits on its {at} bound ({tau * 1000:.1f} ms, {tau * ctx.rate:.2f} "
                        f"frame; bounds {1000 * lat.lower:.3g} to {1000 * lat.upper:.3g} ms): the "
                        f"{'video' if ctx.unit == 'px' else 'measurement'}'s delay may lie beyond it; widen them "
                        "(nuisance.latency.bounds) and calibrate again.",
                        {"latency_s": tau, "latency_frames": tau * ctx.rate, "at_bound": at})]
    if abs(tau) * ctx.rate < THRESHOLDS["latency_note_frames"]:
        return []
    what = "The video" if ctx.unit == "px" else "The measurement"
    return [Finding("latency", "note", f"{what} lags the commands by {tau * 1000:.1f} ms ({tau * ctx.rate:.2f} "
                                       f"frame); identified as the '{LATENCY}' nuisance and kept out of the physics.",
                    {"latency_s": tau, "latency_frames": tau * ctx.rate})]


#: a joint trial's first sample this many noise σ (plus three typical sample-to-sample changes) from the twin's
#: starts from a wrong initial state
_START_SIGMAS = 10.0


def _reading_noise(q: np.ndarray) -> float:
    """A joint reading's own noise σ (its unit) from its second differences, robustly: ``1.4826 · MAD(Δ²q) / √6``
    (white noise of σ gives Δ²q of variance 6σ²; smooth motion adds little at the recording's rate). Unlike the
    residual's noise estimate it is not inflated by a model error (a wrong start)."""
    d2 = np.diff(q, 2)
    if d2.size < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(d2 - np.median(d2))) / math.sqrt(6.0))


def _initial_state_note(ctx: ProbeContext) -> list[Finding]:
    """Joint-state training trials whose first recorded sample is far from the twin's (the same time): the trial's
    initial state (``init``) is probably wrong. A joint reading measures the state itself, so this costs no
    rollout; far means more than :data:`_START_SIGMAS` noise σ (the reading's own, :func:`_reading_noise`, or
    the diagnosis's estimate when that is smaller) plus three median sample-to-sample changes of the recording
    (the twin's first sample may lie one command period on)."""
    sigma = math.sqrt(ctx.sigma2) if ctx.sigma2 > 0 else 0.0
    out = []
    for real, sim in zip(ctx.reals, ctx.base.sim):
        if getattr(real, "kind", "") != "joints" or real.num_frames < 3 or sim is None or sim.num_frames < 2:
            continue
        far, used = [], []
        for k, n in enumerate(real.names):
            if n not in sim.names:
                continue
            ok = np.flatnonzero(real.valid[:, k])
            if ok.size < 3:
                continue
            q = real.keypoints[ok, k, 0]
            q_sim = float(np.interp(real.time[ok[0]], sim.time, sim.keypoints[:, sim.names.index(n), 0]))
            d = float(q[0] - q_sim)
            sig = min(sigma, _reading_noise(q)) if sigma > 0 else _reading_noise(q)
            used.append(sig)
            if abs(d) > _START_SIGMAS * sig + 3.0 * float(np.median(np.abs(np.diff(q)))):
                far.append((n, float(q[0]), q_sim, real.units[k]))
        if far:
            name = getattr(real, "trial_id", None) or "a training trial"
            listed = "; ".join(f"joint '{n}' reads {q:.4g} {u}, the twin {qs:.4g} {u}" for n, q, qs, u in far)
            keys = ", ".join(f"qpos[{n}]: {q:.4g}" for n, q, _, _ in far)
            out.append(Finding("initial_state", "warning",
                               f"Trial '{name}' starts away from the twin's initial state ({listed}; reading "
                               f"noise {max(used):.2g} {ctx.unit}): the trial's initial state is probably wrong, and "
                               f"the parameters absorb it. Set it (init: {{{keys}}}) or fit it (init: "
                               f"{{qpos[{far[0][0]}]: free}}), and calibrate again.",
                               {"trial": name, "joints": [{"joint": n, "recorded": q, "twin": qs, "unit": u}
                                                          for n, q, qs, u in far], "noise": max(used)}))
    return out


def _latency_in_doubt(note: Finding) -> Finding:
    """The latency note when a model error is reported beside it: a free latency absorbs part of an
    unmodelled effect as readily as the physics does, so the identified delay is not stated as a fact."""
    tau, frames = note.evidence["latency_s"], note.evidence["latency_frames"]
    return Finding("latency", "note",
                   f"The '{LATENCY}' nuisance came out at {tau * 1000:.1f} ms ({frames:.2f} frame), but with the "
                   "model error reported here unresolved it may be absorbing part of that error rather than "
                   "measuring a delay: read it as a delay only once the model error is fixed (or a trial with a "
                   "sharp command onset, such as a step, confirms it).",
                   {**note.evidence, "may_absorb_model_error": True})


def _compare(ctx: ProbeContext, stats: dict, families, intervals=None, free_jacobian=None,
             far_refit_why_not: str | None = None, resolution_scale=None, converged: bool | None = None
             ) -> tuple[str, dict | None, list[Finding], ConsiderResult | None]:
    """Screen every cause, refit the best few, decide; the findings, the checked recommendation and the
    consider analysis (:mod:`.consider`, on the screen's columns: no rollout of its own). The free
    columns are ``free_jacobian`` when it fits the residual (measured already), else measured. Refits from afar
    run where the local ones leave a systematic part, unless ``far_refit_why_not`` says why they may not; after a
    calibration that did not converge (``converged`` not True) the free parameters alone are also refitted from
    afar before any cause is named."""
    causes = candidate_causes(ctx, tuple(families) if families is not None else None)
    given = None if free_jacobian is None else np.asarray(free_jacobian, float)
    reuse = given is not None and given.shape == (ctx.r0.size, len(ctx.free))
    F = given.copy() if reuse else free_columns(ctx)
    stats["free_columns"] = "the final identifiability check's forward differences" if reuse else \
        "measured by forward differences"
    null = refit(ctx, [], [], F)
    unconverged = _not_at_optimum(ctx, F, null, stats, resolution_scale)
    scores = screen(ctx, causes, F)
    try:
        considered = consider(ctx, scores, F, null.ssr, len(causes), intervals)
    except (ValueError, np.linalg.LinAlgError) as err:  # a degenerate column set: said, never fatal
        considered = None
        stats["consider_error"] = f"{type(err).__name__}: {err}"
    if unconverged is not None:  # the free parameters alone remove the systematic part: no cause is named
        return "not_at_optimum", None, [unconverged], considered
    top = [s for s in scores if s.share_linear > 0 and s.column is not None][: int(THRESHOLDS["refit_top"])]
    for s in top:
        line_scan(ctx, s, F)
        s.refit = refit(ctx, s.parts, s.probe_columns, F, start=s.starts, start_r=s.start_r)
    dec = decide(ctx, scores, null)
    if far_refit_why_not is None and converged is False and dec["verdict"] in ("named", "indistinguishable"):
        far_optimum = _unfinished_fit(ctx, scores, null, dec, stats)
        if far_optimum is not None:  # the free parameters alone, refitted from afar, explain the residual
            return "not_at_optimum", None, [far_optimum], considered
    if _would_be_unexplained(ctx, dec, null):
        if far_refit_why_not is None:
            local_null = null
            null, dec = _far(ctx, scores, null, dec, stats)
            # the free parameters alone, refitted from afar, explain the residual and no cause does better
            far_optimum = _optimum_from_afar(ctx, null, local_null, stats, also=_far_candidates(scores, dec)) \
                if dec["verdict"] == "none" else None
            if far_optimum is not None:
                return "not_at_optimum", None, [far_optimum], considered
        else:  # an unfinished calibration (its refits from afar would be its own work, at its cost), or turned off
            stats["far_refit_skipped"] = far_refit_why_not
    if dec["verdict"] == "indistinguishable" or _pose_against_intrinsics(dec["set"]):
        # refine the tied refits (a camera's pose against its lens too): a tie must come from the data. Not a tie
        # within another kind (a dead-zone and a bias): it is named as that kind, and a threshold cause's refit
        # stalls on its kink, so its polished accuracy would look better than it is
        stats["refit_accuracy_ssr"] = accuracy = polish(ctx, dec["set"], F)
        dec = decide(ctx, scores, null, accuracy=accuracy)
    s0 = dec["s0"]
    stats["comparison"] = {
        "test": "likelihood ratio (S0 - Sc) / noise variance against the chi-square(1) quantile at 1 - alpha/n "
                "(Wilks; Bonferroni over n candidates), and at least min_share of S0",
        "candidates": len(causes), "critical_lr": dec["critical"], "tie_ssr": dec["tie"], "null_ssr": s0,
        "null_rms": math.sqrt(s0 / max(int(ctx.ok.sum()), 1)), "noise_variance": ctx.sigma2}
    stats["causes"] = [_score_dict(ctx, s, s0) for s in scores]
    if dec["verdict"] == "none":
        return "none", None, [], considered
    members: list[Score] = dec["set"]
    if "far_refit" in stats and members[0].cause.kind != "tracker":
        # refitted from afar because the local best left a systematic part: a set that still leaves one is no
        # answer either, tie or not (step 6 on its best member)
        partial = _partial(ctx, members[0], scores, s0)
        if partial is not None:
            two = _with_latency(ctx, scores, F, s0, stats) or _two_causes(ctx, scores, F, s0, stats)
            return (*(two or ("unexplained", None, [partial])), considered)
    if dec["verdict"] == "indistinguishable" or _pose_against_intrinsics(members):
        # a tie of causes each of which leaves a systematic part: two errors at once may explain it whole
        two = _two_causes(ctx, scores, F, s0, stats) if _partial(ctx, members[0], scores, s0) is not None else None
        return (*(two or ("indistinguishable", None, [_indistinguishable(ctx, members, s0)])), considered)
    if members[0].cause.kind == "tracker":
        return (*_named_tracker(ctx, members[0], scores, s0), considered)
    partial = _partial(ctx, members[0], scores, s0)
    if partial is not None:  # the best cause leaves a systematic part of its own: no single cause is named
        # unless it and a latency, or two other causes, refitted together explain it
        two = _with_latency(ctx, scores, F, s0, stats) or _two_causes(ctx, scores, F, s0, stats)
        return (*(two or ("unexplained", None, [partial])), considered)
    if len(members) == 1 or members[0].cause.kind == "camera":
        return (*_named(ctx, members, scores, F, null, s0), considered)
    return "named", None, [_same_kind(ctx, members, s0)], considered


#: kinds never paired by :func:`_two_causes`: the measurement's own bias (a note, not a model error)
_UNPAIRED = frozenset({"tracker"})


def _two_causes(ctx: ProbeContext, scores: list[Score], F: np.ndarray, s0: float, stats: dict
                ) -> tuple[str, dict | None, list[Finding]] | None:
    """Two model errors at once, when no single cause explains the residual (step 6, :func:`_partial`).

    Each of the two best refitted significant causes is paired with each of the ``pair_top`` best refitted ones
    and the 2·``pair_top`` best others on their linearised share (at least ``min_share``), two of different kinds
    (a drive's dead-zone with the camera's focal length; not two camera fields, which :func:`_named` already fits
    together, nor two causes of the drives): at most 6·``pair_top`` pairs, each refitted together with the free
    parameters from the better member's refit. A pair explains the residual when it leaves no systematic part (:func:`_leaves_systematic`), each
    member is needed (without either the sum of squares rises by more than the χ²₁ bound at ``1 − α/n``, Wilks;
    Bonferroni over the n candidates) and no size sits on its bound. The best such pair is named when every
    other explaining pair is worse by more than the tie bound (as :func:`~.compare.decide` decides one cause);
    pairs that tie are reported as indistinguishable (their causes together). Nothing is recommended: each
    error is fixed on its own (the one with a parameter freed, the other in the model) and the rig calibrated
    again. Returns None when no pair explains the residual (``statistics.pairs`` records every pair refitted).
    """
    if ctx.sigma2 <= 0:
        return None
    top = int(THRESHOLDS["pair_top"])
    usable = [s for s in scores if s.column is not None and s.cause.kind not in _UNPAIRED]
    refitted = sorted((s for s in usable if s.refit is not None and s.significant and s.determined),
                      key=lambda s: s.refit.ssr)
    anchors = refitted[:2]
    # partners: the best on their refits and on their linearised share — a second error can hide behind a first
    # that took the refits' places (a dead-zone screened only, behind the camera fields that tie for a lens)
    partners = refitted[:top]
    partners += [s for s in sorted(usable, key=lambda s: -s.share_linear)
                 if s.share_linear >= THRESHOLDS["min_share"] and not any(s is p for p in partners)][:2 * top]
    crit = chi2_ppf(1.0 - THRESHOLDS["alpha"] / max(len(scores), 1), 1)
    entries, good, seen = [], [], set()
    for a in anchors:
        for b in partners:
            if a.cause.kind == b.cause.kind or frozenset((id(a), id(b))) in seen:  # one kind: two camera fields
                continue  # (fitted together when named), two drives
            seen.add(frozenset((id(a), id(b))))
            pair = _pair_refit(ctx, a, b, F)
            if pair is None:
                continue
            explains = _pair_explains(ctx, pair, a.parts + b.parts, (_alone_ssr(a, s0), _alone_ssr(b, s0)), s0,
                                      crit)
            entry = {"causes": [a.cause.name, b.cause.name], "ssr": pair.ssr,
                     "share": 1.0 - pair.ssr / s0 if s0 > 0 else 0.0, "explains": explains}
            entries.append(entry)
            if explains:
                good.append((a, b, _pair_score(a, b, pair), entry))
    stats["pairs"] = entries
    if not good:
        return None
    # a few chord steps leave a pair short of its optimum (the sizes and which pair is best): every explaining
    # pair's refit is continued, and the pairs are decided on the data within the refits' accuracy
    tie = max(chi2_ppf(1.0 - THRESHOLDS["alpha"], 1) * ctx.sigma2, polish(ctx, [g[2] for g in good], F))
    for _, _, sc, entry in good:
        entry.update(ssr=sc.refit.ssr, share=1.0 - sc.refit.ssr / s0 if s0 > 0 else 0.0)
    good = sorted(((a, b, sc.refit) for a, b, sc, _ in good), key=lambda g: g[2].ssr)
    tied = [g for g in good if g[2].ssr - good[0][2].ssr <= tie]
    return _two_causes_finding(ctx, tied, s0)


def _pair_explains(ctx: ProbeContext, pair: Refit, parts: Sequence, alone: Sequence[float], s0: float,
                   crit: float) -> bool:
    """Whether a pair's joint refit ``pair`` explains the residual: it leaves no systematic part
    (:func:`_leaves_systematic`), each member is needed (``alone``: what each leaves alone, unit²; each lies above
    the pair's sum of squares by more than ``crit`` σ², Wilks) and no size of ``parts`` sits on its bound."""
    return (not _leaves_systematic(ctx, pair.ssr, s0) and all(x - pair.ssr > crit * ctx.sigma2 for x in alone)
            and not any(_at_edge(c, float(t)) for c, t in zip(parts, pair.theta)))


def _pair_score(a: Score, b: Score, pair: Refit) -> Score:
    """Causes ``a`` and ``b`` as one candidate (a :class:`~.causes.Composite` of their parts) with their joint
    refit ``pair``, for :func:`~.compare.polish`."""
    parts = tuple(a.parts) + tuple(b.parts)
    both = Composite(f"{a.cause.name} and {b.cause.name}", a.cause.kind, tuple(a.cause.fields) + tuple(b.cause.fields),
                     "", 0.0, (0.0, 0.0), parts=parts)
    return Score(both, None, refit=pair, columns=list(a.probe_columns) + list(b.probe_columns))


def _alone_ssr(s: Score, s0: float) -> float:
    """What cause ``s`` alone leaves (unit²): its refit's sum of squares, else its linearised one."""
    return s.refit.ssr if s.refit is not None else s0 * (1.0 - s.share_linear)


def _pair_refit(ctx: ProbeContext, a: Score, b: Score, F: np.ndarray) -> Refit | None:
    """Causes ``a`` and ``b`` refitted together with the free parameters, from their own refits' sizes (a cause
    screened only: its probe's start) and the better refit's free parameters; None when that start cannot be
    simulated."""
    first = min((x for x in (a, b) if x.refit is not None), key=lambda x: x.refit.ssr)
    parts = list(a.parts) + list(b.parts)
    start = [float(t) for x in (a, b) for t in (x.refit.theta if x.refit is not None else x.starts)]
    r0 = ctx.residual(parts, start, first.refit.u)
    if r0 is None:
        return None
    return refit(ctx, parts, list(a.probe_columns) + list(b.probe_columns), F, start=start, start_r=r0,
                 start_u=first.refit.u)


def _two_causes_finding(ctx: ProbeContext, tied: list, s0: float) -> tuple[str, dict | None, list[Finding]]:
    """The verdict of :func:`_two_causes`: ``tied`` pairs ``(a, b, refit)``, best first."""
    n = max(int(ctx.ok.sum()), 1)
    a, b, pair = tied[0]
    k = len(a.parts)
    members = []
    for (s, theta) in ((a, pair.theta[:k]), (b, pair.theta[k:])):
        m = _member(ctx, s, s0)
        m["size"], m["size_text"] = _size(ctx, s.cause, theta)
        members.append(m)
    sizes = "; ".join(f"{m['cause']} ({m['size_text']})" for m in members)
    lead = (f"Two errors at once explain the residual where no single one does: {sizes}. Fitted together with the "
            f"free parameters they take the RMS from {math.sqrt(s0 / n):.3g} to {math.sqrt(pair.ssr / n):.3g} "
            f"{ctx.unit} (noise {math.sqrt(ctx.sigma2):.3g} {ctx.unit}); each alone leaves a systematic part.")
    if len(tied) == 1:
        msg = lead + (" Nothing is recommended: fix each of them (free the one a parameter models, correct the "
                      "other in the model or the camera calibration) and calibrate again.")
        return "named", None, [Finding(a.cause.kind, "warning", msg, {"causes": members, "pair_ssr": pair.ssr})]
    union = [a, b]
    for s in (x for g in tied[1:] for x in g[:2]):
        if not any(s is u for u in union):
            union.append(s)
    listed = "; ".join(" and ".join(x.cause.name for x in g[:2]) for g in tied)
    msg = (lead + f" Other pairs explain it as well, and these trials cannot tell them apart: {listed}. None is "
                  f"recommended; {separating_trial([s.cause for s in union])} would separate them.")
    ev = {"causes": [_member(ctx, s, s0) for s in union], "pairs": [[x.cause.name for x in g[:2]] for g in tied]}
    return "indistinguishable", None, [Finding("indistinguishable", "warning", msg, ev)]


def _noise_spread(sigma2: float, n: int) -> float:
    """The noise's spread on a sum of ``n`` squared residuals of variance ``sigma2``: ``z₁₋α σ² √(2n)`` (unit²; the
    sum's standard deviation, chi-square with n degrees of freedom, times the one-sided normal quantile at α of
    :data:`~.result.THRESHOLDS`)."""
    from .chi2 import norm_ppf

    return float(norm_ppf(1.0 - THRESHOLDS["alpha"])) * sigma2 * math.sqrt(2.0 * n)


def _leaves_systematic(ctx: ProbeContext, ssr: float, s0: float) -> bool:
    """Whether a sum of squares ``ssr`` leaves a part of the systematic part ``S_0 − M σ²`` the noise does not
    account for: more than ``min_share`` of it and beyond the noise's spread ``z₁₋α σ² √(2M)`` (step 6 of the
    comparison, :func:`_partial`)."""
    if ctx.sigma2 <= 0:
        return False
    n = max(int(ctx.ok.sum()), 1)
    excess, rest = s0 - n * ctx.sigma2, ssr - n * ctx.sigma2
    bound = _noise_spread(ctx.sigma2, n)
    return excess > bound and rest > THRESHOLDS["min_share"] * excess and rest > bound


def _would_be_unexplained(ctx: ProbeContext, dec: dict, null: Refit) -> bool:
    """Whether the local decision ends *unexplained*: no cause passes the test while the null leaves a systematic
    part, or the named cause leaves one (step 6, :func:`_partial`). A tie of several causes is not refitted from
    afar: it is reported as such (what these trials cannot separate), whatever each member leaves."""
    if dec["verdict"] == "none":
        return _leaves_systematic(ctx, null.ssr, null.ssr)
    best = dec["set"][0]
    return (dec["verdict"] == "named" and best.cause.kind != "tracker" and best.refit is not None
            and _leaves_systematic(ctx, best.refit.ssr, null.ssr))


def _far_null(ctx: ProbeContext, null: Refit) -> tuple[Refit, list[np.ndarray]]:
    """The free parameters alone refitted from afar (:func:`~.compare.refit_far`), from two starts: where the
    calibration ended (the null's optimum) and where it began (the spec's nominal values: an error absorbed by a
    free parameter on its bound is often reached only from the side that parameter came from). Returns the better
    of ``null`` and those refits, and the starts (normalised, shape (F,) each)."""
    nominal = np.array([s.to_unit(s.nominal) for s in ctx.free], float)
    origins = [null.u] + ([nominal] if np.max(np.abs(nominal - null.u), initial=0.0) > 0.05 else [])
    for u in origins:
        far_null = refit_far(ctx, [], [], u)
        if far_null.ssr < null.ssr:
            null = far_null
    return null, origins


#: normalised distance of two points of the free parameters (max over them) beyond which they are different
#: optima (a twentieth of a search range)
FAR_APART = 0.05


def _unfinished_fit(ctx: ProbeContext, scores: list[Score], null: Refit, dec: dict, stats: dict) -> Finding | None:
    """After a calibration that did not converge, before a cause is named: are the free parameters just short of
    their optimum? A cause correlated with the way left to it explains the residual as well as the model error it
    would be named for. The free parameters alone (:func:`_far_null`) and the candidate causes
    (:func:`_far_candidates`) are refitted from afar; where no cause then beats the free parameters' refit and
    that refit leaves no systematic part, the :func:`_optimum_from_afar` note. Otherwise None, and the causes'
    refits are put back as they were: the local decision stands (``statistics.far_null_check`` records both)."""
    far_null, _ = _far_null(ctx, null)
    stats["far_null_check"] = {"why": "the calibration did not converge: the free parameters alone are refitted "
                                      "from afar before a cause is named", "null_ssr": null.ssr,
                               "far_null_ssr": far_null.ssr}
    if not far_null.ssr < null.ssr:
        return None
    chosen = _far_candidates(scores, dec)
    kept = [(c.refit, list(c.notes)) for c in chosen]
    for cause in chosen:  # the causes get the same chance: refitted from afar with the free parameters
        _refit_cause_from_afar(ctx, cause, [far_null.u])
    # not at the optimum only where no cause still explains the residual better than that refit (a latency the
    # free parameters half absorb does)
    found = _optimum_from_afar(ctx, far_null, null, stats, also=chosen) \
        if decide(ctx, scores, far_null)["verdict"] == "none" else None
    if found is None:
        for cause, (refitted, notes) in zip(chosen, kept):
            cause.refit, cause.notes = refitted, notes
    return found


def _at_noise(ctx: ProbeContext, refit: Refit) -> bool:
    """Whether a refit's sum of squares is what the noise alone leaves: within the noise's spread
    ``z₁₋α σ² √(2M)`` of ``M σ²`` (an absolute test: far from the optimum, "most of the residual removed" still
    leaves room for a model error's whole signature). ``σ²`` is the smaller of the diagnosis's estimate and the
    same estimator on the refit's own residual: far from the optimum the residual is rough and its successive
    differences overstate the noise (a budget-stopped toy arm: 3.2 px against 0.3 px)."""
    from .context import noise_variance

    sigma2 = min(ctx.sigma2, float(noise_variance(np.asarray(refit.r, float), ctx.index)))
    if not sigma2 > 0:
        return False
    n = max(int(ctx.ok.sum()), 1)
    return refit.ssr - n * sigma2 <= _noise_spread(sigma2, n)


def _far_candidates(scores: list[Score], dec: dict) -> list[Score]:
    """The causes refitted from afar: the ``far_top`` of best linearised share and the local decision's set."""
    chosen = [s for s in scores if s.column is not None and s.share_linear > 0][: int(THRESHOLDS["far_top"])]
    return chosen + [s for s in dec["set"] if s not in chosen and s.column is not None]


def _refit_cause_from_afar(ctx: ProbeContext, s: Score, origins: Sequence[np.ndarray]) -> None:
    """Refit cause ``s`` with the free parameters from afar (:func:`~.compare.refit_far`), from each of ``origins``
    (normalised free parameters, (F,) each) and the cause's :func:`~.compare.far_start`; the refit replaces the
    cause's own where it is better (a note says so)."""
    local = s.refit.theta if s.refit is not None else [s.theta_linear] * s.dims
    start = [far_start(p, float(t)) for p, t in zip(s.parts, local)]
    for u in origins:
        far = refit_far(ctx, s.parts, start, u)
        if s.refit is None or far.ssr < s.refit.ssr:
            s.refit = far
    if s.refit is not None and s.refit.far:
        s.notes.append("refitted from afar: the free parameters re-optimised over their whole range")


def _far(ctx: ProbeContext, scores: list[Score], null: Refit, dec: dict, stats: dict) -> tuple[Refit, dict]:
    """Refit from afar (:func:`~.compare.refit_far`) when the local refits leave a systematic part: the null
    model and the ``far_top`` causes of best linearised share (and the local decision's set), each from
    :func:`~.compare.far_start`; a far refit replaces a local one it beats, and the causes are decided again
    against the better null. Where the free parameters moved far to absorb an error, this is what tells the
    error that explains the residual whole from a local direction that explains a part."""
    spent = ctx.rollouts
    null, origins = _far_null(ctx, null)
    chosen = _far_candidates(scores, dec)
    for s in chosen:
        _refit_cause_from_afar(ctx, s, origins)
    stats["far_refit"] = {"candidates": [s.cause.name for s in chosen], "null_ssr": null.ssr,
                          "rollouts": ctx.rollouts - spent,
                          "why": "the local refits left a systematic part of the residual"}
    return null, decide(ctx, scores, null)


_POSE_FIELDS = frozenset({"camera.x", "camera.y", "camera.z", "camera.roll", "camera.pitch", "camera.yaw"})


def _pose_against_intrinsics(members: list[Score]) -> bool:
    """A tie between a camera pose cause and a camera intrinsics cause (the set of one kind, ``camera``): the
    projection error is as well a moved camera as a wrong lens — a 3 % longer focal length and the camera 3 %
    closer to a shallow scene — and the two are fixed differently (an extrinsic against an intrinsic
    calibration), so neither is named."""
    cams = [m for m in members if m.cause.kind == "camera"]
    if len(cams) < 2 or len(cams) != len(members):
        return False
    pose = [m for m in cams if set(m.cause.fields) <= _POSE_FIELDS]
    lens = [m for m in cams if not set(m.cause.fields) & _POSE_FIELDS]
    return bool(pose) and bool(lens)


def _partial(ctx: ProbeContext, best: Score, scores: list[Score], s0: float) -> Finding | None:
    """A ``structure`` warning when the best cause explains only part of what the noise does not account for.

    With M samples the noise accounts for about ``M σ²`` of a sum of squares (standard deviation ``σ² √(2M)``).
    The best cause's refit leaves ``S_c − M σ²`` of the systematic part ``S_0 − M σ²``; when that remainder is
    more than ``min_share`` of the systematic part (the bound :func:`_not_at_optimum` uses for the free
    parameters) and beyond the noise (``z₁₋α σ² √(2M)``, α of :data:`~.result.THRESHOLDS`), the cause does not
    explain the residual: another error is there too, or the free parameters moved far to absorb an error and a
    refit near the identified point cannot reach it (the causes are refitted locally). Naming the best local
    direction then is a confident answer the data do not support. Returns None when the best cause explains
    the systematic part.
    """
    if best.refit is None or ctx.sigma2 <= 0:
        return None
    n = max(int(ctx.ok.sum()), 1)
    noise = n * ctx.sigma2
    excess, rest = s0 - noise, best.refit.ssr - noise
    bound = _noise_spread(ctx.sigma2, n)
    if excess <= 0 or rest <= THRESHOLDS["min_share"] * excess or rest <= bound:
        return None
    parts = sorted((s for s in scores if s.refit is not None and s.significant), key=lambda s: s.refit.ssr)[:5]
    listed = "; ".join(f"{s.cause.name} ({100 * _share(s, s0):.0f} %)" for s in parts)
    where = ("each cause is refitted near the identified point and from afar, with the free parameters "
             "re-optimised over their whole ranges" if any(s.refit is not None and s.refit.far for s in scores)
             else "each cause is refitted near the identified point")
    msg = (f"No single candidate explains the residual: the best, {best.cause.name}, removes "
           f"{100 * _share(best, s0):.0f} % of what the free parameters leave (RMS {math.sqrt(s0 / n):.3g} → "
           f"{math.sqrt(best.refit.ssr / n):.3g} {ctx.unit}, noise {math.sqrt(ctx.sigma2):.3g} {ctx.unit}) but leaves "
           f"{100 * rest / excess:.0f} % of the part the noise does not account for. Candidates that explain a part: "
           f"{listed}. The model is probably wrong in more than one place, or the free parameters moved far to absorb "
           f"an error ({where}); none is named or recommended. "
           f"{separating_trial([s.cause for s in parts])[0].upper()}{separating_trial([s.cause for s in parts])[1:]} "
           f"would tell them apart.")
    return Finding("structure", "warning", msg, {
        "best": best.cause.name, "share_removed": _share(best, s0), "systematic_ssr": excess, "remaining_ssr": rest,
        "remaining_share": rest / excess, "noise_bound_ssr": bound, "unit": ctx.unit,
        "causes": [_member(ctx, s, s0) for s in parts], "separate_with": separating_trial([s.cause for s in parts])})


#: the kinds that are never paired with a latency: timing errors (a latency plus a time warp is a time warp) and
#: the measurement's own bias
_NOT_PAIRED = frozenset({"latency", "timing", "rolling_shutter", "tracker"})


def _with_latency(ctx: ProbeContext, scores: list[Score], F: np.ndarray, s0: float, stats: dict
                  ) -> tuple[str, dict | None, list[Finding]] | None:
    """Two errors at once, one of them a latency: when no single cause explains the residual (step 6) and the
    latency nuisance is not free, each of the best ``far_top`` other significant causes is refitted together with
    a latency (the latency is a time shift of the simulated keypoints: it costs no rollout beyond the cause's own
    refit). When the best such pair leaves no systematic part (:func:`_leaves_systematic`) and each of its two
    members is needed (removing either raises the sum of squares by more than the χ²₁ bound at ``1 − α/n``), the
    verdict is *named*: the latency and its partner (or, when several partners explain it equally well with the
    latency, the latency alone, the partners listed). The recommendation is the latency, the one of the two that is
    freed without a rollout, checked on held-out data as any other; calibrating again with it free lets the
    diagnosis see the other. None when there is no latency candidate or no pair explains the residual
    (``statistics.latency_pairs`` records the pairs refitted)."""
    lat = next((s for s in scores if s.cause.kind == "latency" and s.column is not None and s.dims == 1), None)
    if lat is None or ctx.sigma2 <= 0:
        return None
    partners = sorted((s for s in scores if s.refit is not None and s.significant and s.determined
                       and s.cause.kind not in _NOT_PAIRED), key=lambda s: s.refit.ssr)[: int(THRESHOLDS["far_top"])]
    lat_theta = float(lat.refit.theta[0]) if lat.refit is not None else float(lat.theta_linear)
    lat_ssr = lat.refit.ssr if lat.refit is not None else s0
    pairs: list[tuple[Score, Score]] = []  # (partner, the pair as one candidate)
    for s in partners:
        parts = tuple(s.parts) + tuple(lat.parts)
        start = [float(t) for t in s.refit.theta] + [lat_theta]
        r_start = ctx.residual(list(parts), start, s.refit.u)
        if r_start is None:
            continue
        joint = refit(ctx, list(parts), list(s.probe_columns) + [lat.column], F, start=start, start_r=r_start,
                      start_u=s.refit.u)
        pairs.append((s, _pair_score(s, lat, joint)))
    crit = chi2_ppf(1.0 - THRESHOLDS["alpha"] / max(len(scores), 1), 1)
    good = [(s, p) for s, p in pairs if _pair_explains(ctx, p.refit, p.parts, (s.refit.ssr, lat_ssr), s0, crit)]
    tied: list[Score] = []
    if good:  # a tie of pairs is decided as step 5 decides one of causes: the tied refits continued, their accuracy
        good.sort(key=lambda sp: sp[1].refit.ssr)
        bound = chi2_ppf(1.0 - THRESHOLDS["alpha"], 1) * ctx.sigma2
        tie = max(bound, THRESHOLDS["refit_accuracy"] * (s0 - good[0][1].refit.ssr))
        close = [p for _, p in good if p.refit.ssr - good[0][1].refit.ssr <= tie]
        if len(close) > 1:
            tie = max(bound, polish(ctx, close, F))
            good.sort(key=lambda sp: sp[1].refit.ssr)
        tied = [s for s, p in good if p.refit.ssr - good[0][1].refit.ssr <= tie]
    stats["latency_pairs"] = [{"cause": s.cause.name, "ssr": p.refit.ssr,
                               "share": 1.0 - p.refit.ssr / s0 if s0 > 0 else 0.0,
                               "latency_s": float(p.refit.theta[-1]), "explains": any(s is g for g, _ in good),
                               "tied": any(s is t for t in tied)} for s, p in pairs]
    if not tied:
        return None
    best = good[0][1].refit
    return _two_errors(ctx, lat, tied, best, F, s0)


def _two_errors(ctx: ProbeContext, lat: Score, partners: list[Score], pair: Refit, F: np.ndarray, s0: float
                ) -> tuple[str, dict | None, list[Finding]]:
    """The *named* verdict of :func:`_with_latency`: a latency with ``partners`` (best first; one, or several
    that explain it equally well with the latency), ``pair`` the best pair's refit. The pair is checked on
    held-out data (refitted together on the training data, against the free parameters alone): the latency
    alone leaves the other error's part and says little there. The recommendation frees the latency nuisance
    (no rollout) and calibrates again, from where the latency's own refit put the free parameters (the pair's
    refit puts them where the other error, still unmodelled, is fixed too): the diagnosis then sees the other
    error alone."""
    n = max(int(ctx.ok.sum()), 1)
    null = refit(ctx, [], [], F)
    first = partners[0]
    parts = list(first.parts) + list(lat.parts)
    check = held_out_check(ctx, parts, list(first.probe_columns) + [lat.column], F, pair, null)
    fitted = lat.refit if lat.refit is not None else pair
    shift = float(pair.theta[-1])
    before, after = math.sqrt(s0 / n), math.sqrt(pair.ssr / n)
    share = 1.0 - pair.ssr / s0 if s0 > 0 else 0.0
    rec = {"cause": lat.cause.name, "kind": "latency", "free": list(lat.cause.fields),
           "action": how_to_free(lat.cause, ctx.unit) + "; calibrate again and diagnose: the other error "
                     "is then what is left",
           "training_rms_before": before, "training_rms_after": math.sqrt(fitted.ssr / n), "unit": ctx.unit,
           "held_out": check, "recommended": check["improved"], "start": _start(ctx, fitted.u)}
    if len(partners) == 1:
        other = f"{first.cause.name} ({_size(ctx, first.cause, pair.theta[:-1])[1]})"
    else:
        other = "one of " + "; ".join(p.cause.name for p in partners) + " (they explain it equally well with it: " \
                + separating_trial([p.cause for p in partners]) + " would separate them)"
    msg = (f"Two errors at once: no single candidate explains the residual, but {lat.cause.name} of "
           f"{shift * 1000:+.1f} ms ({shift * ctx.rate:+.2f} frame) together with {other}, refitted together, remove "
           f"{100 * share:.0f} % of what the free parameters leave (RMS {before:.3g} → {after:.3g} {ctx.unit}); the "
           f"latency alone removes {100 * _share(lat, s0):.0f} %, {first.cause.name} alone "
           f"{100 * _share(first, s0):.0f} %. ")
    h = check
    if h["before"] is None:
        msg += f"It could not be checked on held-out data; not recommended until it is ({rec['action']})."
    else:
        msg += (f"The two refitted together on the training data take the error on the {h['data']} from "
                f"{h['before']:.3g} to {h['after']:.3g} {h['unit']} RMS" +
                (f": recommended — {rec['action']}." if rec["recommended"] else
                 ": it does not generalise, so nothing is recommended."))
    members = [lat] + partners[:1] if len(partners) == 1 else [lat]
    causes = [_member(ctx, m, s0) for m in members]
    causes[0].update(size=shift, size_text=lat.cause.value_text(ctx, shift))
    if len(causes) > 1:  # the partner's size in the pair, not alone (alone it took the latency's part too)
        size, text = _size(ctx, first.cause, pair.theta[:-1])
        causes[1].update(size=size, size_text=text, share=1.0 - pair.ssr / s0 if s0 > 0 else 0.0)
    ev = {"cause": lat.cause.name, "fields": list(lat.cause.fields), "causes": causes,
          "partners": [_member(ctx, p, s0) for p in partners], "share_removed": share, "rms_before": before,
          "rms_after": after, "unit": ctx.unit, "shift_s": shift, "shift_frames": shift * ctx.rate,
          "held_out": check}
    return "named", rec, [Finding("latency", "warning", msg, ev)]


def _optimum_from_afar(ctx: ProbeContext, null: Refit, local_null: Refit, stats: dict,
                       also: Sequence[Score] = ()) -> Finding | None:
    """A ``convergence`` note when the free parameters alone, refitted from afar (:func:`_far`), explain the
    residual the local refits could not: the calibration stopped far from its optimum (a budget spent before it
    got there), not at a model error. The same tests as :func:`_not_at_optimum` on the far refit ``null``: its
    decrease from the diagnosed point is significant (likelihood ratio against the χ²_F quantile) and it leaves
    what the noise alone leaves (:func:`_at_noise`). None otherwise (a cause is looked for as usual). The causes of
    ``also`` (the ones a local comparison would have named) whose refits explain the residual as well are listed
    with it: these trials cannot tell such a model error from the free parameters' own optimum, and the note's
    evidence holds them as ``causes`` (an indistinguishable set with "no model error, calibrate further").

    (was: an unmodified cart-pendulum whose calibration had spent its budget at 16 % parameter error was
    diagnosed *unexplained*, "the model is too simple here", although the free parameters refitted from afar
    brought the residual to the noise)
    """
    if not null.far or not null.ssr < local_null.ssr or ctx.sigma2 <= 0:
        return None
    n = max(int(ctx.ok.sum()), 1)
    s_here = ctx.ssr(ctx.r0, ctx.ok)
    drop = s_here - null.ssr
    lr = drop / ctx.sigma2
    crit = chi2_ppf(1.0 - THRESHOLDS["alpha"], max(len(ctx.free), 1))
    if not (lr > crit and drop >= THRESHOLDS["min_share"] * s_here) or not _at_noise(ctx, null):
        return None
    values = {spec.name: float(spec.from_unit(float(np.clip(u, 0.0, 1.0)))) for spec, u in zip(ctx.free, null.u)}
    shown = ", ".join(f"{k} = {v:.4g}{(' ' + spec.unit) if spec.unit else ''}"
                      for spec, (k, v) in zip(ctx.free, values.items()))
    stats["optimality_from_afar"] = {"ssr_here": s_here, "ssr_free_refit_far": null.ssr, "likelihood_ratio": lr,
                                     "critical_lr": crit, "values": values}
    if isinstance(stats.get("optimality"), dict):  # the local test's verdict, overruled by this one
        stats["optimality"].update(at_optimum=False, at_optimum_locally=stats["optimality"].get("at_optimum"))
    # an alternative: a cause whose refit explains the residual as well with the free parameters elsewhere (a
    # cause refitted to about nothing beside the same optimum is that optimum, not an alternative)
    tied = [m for m in also if m.refit is not None and m.determined and m.refit.far and _at_noise(ctx, m.refit)
            and float(np.max(np.abs(np.asarray(m.refit.u) - np.asarray(null.u)), initial=0.0)) > FAR_APART]
    msg = (f"Not at the optimum: the free parameters alone, refitted over their whole ranges, explain the residual "
           f"— the training error falls from {math.sqrt(s_here / n):.3g} to {math.sqrt(null.ssr / n):.3g} {ctx.unit} "
           f"RMS ({100 * drop / s_here:.0f} % of the squared residual, the rest the noise's) at {shown}. The "
           f"calibration stopped before it got there. Calibrate further (more iterations or rollouts), or start "
           f"nearer these values.")
    extra: dict[str, Any] = {}
    if tied:
        members = [_member(ctx, m, s_here) for m in tied]
        listed = "; ".join(f"{m['cause']} ({m['size_text']})" for m in members)
        sep = separating_trial([m.cause for m in tied])
        msg += (f" These trials cannot tell that optimum from a model error that explains the residual as well: "
                f"{listed}. Neither is recommended; {sep} would tell them apart.")
        extra = {"causes": members, "separate_with": sep}
    else:
        msg += " No model error is needed, and no other cause explains it as well."
    return _convergence_note(ctx, msg, s_here, null.ssr, lr, crit, values=values, from_afar=True, **extra)


def _not_at_optimum(ctx: ProbeContext, F: np.ndarray, null, stats: dict,
                    resolution_scale: float | None = None) -> Finding | None:
    """Whether the point diagnosed is not the least-squares optimum of the free parameters.

    Every cause is scored on what the free parameters leave; away from their optimum the residual still
    holds a part they would remove, and a candidate correlated with it would be named for the wrong
    reason. The test: the decrease ``S(u0) − S_0`` a Gauss–Newton refit of the free parameters alone
    (``null``, :func:`~.compare.refit` from the diagnosed point, inside the bounds) achieves, as a likelihood
    ratio ``(S(u0) − S_0) / σ²`` against the χ²_F quantile at ``1 − α`` (Wilks; F free columns), and at
    least ``min_share`` of ``S(u0)`` (:data:`~.result.THRESHOLDS`): the point is not the optimum. When that
    decrease is also at least ``1 − min_share`` of the systematic part ``S(u0) − M σ²`` (M samples: what the
    noise does not account for), the free parameters alone explain the residual and no cause is looked for;
    otherwise a part remains that they leave, and the causes are compared against their refit ``S_0`` as
    usual. The linearised prediction ``‖P_F r0‖²`` (projection on the free columns) is recorded beside it.

    A decrease no larger than the simulation's resolution (:func:`~vid2sid_ros.calibration.objective.resolution_floor`
    of ``M`` residuals at the larger of ``resolution_scale`` and the MAE here) is none, whatever the noise: the
    reasoner's convergence test passes on the same floor, and on noise-free data the successive-difference noise
    estimate is the residual's round-off, against which any refit looks significant.

    Returns:
        a ``convergence`` note when the point is not at the optimum (no cause named), else None.
    """
    usable = [j for j in range(F.shape[1]) if np.all(np.isfinite(F[ctx.ok, j]))]  # as refit() picks them
    keep = ctx.ok & np.all(np.isfinite(F[:, usable]), axis=1)
    s_here = ctx.ssr(ctx.r0, keep)
    drop = s_here - null.ssr
    predicted = 0.0
    if usable and keep.any():
        A, r = F[keep][:, usable], np.nan_to_num(ctx.r0[keep])
        predicted = float(np.sum((A @ np.linalg.lstsq(A, r, rcond=1e-6)[0]) ** 2))
    lr = drop / ctx.sigma2 if ctx.sigma2 > 0 else (math.inf if drop > 0 else 0.0)
    crit = chi2_ppf(1.0 - THRESHOLDS["alpha"], max(len(usable), 1))
    stats["optimality"] = {
        "test": "likelihood ratio (S(u0) - S0) / noise variance of a Gauss-Newton refit of the free parameters "
                "alone against the chi-square(F) quantile at 1 - alpha, at least min_share of S(u0), and above the "
                "simulation's resolution (the reasoner's convergence test's floor)",
        "ssr_here": s_here, "ssr_free_refit": null.ssr, "predicted_decrease": predicted,
        "likelihood_ratio": lr, "critical_lr": crit, "free_columns": len(usable)}
    n = max(int(keep.sum()), 1)
    excess = max(s_here - n * ctx.sigma2, 0.0)  # the systematic part: what the noise does not account for
    scale = max(float(resolution_scale or 0.0), float(np.nanmean(np.abs(ctx.r0[keep]))) if keep.any() else 0.0)
    floor = resolution_floor(n, scale)
    moved = lr > crit and s_here > 0 and drop >= THRESHOLDS["min_share"] * s_here and drop > floor
    stats["optimality"].update(at_optimum=not moved, systematic_ssr=excess, resolution_floor_ssr=floor,
                               free_explain_systematic=moved and drop >= (1.0 - THRESHOLDS["min_share"]) * excess)
    if not stats["optimality"]["free_explain_systematic"]:  # at the optimum, or a part remains that they leave:
        return None                                          # the causes are compared against their refit

    msg = (f"Not at the optimum: the free parameters alone explain the residual (the run stopped before "
           f"converging) — refitting only them lowers the training error from {math.sqrt(s_here / n):.3g} to "
           f"{math.sqrt(null.ssr / n):.3g} {ctx.unit} RMS ({100 * drop / s_here:.0f} % of the squared residual, "
           f"{lr:.3g} noise variances). No other cause is looked for; calibrate further (more iterations or "
           f"rollouts) before reading the residual.")
    if ctx.bias is not None:  # the fit saw the projection, the diagnosis the twin measured like the robot
        msg = (f"Not at the optimum of the residual measured like the robot: with the tracker's bias added to the "
               f"twin's keypoints, the free parameters alone explain the residual — refitting only them lowers the "
               f"training error from {math.sqrt(s_here / n):.3g} to {math.sqrt(null.ssr / n):.3g} {ctx.unit} RMS "
               f"({100 * drop / s_here:.0f} % of the squared residual, {lr:.3g} noise variances). No other cause is "
               f"needed. The calibration fits the twin's projection without the bias, so calibrating further need "
               f"not remove this: the bias moves the free parameters' optimum (the final 95 % intervals are "
               f"computed on this same residual).")
    return _convergence_note(ctx, msg, s_here, null.ssr, lr, crit)


def _convergence_note(ctx: ProbeContext, msg: str, s_here: float, s_free: float, lr: float, crit: float,
                      **extra: Any) -> Finding:
    """The ``convergence`` note of a point that is not the free parameters' optimum: its sum of squares ``s_here``
    and the free parameters' refit ``s_free`` (unit²), the likelihood ratio and its critical value."""
    return Finding("convergence", "note", msg, {"ssr_here": s_here, "ssr_free_refit": s_free,
                                                "share_removed": (s_here - s_free) / s_here, "likelihood_ratio": lr,
                                                "critical_lr": crit, "unit": ctx.unit, **extra})


def _score_dict(ctx: ProbeContext, s: Score, s0: float) -> dict[str, Any]:
    d: dict[str, Any] = {"cause": s.cause.name, "kind": s.cause.kind, "fields": list(s.cause.fields),
                         "unit": s.cause.unit, "share_linear": s.share_linear, "refitted": s.refit is not None,
                         "notes": list(s.notes)}
    if s.refit is not None:
        size, text = _size(ctx, s.cause, s.refit.theta)
        d.update(share=(s.gain / s0) if s0 > 0 else 0.0, likelihood_ratio=s.lr, significant=s.significant,
                 determined=s.determined, size=size if s.determined else None,
                 size_text=text if s.determined else
                 f"not determined (the fit ran to its search range {s.cause.bounds[0]:.3g} .. "
                 f"{s.cause.bounds[1]:.3g} {s.cause.unit})")
    return d


def _size(ctx: ProbeContext, cause, theta: np.ndarray) -> tuple[Any, str]:
    """(size: a number, or a list for a composite cause; the same for people, with units)."""
    if isinstance(cause, Composite):
        vals = [float(t) for t in theta]
        return vals, cause.value_text(ctx, vals)
    t = float(theta[0]) if len(theta) else 0.0
    return t, cause.value_text(ctx, t)


def _share(s: Score, s0: float) -> float:
    return (s.gain / s0) if s0 > 0 else 0.0


def _named(ctx: ProbeContext, members: list[Score], scores: list[Score], F, null,
           s0: float) -> tuple[str, dict | None, list[Finding]]:
    """One cause (or a set of camera fields, refitted together) named, with the held-out check."""
    group = members[:1]
    if members[0].cause.kind == "camera":  # every camera field that explains a part: freed together
        tied = [m for m in members[1:] if m.cause.kind == "camera"]  # not separable from the first: left out
        group = [s for s in scores if s.cause.kind == "camera" and s.column is not None and s not in tied and
                 (s.significant or s.share_linear >= THRESHOLDS["min_share"])][:6]
        group = [members[0]] + [s for s in group if s is not members[0]][:5]
    fitted = group[0].refit
    if len(group) > 1:
        starts = [t for m in group for t in m.starts]
        joint = refit(ctx, [p for m in group for p in m.parts], [q for m in group for q in m.probe_columns], F,
                      start=starts, start_r=ctx.residual([p for m in group for p in m.parts], starts))
        better = joint.ssr < fitted.ssr and _more_fields_needed(ctx, group, fitted, joint, s0)
        fitted = joint if better else fitted
        if fitted is not joint:
            group = group[:1]
    causes = [m.cause for m in group]
    parts = [p for m in group for p in m.parts]
    check = held_out_check(ctx, parts, [q for m in group for q in m.probe_columns], F, fitted, null)
    n = max(int(ctx.ok.sum()), 1)
    before, after = math.sqrt(s0 / n), math.sqrt(fitted.ssr / n)
    share = 1.0 - fitted.ssr / s0 if s0 > 0 else 0.0
    fields = list(dict.fromkeys(f for c in causes for f in c.fields))
    rec = {"cause": " + ".join(c.name for c in causes), "kind": causes[0].kind, "free": fields,
           "action": how_to_free(causes[0], ctx.unit) if len(causes) == 1 else
           "declare the camera fields " + ", ".join(fields) + " as free nuisance parameters",
           "training_rms_before": before, "training_rms_after": after, "unit": ctx.unit,
           "held_out": check, "recommended": check["improved"], "start": _start(ctx, fitted.u)}
    msg = _named_message(ctx, group, fitted, share, before, after, members)
    nxt = min((s for s in scores if s.refit is not None and s not in group and s not in members),
              key=lambda s: s.refit.ssr, default=None)
    if nxt is not None:
        msg += (f" It explains the residual clearly better than the next candidate, {nxt.cause.name} "
                f"({100 * _share(nxt, s0):.0f} %)")
        if ctx.sigma2 > 0:  # shares that look alike can still differ by many noise variances
            msg += (f": the next one's sum of squares is {(nxt.refit.ssr - fitted.ssr) / ctx.sigma2:.3g} noise "
                    "variances larger (the likelihood ratio)")
        msg += "."
    msg += " " + _check_sentence(rec)
    ev = {"cause": rec["cause"], "fields": rec["free"], "group": [_member(ctx, m, s0) for m in group],
          "predicted_drop": share, "share_removed": share,
          "rms_before": before, "rms_after": after, "unit": ctx.unit, "held_out": check}
    c0, th0 = group[0].cause, float(fitted.theta[0])
    if isinstance(c0, FrozenParameter):
        ev.update(parameter=c0.spec.name, points_to=c0.points_to(ctx, th0))
    if c0.kind in ("latency", "rolling_shutter", "timing"):
        ev[{"latency": "shift_s", "rolling_shutter": "readout_s", "timing": "slip_per_frame"}[c0.kind]] = th0
        ev["shift_frames" if c0.kind == "latency" else "size_frames"] = th0 * (ctx.rate if c0.kind != "timing"
                                                                              else ctx.rate * ctx.duration_s)
    if c0.kind == "camera":
        ev["camera_fields"] = rec["free"]
    return "named", rec, [Finding(c0.kind, "warning", msg, ev)]


def _more_fields_needed(ctx: ProbeContext, group: list[Score], first: Refit, joint: Refit, s0: float) -> bool:
    """Whether the camera fields beyond the first cause's are freed with it: the first leaves a systematic part
    of its own (step 6, :func:`_leaves_systematic`) and the others, refitted together with it, lower the sum of
    squares by more than the χ² quantile at ``1 − α`` for the number of parts they add (nested models, Wilks;
    a part shared by two candidates — an axis of the position and the position — counted once). For a distant
    scene a sideways shift, a pan and a principal point take the same image shift: freed together where the
    first already reaches the noise, they add a combination the data cannot fix, and every later calibration
    is less determined."""
    if ctx.sigma2 <= 0:
        return True
    own = {id(p) for p in group[0].parts}
    extra = len({id(p) for m in group[1:] for p in m.parts} - own)
    if extra == 0 or not _leaves_systematic(ctx, first.ssr, s0):
        return False
    return (first.ssr - joint.ssr) / ctx.sigma2 > chi2_ppf(1.0 - THRESHOLDS["alpha"], extra)


def _named_message(ctx: ProbeContext, group: list[Score], fitted, share: float, before: float, after: float,
                   members: list[Score]) -> str:
    """The sentence naming one cause (or a camera group), with its share and the RMS before → after (unit)."""
    c0, th0 = group[0].cause, float(fitted.theta[0])
    pct, rms = f"{100 * share:.0f} %", f"RMS {before:.3g} → {after:.3g} {ctx.unit}"
    if isinstance(c0, FrozenParameter):
        v = ctx.full[c0.spec.name]
        text = (f"{c0.spec.name} (frozen at {format_value(v, c0.spec.unit)}) is probably wrong: freeing it would "
                f"lower the training error by about {pct} ({rms}; the residual points to about "
                f"{format_value(c0.points_to(ctx, th0), c0.spec.unit)}).")
    elif c0.kind == "camera":
        fields = list(dict.fromkeys(f for m in group + members for f in m.cause.fields))
        freed = ", ".join(dict.fromkeys(f for m in group for f in m.cause.fields))
        text = (f"The residual looks like a projection error and the camera's {', '.join(fields)} "
                f"{'are' if len(fields) > 1 else 'is'} fixed: freeing {freed} would remove about {pct} of the "
                f"squared residual ({rms}).")
        tied = [m for m in members if m.cause.kind == "camera"]
        if len(tied) > 1:
            names = "; ".join(m.cause.name for m in tied)
            text += (f" On these trials these camera errors explain it about equally well: {names} "
                     f"({separating_trial([m.cause for m in tied])} would separate them).")
    elif c0.kind == "rolling_shutter":
        order = "top to bottom" if th0 > 0 else "bottom to top"
        text = (f"The robot's lag behind the twin grows with the image row: rows are read {order} over about "
                f"{abs(th0) * 1000:.1f} ms ({abs(th0) * ctx.rate:.2f} frame) per image — a rolling-shutter camera "
                f"(use a global shutter, or model each keypoint's read time); a row-dependent shift removes {pct} "
                f"of the squared residual ({rms}).")
    elif c0.kind == "latency":
        direction = "later than" if th0 > 0 else "earlier than"
        text = (f"The robot moves {abs(th0) * 1000:.1f} ms ({abs(th0) * ctx.rate:.2f} frame) {direction} the twin "
                f"in every trial: shifting the twin by that much removes {pct} of the squared residual ({rms}) — "
                f"{'a camera latency' if ctx.unit == 'px' else 'a measurement delay'} or a delay in the drive.")
    else:
        text = (f"{c0.name[0].upper() + c0.name[1:]} explains {pct} of the squared residual the free parameters "
                f"leave ({rms}); its size: {_size(ctx, c0, fitted.theta)[1]}.")
    return text


def _named_tracker(ctx: ProbeContext, best: Score, scores: list[Score], s0: float
                   ) -> tuple[str, dict, list[Finding]]:
    """The tracker's bias on renders of the twin explains the residual clearly better than every other
    candidate: a note (the measurement, not the model), with the switch that films the twin like the robot."""
    n = max(int(ctx.ok.sum()), 1)
    before, after = math.sqrt(s0 / n), math.sqrt(best.refit.ssr / n)
    share = _share(best, s0)
    action = "set calibration.tracker_bias: true"
    msg = (f"The tracker's own bias on these markers explains the residual: the bias measured by rendering the "
           f"twin at the identified values and tracking the renders ({ctx.candidate_bias_rms:.3g} px RMS; fitted size "
           f"{_size(ctx, best.cause, best.refit.theta)[0]:.3g} × as measured) removes {100 * share:.0f} % of the "
           f"squared residual the free parameters leave (RMS {before:.3g} → {after:.3g} {ctx.unit}), not a model "
           f"error; {action} (the twin is then filmed and tracked like the robot and the bias is part of every "
           f"residual and interval) and calibrate again.")
    nxt = min((s for s in scores if s.refit is not None and s is not best), key=lambda s: s.refit.ssr, default=None)
    if nxt is not None and ctx.sigma2 > 0:
        msg += (f" It explains the residual clearly better than the next candidate, {nxt.cause.name} "
                f"({100 * _share(nxt, s0):.0f} %: its sum of squares is "
                f"{(nxt.refit.ssr - best.refit.ssr) / ctx.sigma2:.3g} noise variances larger).")
    rec = {"cause": best.cause.name, "kind": "tracker", "free": list(best.cause.fields), "action": action,
           "training_rms_before": before, "training_rms_after": after, "unit": ctx.unit, "held_out": None,
           "recommended": True}
    ev = {"cause": best.cause.name, "fields": list(best.cause.fields), "share_removed": share, "rms_before": before,
          "rms_after": after, "unit": ctx.unit, "size": float(best.refit.theta[0]),
          "bias_rms": ctx.candidate_bias_rms, "check_with": action}
    return "named", rec, [Finding("tracker", "note", msg, ev)]


def _start(ctx: ProbeContext, u: np.ndarray) -> dict[str, float]:
    """Where to calibrate again after following a recommendation: the free parameters where the check's refit
    (with the cause free) put them, ``u`` normalised (F,); ``{name: value}``, SI, for ``calibration.start``. A
    calibration begun again from the spec's nominal values with the same budget need not get there (on the cart
    with its camera turned, the orientation freed from the nominal values stalled at 3.7 px where the check's
    refit reached the noise)."""
    vals = ctx.values_at(u)
    return {s.name: float(vals[s.name]) for s in ctx.free}


def _check_sentence(rec: dict) -> str:
    h = rec["held_out"]
    if h["before"] is None:
        return f"It could not be checked on held-out data; not recommended until it is ({rec['action']})."
    said = (f"Refitted with it free on the training data, the error on the {h['data']} goes from "
            f"{h['before']:.3g} to {h['after']:.3g} {h['unit']} RMS")
    if rec["recommended"]:
        return said + f": recommended — {rec['action']}, and calibrate again from where that refit put the free " \
                      "parameters (recommendation.start, for calibration.start)."
    return said + ": it does not generalise, so it is not recommended."


def _same_kind(ctx: ProbeContext, members: list[Score], s0: float) -> Finding:
    kind = members[0].cause.kind
    listed = "; ".join(f"{m.cause.name} ({100 * _share(m, s0):.0f} %)" for m in members)
    article = "An" if kind[0] in "aeiou" else "A"
    msg = (f"{article} {kind} error: {listed} explain the residual about equally well and these trials cannot "
           f"tell them apart, so none of them is recommended; {_separate(members)} would separate them.")
    return Finding(kind, "warning", msg, {"causes": [_member(ctx, m, s0) for m in members],
                                          "separate_with": _separate(members)})


def _parallel(members: list[Score]) -> float:
    """Smallest |cos| between the members' probe columns (1-D members only; 0 when not computable): near 1,
    the causes act on these trials as one combination (a base parameter, in Khalil and Gautier's sense)."""
    cols = [m.column for m in members if m.column is not None and m.dims == 1]
    if len(cols) < 2 or len(cols) < len(members):
        return 0.0
    ok = np.all([np.isfinite(c) for c in cols], axis=0)
    out = 1.0
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            a, b = cols[i][ok], cols[j][ok]
            den = float(np.linalg.norm(a) * np.linalg.norm(b))
            out = min(out, abs(float(a @ b)) / den if den > 0 else 0.0)
    return out


def _separate(members: list[Score]) -> str:
    cos = _parallel(members)
    if cos >= 0.999:
        return (f"no change of excitation (their probe columns are parallel, |cos| ≥ {cos:.4f}: on this rig they act "
                f"as one combination; only a measurement of one of them alone)")
    return separating_trial([m.cause for m in members])


def _indistinguishable(ctx: ProbeContext, members: list[Score], s0: float) -> Finding:
    listed = "; ".join(f"{m.cause.name} ({100 * _share(m, s0):.0f} %)" for m in members)
    sep = _separate(members)
    msg = (f"Several causes explain the residual about equally well and these trials cannot tell them apart: "
           f"{listed}. None is recommended; {sep} would separate them.")
    ev = {"causes": [_member(ctx, m, s0) for m in members], "separate_with": sep}
    if any(m.cause.kind == "tracker" for m in members):  # the measurement may be all there is: the switch checks it
        msg += (" The tracker's own bias on these markers (measured on renders of the twin) is among them: "
                "set calibration.tracker_bias: true to film and track the twin like the robot and check it (if the "
                "bias is the cause, the residual goes away; if a camera error remains, it is then named).")
        ev["check_with"] = "calibration.tracker_bias: true"
    return Finding("indistinguishable", "warning", msg, ev)


def _member(ctx: ProbeContext, m: Score, s0: float) -> dict[str, Any]:
    theta = m.refit.theta if m.refit is not None else np.array([m.theta_linear] * m.dims)
    size, text = _size(ctx, m.cause, theta)
    return {"cause": m.cause.name, "kind": m.cause.kind, "fields": list(m.cause.fields),
            "share": _share(m, s0) if m.refit is not None else m.share_linear, "refitted": m.refit is not None,
            "size": size, "size_text": text}


def _structure(ctx: ProbeContext, stats: dict) -> list[Finding]:
    """Non-white, large residuals no candidate explains: the model is too simple here (or, when the optimality
    check did not run or found the point off the optimum, the parameters may not be at it)."""
    rho = _lag1(ctx)
    motion = _motion_scale(ctx.reals)
    ratio = stats["residual_rms"] / motion if motion > 0 else math.inf
    noise_ratio = (stats["residual_rms"] ** 2 / ctx.sigma2) if ctx.sigma2 > 0 else math.inf
    stats["whiteness"] = {"lag1_autocorrelation": rho, "motion_rms": motion, "rms_over_motion": ratio,
                          "ssr_over_noise": noise_ratio}
    at_optimum = bool((stats.get("optimality") or {}).get("at_optimum"))  # tested: the free parameters are at it
    if (rho >= THRESHOLDS["structure_rho"] and ratio >= THRESHOLDS["structure_motion_share"]
            and noise_ratio >= THRESHOLDS["structure_noise_ratio"]):
        return [Finding("structure", "warning",
                        f"The residuals are strongly correlated in time (lag-1 autocorrelation {rho:.2f}) and large "
                        f"({stats['residual_rms']:.3g} {ctx.unit} RMS, {noise_ratio:.1f}× the noise variance, "
                        f"{100 * ratio:.1f} % of the {motion:.3g} {ctx.unit} RMS motion), and no single candidate "
                        f"cause explains them: the model is too simple here"
                        f"{'' if at_optimum else ', or the parameters are not at the optimum'}.",
                        {"lag1_autocorrelation": rho, "rms_over_motion": ratio, "ssr_over_noise": noise_ratio})]
    return []


def _lag1(ctx: ProbeContext) -> float:
    p = ctx.index.pairs
    if p.size == 0:
        return 0.0
    a, b = ctx.r0[p[:, 1]], ctx.r0[p[:, 0]]
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    den = math.sqrt(float(a @ a) * float(b @ b))
    return float(a @ b) / den if den > 0 else 0.0


def _motion_scale(reals) -> float:
    """RMS displacement of the real keypoints about their mean position (unit): how far things move."""
    vals = []
    for r in reals:
        for k in range(r.num_keypoints):
            x = r.keypoints[r.valid[:, k], k]
            if x.shape[0] > 2:
                vals.append(float(np.mean(np.sum((x - x.mean(axis=0)) ** 2, axis=1))))
    return float(math.sqrt(np.mean(vals))) if vals else 0.0
