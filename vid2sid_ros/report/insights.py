"""What a run's numbers mean: parameter rows with labelled intervals, and the insights list.

Shared by the HTML report and the terminal summary so both say the same thing.

Intervals: the calibration loop's uncertainty is the Gauss–Newton (linearised
least-squares) standard deviation σ at the best point (``cov = s² (JᵀJ)⁻¹`` times the
residuals' autocorrelation time; Ljung, *System Identification*, 2nd ed., §9.3;
:mod:`vid2sid_ros.calibration.identifiability`). The report shows ±1.96 σ (95 % if the
model were linear near the result, the model right and the fit converged). It is
labelled *unreliable* when the run did not converge (stopped at its budget or its
iteration limit), when the value sits at a search bound (the local model is cut), or
when the parameter is in a poorly identifiable combination. An interval a run supplies
itself (``result.json: intervals: {name: {lower, upper, method}}``) is shown instead,
with its method.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..calibration.proposers.rationale import unit_text
from ..core.trajectory import format_error
from .run import RunSummary, finite, stop_kind

__all__ = ["ParameterRow", "Insight", "parameter_rows", "applied_bias_correction", "insights", "stop_sentence",
           "tracked_lines", "AT_BOUND_FRACTION",
           "STRONG_CORRELATION", "go_on_advice", "optimum_values", "unconverged_reason", "recent_improvement", "STILL_IMPROVING", "IMPROVING_WINDOW"]

#: a value within this fraction of the normalised range of a bound is "at the bound"
AT_BOUND_FRACTION = 0.005
#: |correlation| above which two parameters are called hard to tell apart
STRONG_CORRELATION = 0.95
#: two-sided 95 % normal quantile
Z95 = 1.959964
#: a run stopped at a limit was "still improving" when its best training error fell by at least this
#: fraction (relative) over its last :data:`IMPROVING_WINDOW` iterations
STILL_IMPROVING = 0.01
IMPROVING_WINDOW = 3


@dataclass
class ParameterRow:
    """One free (or frozen) parameter as the report and the terminal show it (SI units; ``unit``
    spelt as people read it, ``N·m/rad``: see :func:`~vid2sid_ros.calibration.proposers.rationale.unit_text`)."""

    name: str
    unit: str
    kind: str
    meaning: str
    lower: float
    upper: float
    scale: str
    frozen: bool
    initial: float | None
    final: float
    std: float | None = None
    interval: tuple[float, float] | None = None
    #: the interval's centre when the run states one (the least-squares optimum of the
    #: measurement-consistent residual; may differ from ``final``, the identified value)
    centre: float | None = None
    interval_method: str = ""
    #: ``two-sided`` | ``one-sided (lower bound)`` | ``one-sided (upper bound)`` | ``not identified`` | ...
    #: (:func:`~vid2sid_ros.calibration.identifiability.stated_interval`); "" when the run states none
    interval_kind: str = ""
    #: why the interval is not simply ``centre ± 1.96σ`` (extended to the value, truncated at a bound), or ""
    interval_note: str = ""
    reliable: bool = False
    unreliable_because: list[str] = field(default_factory=list)
    truth: float | None = None
    at_bound: str = ""  # "", "lower", "upper"
    #: the consider-widened 95 % interval (the statistical one combined with the shifts plausible errors of
    #: unchecked nominal values would cause, :mod:`~vid2sid_ros.calibration.diagnosis.consider`), shown beside
    #: the statistical one when a caveat names this parameter; None otherwise
    consider_interval: tuple[float, float] | None = None
    #: the caveat's cause ("the mass of body 'middle' ...") when one names this parameter
    caveat: str = ""
    #: the proposer's own point (SI, ``unit``) when ``final`` is the bias-corrected value (``result.json:
    #: bias_correction``, applied: :func:`applied_bias_correction`); None when no correction was applied
    proposed: float | None = None

    @property
    def flagged(self) -> bool:
        """The value is printed with the mark UNRELIABLE (``vid2sid calibrate``, ``vid2sid demo``): it has an
        interval and is not :attr:`reliable` (the run did not converge, the value is at a bound, or the
        parameter is in a poorly identifiable combination; :attr:`unreliable_because` says which)."""
        return self.interval is not None and not self.reliable

    @property
    def rel_error(self) -> float | None:
        """|final − truth| / |truth| (sim2sim only)."""
        if self.truth is None or self.truth == 0:
            return None
        return abs(self.final - self.truth) / abs(self.truth)

    @property
    def truth_inside(self) -> bool | None:
        if self.truth is None or self.interval is None:
            return None
        tol = 1e-9 * max(abs(self.truth), abs(self.final), 1e-300)  # exact recovery with a zero-width interval
        return self.interval[0] - tol <= self.truth <= self.interval[1] + tol

    def interval_text(self, digits: int = 3) -> str:
        """E.g. ``[1.2, 1.9] (Gauss–Newton 95 %; unreliable: run stopped at budget)``."""
        if self.interval is None:
            return "no interval (" + (self.interval_method or "not computed") + ")"
        lo, hi = self.interval
        txt = f"[{lo:.{digits}g}, {hi:.{digits}g}] ({self.interval_method}"
        if self.interval_kind and self.interval_kind != "two-sided":
            txt += f"; {self.interval_kind}"
        if self.interval_note:
            txt += f"; {self.interval_note}"
        if not self.reliable:
            txt += "; UNRELIABLE: " + ", ".join(self.unreliable_because)
        return txt + ")"


@dataclass
class Insight:
    """One finding: ``kind`` (at_bound | unconverged | tracking | poorly_identifiable | start_identifiability |
    correlated | residual | caveat | holdout | no_improvement | failures), one-line ``title`` and details."""

    kind: str
    title: str
    detail: str = ""
    severity: str = "warning"  # warning | info


#: training errors below these count as "at the noise floor" when the holdout is compared with them
#: (half a pixel; half a millimetre; a milliradian; half a noise sigma)
_ERROR_FLOOR = {"px": 0.5, "m": 0.0005, "rad": 0.001, "sigma": 0.5}

def _weak_names(run: RunSummary) -> set[str]:
    fid = run.result.get("final_identifiability") or {}
    out: set[str] = set()
    for w in fid.get("weak_directions") or []:
        out.update(n for n, x in (w.get("combination") or {}).items() if abs(float(x)) >= 0.3)
    return out


def unconverged_reason(stopped: str) -> str:
    """Why every value of a run stopped by ``stopped`` is unreliable (its fit did not converge), as
    :attr:`ParameterRow.unreliable_because` words it; "" for a stop that leaves the values reliable
    (converged, target reached, stalled: the stalled stop's own test is the report's to state)."""
    kind = stop_kind(stopped)
    if kind == "budget":
        return "run stopped at its rollout budget without converging"
    if kind == "iterations":
        return "run stopped at its iteration limit without converging"
    if kind in ("interrupted", "other"):
        return f"run did not converge ({stopped or 'unknown stop'})"
    return ""


def applied_bias_correction(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """``result.json``'s ``bias_correction`` when it was applied, else None (not applied, or a run from
    older code without it).

    When applied, the reported values are the least-squares optimum with the tracker's bias modelled
    (the twin filmed and tracked like the robot, :mod:`~vid2sid_ros.calibration.bias_correction`), not the
    proposer's own point: ``before`` holds that point ({name: SI value}), ``ssr_before`` and ``ssr_after``
    the sums of squared residuals with the bias modelled at the two points (``unit``²).
    """
    bc = result.get("bias_correction")
    if not isinstance(bc, Mapping) or bc.get("applied") is not True:
        return None
    return dict(bc)


def parameter_rows(run: RunSummary) -> list[ParameterRow]:
    """Every parameter of the run, free first, with interval, reliability, truth and bound flags; the
    proposer's own point beside a bias-corrected value (:attr:`ParameterRow.proposed`)."""
    start = run.start_values
    corrected = applied_bias_correction(run.result)
    before = (corrected or {}).get("before")
    before = before if isinstance(before, Mapping) else {}
    unc = run.result.get("uncertainty") or {}
    given = run.result.get("intervals") or {}
    kind = stop_kind(run.stopped)
    weak = _weak_names(run)
    held = set(run.result.get("unobservable_on_training") or [])  # frozen by the loop's start check
    rows = []
    specs = sorted(run.parameters.specs, key=lambda s: s.frozen)
    specs += list(run.nuisance)  # the measurement nuisances (ParameterSpecs of kind nuisance), after the model's
    for s in specs:
        final = float(s.nominal)
        row = ParameterRow(s.name, str(s.unit).replace("*", "·"), s.kind, _meaning(s, run), float(s.lower),
                           float(s.upper), s.scale, bool(s.frozen),
                           finite(start.get(s.name)), final, finite(unc.get(s.name)),
                           truth=(finite(run.truth.get(s.name)) if run.truth else None),
                           proposed=finite(before.get(s.name)))
        if not s.frozen:
            u = s.to_unit(final)
            row.at_bound = "lower" if u <= AT_BOUND_FRACTION else ("upper" if u >= 1 - AT_BOUND_FRACTION else "")
        g = given.get(s.name) if isinstance(given, Mapping) else None
        if isinstance(g, Mapping) and finite(g.get("lower")) is not None and finite(g.get("upper")) is not None:
            row.interval = (float(g["lower"]), float(g["upper"]))
            row.interval_method = str(g.get("method") or "interval supplied by the run")
            row.centre = finite(g.get("centre"))
            row.interval_kind = str(g.get("kind") or "")
            row.interval_note = str(g.get("note") or "")
        elif row.std is not None:
            row.interval = (final - Z95 * row.std, final + Z95 * row.std)
            row.interval_method = "Gauss–Newton ±1.96σ, local (linearised at the result)"
        elif s.name in held:
            row.interval_method = "held at its start value: unobservable on the training data, not calibrated"
        elif s.frozen:
            row.interval_method = "frozen, not calibrated"
        else:
            row.interval_method = "no identifiability check at the result"
        reasons = [why] if (why := unconverged_reason(run.stopped)) else []
        if row.at_bound:
            reasons.append(f"value at the {row.at_bound} bound")
        if s.name in weak:
            reasons.append("in a poorly identifiable combination")
        row.unreliable_because = reasons
        row.reliable = row.interval is not None and not reasons and not s.frozen
        _consider_row(row, run.result.get("residual_diagnosis"))
        rows.append(row)
    return rows


def _meaning(spec: Any, run: RunSummary) -> str:
    """The spec's meaning as the report shows it: the ``latency`` nuisance of a run from older code that called
    every delay a camera's says the measurement's when the trials were not video (unit not px)."""
    from ..calibration.nuisance import LATENCY, latency_meaning

    unit = str(run.result.get("unit") or "px")
    if spec.kind == "nuisance" and spec.name == LATENCY and spec.meaning == latency_meaning("px") and unit != "px":
        return latency_meaning(unit)
    return spec.meaning


def _consider_row(row: ParameterRow, diag: Any) -> None:
    """The consider-widened interval and the caveat's cause, when the diagnosis's caveat names ``row``."""
    con = diag.get("consider") if isinstance(diag, Mapping) else None
    if not isinstance(con, Mapping):
        return
    cav = next((c for c in con.get("caveats") or [] if isinstance(c, Mapping) and c.get("parameter") == row.name), None)
    iv = (con.get("intervals") or {}).get(row.name)
    if cav is None or not isinstance(iv, Mapping):
        return
    lo, hi = finite(iv.get("lower")), finite(iv.get("upper"))
    if lo is None or hi is None:
        return
    if row.interval is not None:  # never narrower than the statistical interval it widens, always holding the value
        lo, hi = min(lo, row.interval[0]), max(hi, row.interval[1])
    row.consider_interval = (min(lo, row.final), max(hi, row.final))
    row.caveat = str(cav.get("cause") or "")


def _caveat_items(diag: Any) -> list[str]:
    """The consider caveat's message (a nominal value the fit cannot check), or none."""
    if not isinstance(diag, Mapping):
        return []
    return [str(f.get("message")) for f in diag.get("findings") or []
            if isinstance(f, Mapping) and f.get("severity") == "caveat" and f.get("message")]


def stop_sentence(run_or_stopped: RunSummary | str, iterations_done: int | None = None,
                  iterations_asked: int | None = None, rollouts: int | None = None,
                  budget: int | None = None) -> str:
    """One line naming the stop reason, e.g. ``stopped: budget (40 of 40 rollouts) — NOT converged``."""
    if isinstance(run_or_stopped, RunSummary):
        r = run_or_stopped
        stopped = r.stopped
        iterations_done = r.result.get("iterations")
        iterations_asked = r.config.get("iterations")
        rollouts = r.result.get("rollouts")
        budget = r.config.get("rollout_budget")
    else:
        stopped = run_or_stopped
    kind = stop_kind(stopped)
    it = (f"{iterations_done} of {iterations_asked} iterations" if iterations_asked is not None
          else f"{iterations_done} iterations")
    ro = f"{rollouts} of {budget} rollouts" if budget else f"{rollouts} rollouts"
    if kind == "converged":
        return f"stopped: converged after {it}, {ro}"
    if kind == "target":
        return f"stopped: target error reached ({stopped}) after {it}, {ro}"
    if kind == "budget":
        return f"stopped: budget ({ro}, {it}) — NOT converged"
    if kind == "iterations":
        return f"stopped: iterations ({it}, {ro}) — NOT converged"
    if kind == "interrupted":
        return f"stopped: interrupted after {it}, {ro}"
    if kind == "stalled":
        return f"stopped: {stopped} ({it}, {ro}) — NOT converged"
    return f"stopped: {stopped} ({it}, {ro})"


def _residual_items(diag: Any) -> list[str]:
    """Lines from a residual diagnosis (dict with findings/summary, list, or text)."""
    if not diag:
        return []
    if isinstance(diag, str):
        return [diag]
    if isinstance(diag, Mapping):
        if diag.get("failed"):  # never quiet: the parameters were not checked (the traceback is in result.json)
            return [f"{diag.get('summary') or 'residual diagnosis failed'}: the parameters were not checked "
                    "against the model errors the diagnosis looks for (its traceback is in result.json, "
                    "residual_diagnosis.traceback)"]
        items = diag.get("findings") or diag.get("items") or []
        if isinstance(items, list):  # only what the diagnosis flags as a warning is an insight, and the tracker's
            items = [f for f in items if not isinstance(f, Mapping)  # bias (a note: the measurement, not the model)
                     or f.get("severity", "warning") == "warning" or f.get("kind") == "tracker"]
        if diag.get("misspecified") is False and not items:  # a quiet diagnosis is not an insight
            return []
        out = [str(diag["summary"])] if diag.get("summary") and diag.get("misspecified") else []
        for f in items if isinstance(items, list) else []:
            out.append(str(f.get("text") or f.get("message") or f) if isinstance(f, Mapping) else str(f))
        if not out:
            out = [f"{k}: {v}" for k, v in diag.items()]
        return out
    if isinstance(diag, list):
        return [str(x.get("text") or x.get("message") or x) if isinstance(x, Mapping) else str(x) for x in diag]
    return [str(diag)]


def tracked_lines(result: Mapping[str, Any]) -> list[str]:
    """``trial 't0': tip 82 %, mid 100 % of 120 frames`` per trial of ``result["tracking"]`` (the
    fraction of frames each keypoint was measured in, :mod:`vid2sid_ros.perception.quality`)."""
    out = []
    for trial, t in (result.get("tracking") or {}).items():
        tracked = t.get("tracked") if isinstance(t, Mapping) else None
        if not isinstance(tracked, Mapping) or not tracked:
            continue
        parts = ", ".join(f"{n} {100 * float(f):.0f} %" for n, f in tracked.items() if finite(f) is not None)
        out.append(f"trial '{trial}': {parts} of {t.get('frames', '?')} frames")
    return out


def _tracking_insights(result: Mapping[str, Any]) -> list[Insight]:
    """The tracking warnings; the tracked fractions as one info item when a sample was lost anywhere."""
    out = []
    lossy = any(finite(f) is not None and float(f) < 1.0 for t in (result.get("tracking") or {}).values()
                if isinstance(t, Mapping) for f in (t.get("tracked") or {}).values())
    if lossy:
        out.append(Insight("tracking", "Share of frames each keypoint was tracked in: "
                           + "; ".join(tracked_lines(result)), severity="info"))
    for trial, t in (result.get("tracking") or {}).items():
        for w in (t.get("warnings") or []) if isinstance(t, Mapping) else []:
            out.append(Insight("tracking", f"Tracking, trial '{trial}': {w}",
                               "The calibration fits only what the tracker measured: lost samples are left out, "
                               "and samples of another object are fitted as if they were the marker."))
    return out


def recent_improvement(run: RunSummary, window: int = IMPROVING_WINDOW) -> float | None:
    """Relative decrease of the best training error over the run's last ``window`` iterations.

    ``(best[-window-1] - best[-1]) / best[-window-1]`` where ``best[k]`` is the lowest finite
    ``error_px`` of the records (``iterations.jsonl``, record 0 the start point) up to record ``k``;
    0.0 when nothing improved, None when the run has fewer than ``window + 1`` finite records (too
    short to tell) or a non-positive error.
    """
    best: list[float] = []
    for rec in run.records:
        e = finite(getattr(rec, "error_px", None))
        if e is not None:
            best.append(e if not best else min(best[-1], e))
    if len(best) < window + 1 or best[-window - 1] <= 0:
        return None
    return (best[-window - 1] - best[-1]) / best[-window - 1]


def _model_finding(diag: Any) -> str:
    """The residual diagnosis's named cause and action (``actuator 'motor' dead-zone: model the drive's
    deadzone ...``), else its summary; "" when the diagnosis does not say the model is wrong."""
    if not isinstance(diag, Mapping) or not diag.get("misspecified"):
        return ""
    rec = diag.get("recommendation")
    if isinstance(rec, Mapping) and rec.get("cause"):
        return str(rec["cause"]) + (f": {rec['action']}" if rec.get("action") else "")
    return str(diag.get("summary") or "the model cannot fit these data")


def optimum_values(diag: Any) -> dict[str, float]:
    """Where the residual diagnosis's verdict *not at the optimum* puts the free parameters (its refit from
    afar: ``{"pan_kp": 0.19962, ...}``, SI units); ``{}`` for any other verdict or when it gives no values."""
    if not isinstance(diag, Mapping) or diag.get("verdict") != "not_at_optimum":
        return {}
    for f in diag.get("findings") or []:
        values = ((f.get("evidence") or {}) if isinstance(f, Mapping) else {}).get("values")
        if isinstance(values, Mapping) and values:
            return {str(k): float(v) for k, v in values.items() if finite(v) is not None}
    return {}


def _optimum_elsewhere(diag: Any) -> str:
    """:func:`optimum_values` as text (``"pan_kp = 0.1996, ..."``), ``"not given"`` without values; "" for any
    other verdict than *not at the optimum*."""
    if not isinstance(diag, Mapping) or diag.get("verdict") != "not_at_optimum":
        return ""
    values = optimum_values(diag)
    return ", ".join(f"{k} = {v:.4g}" for k, v in values.items()) if values else "not given"


def go_on_advice(run: RunSummary) -> tuple[bool, str]:
    """Whether running longer could change an unconverged run's result, and the sentence that says so.

    Returns ``(helps, sentence)``:

    * the residual diagnosis says the model is wrong (``residual_diagnosis.misspecified``): more
      iterations or budget cannot make the values physical, whatever the stop: ``False`` and the
      diagnosis's finding (its recommended cause and action);
    * the diagnosis's verdict is *not at the optimum* (the free parameters alone, refitted, fit the data
      further on): ``True``, with the values it found, whatever the stop: a run stopped at its budget or
      iterations is resumed with larger ones (``--resume``), a stalled one started anew there (``--start``);
    * ``stalled``: the optimiser itself found no step that lowers the error: ``False`` (a failed
      first-order test at such a point means the model cannot fit the data or the rollouts are too
      noisy for finite differences, not that the run was short);
    * ``iterations`` / ``budget``: ``True`` when the run was still improving at its limit — its best
      training error fell by at least :data:`STILL_IMPROVING` (relative) over its last
      :data:`IMPROVING_WINDOW` iterations (:func:`recent_improvement`; a run too short to tell counts
      as improving) — else ``False``;
    * ``interrupted``: ``True`` (``--resume`` continues it); any other stop: ``True`` with no advice.
    """
    kind = stop_kind(run.stopped)
    finding = _model_finding(run.result.get("residual_diagnosis"))
    if finding and kind in ("budget", "iterations", "stalled", "interrupted", "other"):
        return False, ("more iterations or a larger budget will not help: the residual diagnosis finds the model "
                       f"cannot fit these data ({finding}); fix the model first")
    elsewhere = _optimum_elsewhere(run.result.get("residual_diagnosis"))
    if elsewhere and kind in ("budget", "iterations", "stalled", "other"):
        where = "" if elsewhere == "not given" else f" ({elsewhere})"
        there = "there" if where else "from where it stopped"
        how = ("continue it with more iterations and a larger budget (--resume)"
               + (", or start a new run there (--start NAME=VALUE,...)" if where else "")
               if kind in ("budget", "iterations") else f"start a new run {there} (--start NAME=VALUE,...)")
        return True, ("the residual diagnosis finds the free parameters alone fit the data at an optimum the run "
                      f"stopped short of{where}: {how}")
    if kind == "stalled":
        return False, ("more iterations or a larger budget will not help: the optimiser found no step that lowers "
                       "the error; check the model against the data (a model that cannot fit them leaves a "
                       "gradient no step can follow) or lower the rollouts' noise")
    if kind in ("budget", "iterations"):
        rel = recent_improvement(run)
        if rel is not None and rel < STILL_IMPROVING:
            return False, (f"more iterations are unlikely to help: the best error fell by only {100 * rel:.2g} % over "
                           f"the last {IMPROVING_WINDOW} iterations")
        what = ("it was still improving at its limit" if rel is not None
                else "the run was too short to tell whether it had settled")
        return True, f"{what}: continue it with more iterations and a larger budget (--resume)"
    if kind == "interrupted":
        return True, "continue it with --resume"
    return True, ""


def insights(run: RunSummary, rows: list[ParameterRow] | None = None) -> list[Insight]:
    """What a person should look at first, most important first (see the module docstring)."""
    rows = rows if rows is not None else parameter_rows(run)
    res = run.result
    out: list[Insight] = []
    kind = stop_kind(run.stopped)
    if kind in ("budget", "iterations", "interrupted", "stalled"):
        what = {"budget": "at its rollout budget", "iterations": "at its iteration limit",
                "interrupted": "when interrupted", "stalled": "with no step left that lowers the error"}[kind]
        advice = go_on_advice(run)[1]
        out.append(Insight("unconverged", f"The run stopped {what} without converging",
                           stop_sentence(run) + ". The identified values are the best seen so far, not a converged "
                           "fit; intervals are unreliable. " + advice[:1].upper() + advice[1:] + "."))
    out.extend(_tracking_insights(res))  # what the measurements lost comes before what was fitted to them
    for r in rows:
        if r.at_bound:
            b = r.lower if r.at_bound == "lower" else r.upper
            bound = f"{b:.4g} {unit_text(r.unit)}".strip()
            out.append(Insight("at_bound", f"{r.name} is at its {r.at_bound} bound ({bound})",
                               "The optimum may lie outside the search range: widen the bound if it is not physical, "
                               "or check the model (a parameter pinned at a bound often absorbs a model error)."))
    fid = res.get("final_identifiability") or {}
    for w in fid.get("weak_directions") or []:
        combo = w.get("combination") or {}
        text = " ".join(f"{x:+.2f}·{n}" for n, x in combo.items())
        sv = finite(w.get("singular_value"))
        out.append(Insight("poorly_identifiable", f"Poorly identifiable combination: {text}",
                           (f"moving along it changes the keypoints by only {sv:.3g} {res.get('unit') or 'px'} RMS per "
                            "unit normalised move; "
                            if sv is not None else "") + "the excitation cannot separate these parameters "
                           "(add an excitation that moves them differently, or freeze one)."))
    start = res.get("identifiability") or {}
    if start.get("warning") and start.get("warning") != fid.get("warning"):
        # the check at the start point warned (printed while the run went): the report says so too
        final_ok = bool(fid) and not fid.get("weak_directions")
        out.append(Insight("start_identifiability", f"At the start point: {start['warning']}",
                           "The check at the result found no poorly identifiable combination: the warning is about "
                           "the start point's values." if final_ok else
                           "No check ran at the result." if not fid else "See the check at the result.",
                           severity="info" if final_ok else "warning"))
    corr = fid.get("correlation") or []
    names = fid.get("names") or []
    if corr and len(corr) == len(names):
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                c = finite(corr[i][j])
                if c is not None and abs(c) >= STRONG_CORRELATION:
                    out.append(Insight("correlated", f"{names[i]} and {names[j]} are correlated (ρ = {c:+.3f})",
                                       "their estimates trade off against each other: the data constrain a "
                                       "combination better than each alone."))
    for line in _residual_items(res.get("residual_diagnosis")):
        out.append(Insight("residual", f"Residual diagnosis: {line}"))
    for line in _caveat_items(res.get("residual_diagnosis")):
        out.append(Insight("caveat", line, "the identified values are only as good as these nominal values: "
                           "a plausible error in them moves the estimate by more than its statistical interval "
                           "and leaves the fit as good (consider analysis); the consider-widened intervals "
                           "include it."))
    h, e = finite(res.get("holdout_mae")), finite(res.get("training_mae"))
    u = str(res.get("unit") or "px")
    hu = str(res.get("holdout_unit") or u)
    if h is not None and e is not None and hu == u and h > 2.0 * max(e, _ERROR_FLOOR.get(u, 0.5)):
        out.append(Insight("holdout", f"Holdout error {format_error(h, hu)} is {h / max(e, 1e-9):.1f}× the "
                                      f"training error {format_error(e, u)}", "the twin fits the training trials "
                                      "better than it predicts "
                           "new ones: an over-fit or a model error the training excitation does not expose."))
    s0 = finite(res.get("initial_mae"))
    if s0 is not None and e is not None and e >= s0:
        out.append(Insight("no_improvement", f"No improvement on the start ({format_error(s0, u)})"))
    failed = [r.iteration for r in run.records[1:] if not math.isfinite(r.error_px)]
    if failed:
        out.append(Insight("failures", f"{len(failed)} iteration(s) failed to evaluate: {failed[:10]}",
                           "see the iteration notes below", severity="info"))
    for t in run.trials:
        if t.message:
            out.append(Insight("failures", f"trial {t.name}: {t.message}", severity="info"))
    return out
