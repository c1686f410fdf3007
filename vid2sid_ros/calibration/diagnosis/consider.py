"""Consider analysis: model errors the free parameters absorb, which no residual test can see.

A frozen quantity ``c`` that is off by ``δ`` changes the rollout by ``J_c δ`` (``J_c`` (M,), its
probe column, residual per unit of ``c``). The least-squares fit answers with the free parameters:
regressing ``J_c`` on their columns ``F`` (M, n), ``J_c = F β_c + r_c``, the estimate moves by
``Δu = −β_c δ`` (normalised units) and only ``r_c δ`` is left in the residual. When ``r_c δ`` is
below what the noise lets the diagnosis detect, the data cannot tell "the free parameters are
right" from "``c`` is wrong and the free parameters compensate": the identified values are only
as good as ``c``'s nominal value. This is the *consider parameter* analysis of orbit
determination — the sensitivity of the estimate to unestimated parameters, ``S = −(FᵀF)⁻¹FᵀJ_c``,
and the consider covariance ``P_c = P + S C Sᵀ`` with ``C`` the consider parameters' a-priori
covariance (Tapley, Schutz & Born, *Statistical Orbit Determination*, Elsevier 2004, §6.9;
Bierman, *Factorization Methods for Discrete Sequential Estimation*, 1977, ch. VIII).

For each 1-D candidate cause of :mod:`.causes` with a *plausible error* ``δ_c``
(:data:`PLAUSIBLE`, per family) the analysis reuses the diagnosis's probe columns (no new
rollout; a measurement-side cause's column at size 0 costs none either) and reports:

- ``visible``: the diagnosis would flag ``c`` at ``δ_c`` with a probability of at least
  :data:`~.result.THRESHOLDS` ``consider_power`` — the non-centrality ``λ = ‖r_c δ_c‖² / σ²`` of its
  likelihood ratio against the same threshold the diagnosis uses (``χ²₁`` at ``1 − α/n``, and the
  share floor ``min_share`` of the residual sum of squares);
- the shift ``Δθ`` of every free parameter (its unit, both signs of ``δ_c``).

A candidate is **confounded** with a free parameter when it is not visible and its shift exceeds
both that parameter's statistical 95 % half-width (on the side it moves) and
``consider_min_shift`` of its value: a *caveat*, not a claim that the model is wrong. The
*consider-widened* 95 % interval of a free parameter combines its statistical half-width with the
shifts of every invisible candidate, root-sum-square on each side (the plausible errors taken as
independent 95 % bounds: ``P_c`` above); it contains the statistical interval and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .advice import separating_trial
from .causes import Cause, CameraPose, CommandTransform, Composite, FrozenParameter, Intrinsic, ModelField, TimeWarp
from .chi2 import chi2_ppf, chi2_sf, ncx2_sf_1
from .result import THRESHOLDS

__all__ = ["PLAUSIBLE", "ALIAS_EXACT", "plausible_error", "ConsiderResult", "consider", "absorbed", "confounded_set"]

#: ``1 − ‖r_c‖ / ‖J_c‖`` at or above which the free columns reproduce a cause's column so closely (to 2 %, the
#: accuracy of forward-difference columns) that the caveat adds that a measurement of one alone may be needed
ALIAS_EXACT = 0.98

#: the plausible error of each family of candidate (what a careful user's nominal value may be off by, as a
#: 95 % bound): relative for masses, inertias and joint fields (of their current value), SI otherwise
PLAUSIBLE: dict[str, float] = {
    "body_mass": 0.20,          # a link's mass and inertia from CAD or a scale: ±20 %
    "body_inertia": 0.20,       # its inertia alone: ±20 %
    "body_ipos": 0.005,         # its centre of mass: ±5 mm
    "joint_field": 0.20,        # a joint's armature, damping, stiffness, frictionloss (a nonzero nominal): ±20 %
    "frozen": 0.20,             # a frozen physics parameter of the spec: ±20 % of its value
    "actuator_gain": 0.10,      # a motor's torque constant or a gear: ±10 %
    "actuator_bias": 0.02,      # a command offset: ±2 % of the peak command
    "latency_frames": 1.0,      # a camera latency: ±1 frame
    "camera_position": 0.005,   # the camera's position: ±5 mm per axis
    "camera_angle": 0.005,      # its orientation: ±5 mrad per axis
    "focal": 0.01,              # a focal length: ±1 %
    "principal_point": 2.0,     # a principal point: ±2 px
}


def plausible_error(ctx: Any, cause: Cause) -> float | None:
    """``δ_c`` in the cause's own unit (:data:`PLAUSIBLE`), or None when the cause has none: a composite,
    a threshold effect (dead-zone, backlash: not differentiable at 0), frame drops or a rolling shutter (the
    diagnosis tests them; a global shutter and exact frame times are assumed), a marker offset, a model
    field whose nominal is 0 (an unmodelled spring is a structure error, not a wrong nominal value), a model
    field a free parameter writes (one joint's damping when a free parameter sets every joint's: it has no
    nominal value of its own — that the joints share one value is a structure assumption the residual tests)."""
    if isinstance(cause, Composite):
        return None
    if isinstance(cause, FrozenParameter):
        spec, v = cause.spec, float(ctx.full[cause.spec.name])
        target = spec.target.strip()
        if target.startswith("camera."):
            f = target.split(".", 1)[1]
            d = ({"x": PLAUSIBLE["camera_position"], "y": PLAUSIBLE["camera_position"],
                  "z": PLAUSIBLE["camera_position"], "roll": PLAUSIBLE["camera_angle"],
                  "pitch": PLAUSIBLE["camera_angle"], "yaw": PLAUSIBLE["camera_angle"],
                  "cx": PLAUSIBLE["principal_point"], "cy": PLAUSIBLE["principal_point"]}.get(f))
            if f in ("fx", "fy"):
                d = PLAUSIBLE["focal"] * abs(v)
            if d is None:
                return None
            moved = v + d
        else:
            if v == 0.0:
                return None
            moved = v * (1.0 + PLAUSIBLE["frozen"])
        if not spec.lower <= moved <= spec.upper:
            moved = v - (moved - v)  # the other sign, inside the bounds
        if not spec.lower <= moved <= spec.upper:
            return None
        return abs(spec.to_unit(moved) - spec.to_unit(v))  # theta is in normalised units
    if isinstance(cause, ModelField):
        if _written_by_free(ctx, cause):
            return None
        field_name = cause.writes[0][0] if cause.writes else ""
        if field_name == "body_mass":
            return PLAUSIBLE["body_mass"]
        if field_name == "body_inertia":
            return PLAUSIBLE["body_inertia"]
        if field_name == "body_ipos":
            return PLAUSIBLE["body_ipos"]
        cur = -float(cause.bounds[0])  # a joint field's search range starts at −(its current value)
        return PLAUSIBLE["joint_field"] * cur if cur > 0 else None
    if isinstance(cause, CommandTransform):
        if cause.mode == "gain" and _gain_is_free(ctx, cause):
            return None  # a command scale IS the free gain (the identified gain is the effective one)
        if cause.mode == "gain":
            return PLAUSIBLE["actuator_gain"]
        if cause.mode == "bias":
            return PLAUSIBLE["actuator_bias"] / 0.02 * abs(cause.step)  # the probe step is 2 % of the peak
        return None
    if isinstance(cause, TimeWarp):
        return PLAUSIBLE["latency_frames"] / ctx.rate if cause.mode == "latency" else None
    if isinstance(cause, CameraPose):
        return PLAUSIBLE["camera_position"] if cause.axis < 3 else PLAUSIBLE["camera_angle"]
    if isinstance(cause, Intrinsic):
        return PLAUSIBLE["focal"] if cause.field in ("fx", "fy", "f") else PLAUSIBLE["principal_point"]
    return None


def _free_fields(ctx: Any) -> set[tuple[str, str]]:
    """(field, index or name) of every model field a free parameter's target writes (all its parts)."""
    import re

    out: set[tuple[str, str]] = set()
    for sp in ctx.params.free:
        for part in sp.target.split(","):
            m = re.match(r"^\s*([a-z_]+)\[\s*([^,\]\s]+)", part)
            if m:
                out.add((m.group(1), m.group(2)))
    return out


def _written_by_free(ctx: Any, cause: ModelField) -> bool:
    free = _free_fields(ctx)
    for (f, idx, _), label in zip(cause.writes, cause.fields):
        name = label.split("[", 1)[1].split(",")[0].rstrip("]") if "[" in label else ""
        first = str(idx[0] if isinstance(idx, tuple) else idx)
        if (f, first) in free or (f, name) in free:
            return True
    return False


def _gain_is_free(ctx: Any, cause: CommandTransform) -> bool:
    """A free parameter writes this actuator's gear or gain (by model index or name); on a twin without a MuJoCo
    model and with one command, a free parameter whose target or name is a gain, gear or transmission does."""
    names = ctx.objective.excitations[0].actuator_names if ctx.objective.excitations else ()
    name = names[cause.column] if cause.column < len(names) else ""
    tokens = {name}
    model = getattr(ctx.twin, "model", None)
    if model is None and len(names) <= 1:  # a twin of its own with one drive: a free gain or gear parameter
        return any(_category(sp) == "actuator" for sp in ctx.params.free)  # scales its only command
    if model is not None:
        try:
            import mujoco

            i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name) if name else -1
            if i < 0 and cause.column < int(getattr(model, "nu", 0)):  # commands named u0, u1, ...: by column
                i = cause.column
                tokens.add(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or "")
            tokens.add(str(i))
        except (ImportError, TypeError, ValueError):
            pass
    return any(f in ("actuator_gear", "actuator_gainprm") and t in tokens for f, t in _free_fields(ctx))


def _percent(frac: float) -> str:
    return f"{100 * frac:.0f} %" if frac >= 0.1 else f"{100 * frac:.1f} %"


def _plausible_text(ctx: Any, cause: Cause, delta: float) -> str:
    """``δ`` for people: "20 %", "1 frame (33 ms)", "5 mm"."""
    if isinstance(cause, FrozenParameter):
        t = cause.spec.target.strip()
        if not t.startswith("camera."):
            return _percent(PLAUSIBLE["frozen"])
        f = t.split(".", 1)[1]
        return {"fx": "1 %", "fy": "1 %", "cx": "2 px", "cy": "2 px", "x": "5 mm", "y": "5 mm", "z": "5 mm"}.get(
            f, "5 mrad")
    if isinstance(cause, ModelField) and cause.writes and cause.writes[0][0] == "body_ipos":
        return f"{1000 * delta:.0f} mm"
    if isinstance(cause, TimeWarp):
        return f"{delta * ctx.rate:.0f} frame ({1000 * delta:.0f} ms)"
    if isinstance(cause, CameraPose):
        return f"{1000 * delta:.0f} {'mm' if cause.axis < 3 else 'mrad'}"
    if isinstance(cause, Intrinsic) and cause.field in ("cx", "cy"):
        return f"{delta:.0f} px"
    if isinstance(cause, CommandTransform) and cause.mode == "bias":
        return f"{100 * PLAUSIBLE['actuator_bias']:.0f} % of the peak command"
    if isinstance(cause, ModelField) and cause.writes[0][0] not in ("body_mass", "body_inertia"):
        return _percent(PLAUSIBLE["joint_field"])
    return _percent(delta)


@dataclass
class Absorbed:
    """One candidate's consider numbers. ``delta``: plausible error (cause's unit); ``beta`` (n,): the
    regression of its column on the free columns (normalised units per cause unit); ``lam``: the
    non-centrality ``‖r_c δ‖² / σ²``; ``power``: the probability the diagnosis would flag it; ``shift``:
    ``{free name: (down, up)}`` the move of each free parameter (its unit) for ``∓δ``/``±δ``."""

    cause: Cause
    delta: float
    beta: np.ndarray
    lam: float
    power: float
    visible: bool
    shift: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: ``1 − ‖r_c‖ / ‖J_c‖``: 1 when the free columns reproduce the cause's column exactly
    alias: float = 0.0


def absorbed(F: np.ndarray, column: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Regress a cause's column on the free columns: ``column ≈ F β + r`` over ``rows``.

    Args:
        F: free columns (M, n), residual unit per normalised unit; NaN columns are left out.
        column: the cause's column (M,), residual unit per cause unit.
        rows: (M,) bool, the samples used.

    Returns:
        ``(β (n,) with 0 for columns left out, r (rows,) the part no free parameter explains, used columns)``.
    """
    used = [j for j in range(F.shape[1]) if np.all(np.isfinite(F[rows, j])) and np.any(F[rows, j] != 0)]
    q = np.where(np.isfinite(column[rows]), column[rows], 0.0)
    beta = np.zeros(F.shape[1])
    if not used:
        return beta, q, used
    A = F[rows][:, used]
    scale = np.linalg.norm(A, axis=0)
    b = np.linalg.lstsq(A / scale, q, rcond=1e-10)[0] / scale
    beta[used] = b
    return beta, q - A @ b, used


@dataclass
class ConsiderResult:
    """What :func:`consider` found. ``candidates``: every analysed :class:`Absorbed`; ``caveats``:
    ``[{parameter, value, unit, cause, plausible, shift, shift_relative, half_width, ...}]`` one per
    confounded free parameter (its largest); ``intervals``: ``{free name: {lower, upper, statistical}}``
    the consider-widened 95 % intervals (its unit); ``critical_lr``: the detection threshold used."""

    candidates: list[Absorbed]
    caveats: list[dict[str, Any]]
    intervals: dict[str, dict[str, Any]]
    critical_lr: float
    message: str = ""
    #: :func:`confounded_set`: every candidate the trials cannot check, once each (the caveats keep one per parameter)
    unchecked: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "consider analysis (Tapley, Schutz & Born 2004, §6.9): sensitivity of the estimate to "
                          "plausible errors of unestimated quantities, with the diagnosis's detection threshold",
                "plausible": dict(PLAUSIBLE), "critical_lr": self.critical_lr, "power": THRESHOLDS["consider_power"],
                "min_shift": THRESHOLDS["consider_min_shift"], "caveats": self.caveats,
                "intervals": self.intervals, "message": self.message, "unchecked": self.unchecked,
                "candidates": [{"cause": a.cause.name, "kind": a.cause.kind, "plausible": a.delta, "unit": a.cause.unit,
                                "noncentrality": a.lam, "detection_power": a.power, "visible": a.visible,
                                "alias": a.alias,
                                "shift": {k: list(v) for k, v in a.shift.items()}} for a in self.candidates]}


def _statistical_half(ctx: Any, F: np.ndarray, rows: np.ndarray) -> dict[str, tuple[float, float]]:
    """Fallback 95 % interval ``(lower, upper)`` per free parameter when the run states none:
    Gauss–Newton ``σ² (FᵀF)⁻¹`` on the diagnosis's own columns (normalised), mapped to the unit."""
    out: dict[str, tuple[float, float]] = {}
    ok = [j for j in range(F.shape[1]) if np.all(np.isfinite(F[rows, j]))]
    if not ok:
        return out
    A = F[rows][:, ok]
    cov = ctx.sigma2 * np.linalg.pinv(A.T @ A)
    for k, j in enumerate(ok):
        s = ctx.free[j]
        h = 1.96 * math.sqrt(max(float(cov[k, k]), 0.0))
        u = float(ctx.u0[j])
        out[s.name] = (s.from_unit(max(u - h, 0.0)), s.from_unit(min(u + h, 1.0)))
    return out


def consider(ctx: Any, scores: Sequence[Any], F: np.ndarray, null_ssr: float, n_candidates: int,
             intervals: Mapping[str, Sequence[float]] | None = None) -> ConsiderResult:
    """The consider analysis of the diagnosis's candidates (module docstring).

    Args:
        ctx: the diagnosis's :class:`~.context.ProbeContext`.
        scores: its screened :class:`~.compare.Score` objects (their probe columns; ``column0`` when
            the refit re-measured a column elsewhere).
        F: the free columns (M, n), residual unit per normalised unit.
        null_ssr: the free parameters refitted alone, unit² (the share floor's reference).
        n_candidates: candidates tested (the Bonferroni count of the detection threshold).
        intervals: ``{free name: [lower, upper]}`` the run's statistical 95 % intervals (its unit);
            None: Gauss–Newton on ``F`` with the successive-difference noise level.

    Returns:
        :class:`ConsiderResult`. No rollout is spent on measured columns; a measurement-side cause
        (latency, intrinsics) is re-probed at size 0, which costs none.
    """
    alpha = THRESHOLDS["alpha"]
    crit = chi2_ppf(1.0 - alpha / max(n_candidates, 1), 1)
    share = THRESHOLDS["min_share"]
    sigma2 = ctx.sigma2
    floor = (share / (1.0 - share)) * null_ssr / sigma2 if sigma2 > 0 else math.inf
    crit_eff = max(crit, floor)
    rows = ctx.ok & np.all(np.isfinite(F) | np.all(np.isnan(F), axis=0), axis=1)
    stated = {k: (float(v[0]), float(v[1])) for k, v in (intervals or {}).items()
              if v is not None and v[0] is not None and v[1] is not None}
    if not stated:
        stated = _statistical_half(ctx, F, rows)
    cands: list[Absorbed] = []
    for sc in scores:
        c = sc.cause
        delta = plausible_error(ctx, c)
        if delta is None or delta <= 0:
            continue
        col = getattr(sc, "column0", None)
        col = sc.column if col is None else col
        if c.changes_measurement:  # its column at 0 (the screen's is at its best grid point): no rollout
            r1 = ctx.residual([c], [c.step])
            col = None if r1 is None else (r1 - ctx.r0) / c.step
        if col is None or sigma2 <= 0:
            continue
        beta, resid, used = absorbed(F, np.asarray(col, float), rows)
        lam = float(resid @ resid) * delta * delta / sigma2
        power = ncx2_sf_1(crit_eff, lam) if lam > 0 else chi2_sf(crit_eff, 1)
        if not math.isfinite(power):  # a non-centrality beyond the distribution's numerics (noise-free data)
            power = 1.0 if lam > crit_eff else 0.0
        a = Absorbed(c, float(delta), beta, lam, power, power >= THRESHOLDS["consider_power"])
        qn = float(np.linalg.norm(np.where(np.isfinite(col[rows]), col[rows], 0.0)))
        a.alias = 1.0 - float(np.linalg.norm(resid)) / qn if qn > 0 else 0.0
        for j in used:
            s = ctx.free[j]
            du = abs(float(beta[j])) * delta
            u0 = float(ctx.u0[j])
            v = s.from_unit(u0)
            a.shift[s.name] = (v - s.from_unit(max(u0 - du, 0.0)), s.from_unit(min(u0 + du, 1.0)) - v)
        cands.append(a)
    caveats = _caveats(ctx, cands, stated)
    widened = _widened(ctx, cands, stated)
    res = ConsiderResult(cands, caveats, widened, crit_eff, unchecked=confounded_set(ctx, cands, stated))
    res.message = caveat_message(caveats)
    return res


def _confounded_pairs(ctx: Any, cands: list[Absorbed], stated: Mapping[str, tuple[float, float]]
                      ) -> list[tuple[Any, Absorbed, float, float, float, float]]:
    """Every (free physics parameter, invisible candidate) pair where the candidate's plausible error moves the
    parameter beyond its 95 % half-width (on the side it moves) and by at least ``consider_min_shift`` of its
    value: ``(spec, candidate, shift/half-width, shift, relative shift, half-width)``, in parameter order."""
    out = []
    for s in ctx.free:
        if s.kind == "nuisance" or s.name not in stated:
            continue
        v = float(ctx.full[s.name])
        lo, hi = stated[s.name]
        for a in cands:
            if a.visible or s.name not in a.shift:
                continue
            down, up = a.shift[s.name]
            shift = max(down, up)
            half = (hi - v) if up >= down else (v - lo)  # the interval's half-width on the side it moves
            rel = shift / abs(v) if v != 0 else math.inf
            if shift > max(half, 0.0) and rel >= THRESHOLDS["consider_min_shift"]:
                out.append((s, a, shift / half if half > 0 else math.inf, shift, rel, half))
    return out


def confounded_set(ctx: Any, cands: list[Absorbed], stated: Mapping[str, tuple[float, float]]
                   ) -> list[dict[str, Any]]:
    """The candidates the trials cannot check: every invisible candidate that moves at least one free physics
    parameter beyond its 95 % interval by at least ``consider_min_shift`` of its value (:func:`_confounded_pairs`),
    once each, the one that moves a parameter furthest (in half-widths) first.

    Returns:
        ``[{cause, kind, fields, parameters: [names it moves so], parameter_kinds: [their categories, as the causes'
        kinds], max_shift_relative, max_shift_over_half_width}]``.
    """
    by: dict[int, dict[str, Any]] = {}
    order: dict[int, float] = {}
    for s, a, ratio, _shift, rel, _half in _confounded_pairs(ctx, cands, stated):
        d = by.setdefault(id(a), {"cause": a.cause.name, "kind": a.cause.kind, "fields": list(a.cause.fields),
                                  "parameters": [], "parameter_kinds": [], "max_shift_relative": 0.0,
                                  "max_shift_over_half_width": 0.0})
        d["parameters"].append(s.name)
        if _category(s) not in d["parameter_kinds"]:
            d["parameter_kinds"].append(_category(s))
        d["max_shift_relative"] = max(d["max_shift_relative"], rel)
        d["max_shift_over_half_width"] = max(d["max_shift_over_half_width"], ratio)
        order[id(a)] = max(order.get(id(a), 0.0), ratio)
    return [by[k] for k in sorted(by, key=lambda k: -order[k])]


def _caveats(ctx: Any, cands: list[Absorbed], stated: Mapping[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """One caveat per free physics parameter that an invisible candidate moves beyond its interval (the largest)."""
    out = []
    pairs = _confounded_pairs(ctx, cands, stated)
    for s in ctx.free:
        mine = [p for p in pairs if p[0] is s]
        if not mine:
            continue
        v = float(ctx.full[s.name])
        _, a, _, shift, rel, half = max(mine, key=lambda p: p[2])
        sep = separating_trial([a.cause, _Kind(_category(s))])
        if a.alias >= ALIAS_EXACT:  # the free columns reproduce its column: perhaps one combination (a product)
            sep += (f"; or, if no trial does (their effects agree to {100 * (1 - a.alias):.2g} % on these trials, "
                    "as for two factors of one product), a measurement of one of them alone")
        out.append({"parameter": s.name, "value": v, "unit": s.unit, "cause": a.cause.name, "kind": a.cause.kind,
                    "fields": list(a.cause.fields), "plausible": a.delta,
                    "plausible_text": _plausible_text(ctx, a.cause, a.delta), "shift": shift, "shift_relative": rel,
                    "half_width": half, "detection_power": a.power, "separate_with": sep})
    return out


@dataclass
class _Kind:
    """A stand-in with a ``kind`` for :func:`~.advice.separating_trial` (a free parameter's category)."""

    kind: str


def _category(spec: Any) -> str:
    return FrozenParameter("", "frozen", (), "", 0.0, (0.0, 0.0), spec=spec).category


def _widened(ctx: Any, cands: list[Absorbed], stated: Mapping[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """Consider-widened 95 % intervals: per side, the root-sum-square of the statistical half-width and the
    shifts of every invisible candidate; clipped to the search bounds, never excluding the value."""
    out: dict[str, dict[str, Any]] = {}
    for s in ctx.free:
        if s.name not in stated:
            continue
        v = float(ctx.full[s.name])
        lo, hi = stated[s.name]
        dn = sum(a.shift[s.name][0] ** 2 for a in cands if not a.visible and s.name in a.shift)
        upw = sum(a.shift[s.name][1] ** 2 for a in cands if not a.visible and s.name in a.shift)
        a_lo = v - math.sqrt(max(v - lo, 0.0) ** 2 + dn)
        a_hi = v + math.sqrt(max(hi - v, 0.0) ** 2 + upw)
        a_lo = min(max(a_lo, min(s.lower, lo)), lo, v)
        a_hi = max(min(a_hi, max(s.upper, hi)), hi, v)
        out[s.name] = {"lower": a_lo, "upper": a_hi, "statistical": [lo, hi], "unit": s.unit}
    return out


def caveat_message(caveats: Sequence[Mapping[str, Any]]) -> str:
    """One paragraph: which identified values rest on which unchecked nominal values, by how much."""
    if not caveats:
        return ""
    parts = []
    for c in caveats[:3]:
        parts.append(f"{c['parameter']} = {c['value']:.3g} {c['unit']} assumes the {c['cause']} is right: a "
                     f"{c['plausible_text']} error there would move it by {_percent(c['shift_relative'])} "
                     f"(its 95 % interval's half-width: {c['half_width']:.2g} {c['unit']}) with no change in the fit")
    more = f" (and {len(caveats) - 3} more parameter(s))" if len(caveats) > 3 else ""
    seps = list(dict.fromkeys(c["separate_with"] for c in caveats[:3]))
    return ("Caveat, not a model error: " + "; ".join(parts).replace("*", "·") + more + ". These trials cannot tell "
            "them apart; a designed trial can (" + "; ".join(seps) + "). The consider-widened intervals include "
            "these plausible errors.")
