"""Residual diagnosis: is there structure in the final residuals that the free parameters cannot explain?

A calibration that reaches a small training error has not thereby found the *true*
physics: a small camera latency, a frozen parameter that is somewhat off or friction the
model lacks are absorbed by a compensating combination of the free parameters, and the
fit still looks good. What is left over is not noise, though — it has a shape. After
every calibration :func:`diagnose` tests the residuals ``r = sim − real`` at the best
parameters (paired by command step, in the measurement's unit) for these shapes and says
in plain words what it sees, with the numbers:

=============== ==============================================================================================
kind            test (evidence in ``Finding.evidence``)
=============== ==============================================================================================
``latency``     *lag*: the time shift ``δ`` that best aligns the twin with the robot, by Gauss–Newton on the
                shift (``δ = −Σ r·ṡ / Σ ṡ·ṡ``, ``ṡ`` the twin's velocity; the cross-correlation peak of
                real and twin, to first order), and the share of the squared residual that shifting removes.
                Warns when ``|δ| ≥ 0.15`` frame and the shift removes ≥ 25 %. An identified ``latency``
                nuisance of ≥ 0.2 frame is reported as a note (handled, not a warning).
``rolling_shutter`` a lag linear in the image row: ``r ≈ ṡ · (a + b · (v − v̄))`` by least squares (``v`` the twin's
                row, px); the readout over the image is ``−b · (H − 1)`` (``H`` the twin camera's height). Warns
                when the readout is ≥ 0.15 frame and the row term removes ≥ 25 % of the squared residual beyond
                a common lag (the share beyond one lag per keypoint, from the rows a keypoint visits along its
                own path, is reported too: on the finger 25–57 % under a 20 ms readout, ≤ 1 % otherwise).
``timing``      the same shift measured in the first and the last third of each trial: a lag that changes
                (by ≥ 0.3 frame) means dropped frames or a wrong frame rate, not a constant latency.
``frozen``      *release probe*: one sensitivity probe per frozen physics parameter (forward difference,
                step 5 % of its normalised range) and one per free parameter; the drop of the squared
                residual a joint least-squares step with that parameter released would give (the residual
                projected on the probe column orthogonalised against the free columns). Warns when the
                predicted drop is ≥ 30 %, naming the parameter and the value it points to.
``friction``    (a) *unmodelled-friction probe* on MuJoCo twins: the same release probe for Coulomb friction
                the spec does not model — ``tendon_frictionloss`` of every tendon, and ``dof_frictionloss`` of
                every DoF when no parameter targets it — raised by 0.01 (N or N·m); warns when its predicted
                drop is ≥ 30 % and larger than every frozen parameter's (the better explanation is named, the
                weaker one dropped). (b) the residual along the twin's direction of motion, regressed on
                ``|v|`` (lag-like) and on ``sign of motion`` (a constant force against the motion: Coulomb
                friction or backlash); warns when the sign term explains ≥ 15 % of the squared residual and
                ≥ 0.3 px.
``offset``      a constant per-keypoint bias (mean residual over every trial). Warns when it is ≥ 0.5 (in the
                unit) and explains ≥ 30 % of that keypoint's squared residual: a marker off its site or a
                camera offset.
``structure``   non-white residuals: lag-1 autocorrelation ≥ 0.9 *and* a residual RMS ≥ 1 % of the real
                keypoints' RMS motion (tracking noise is white and far smaller): the model is too simple.
=============== ==============================================================================================

Thresholds were set on the finger and the toy arm (sim2sim, clean vs each
misspecification of :mod:`~vid2sid_ros.calibration.misspecification`); the false-alarm
and detection counts are measured by ``bench/bench_diagnosis.py`` and reported in the
README. The probes are diagnostics: their rollouts are reported in
``Diagnosis.rollouts``, never charged to the calibration's budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory, align
from .nuisance import LATENCY, MEASUREMENT_PREFIX
from .objective import TrialObjective, residual_vector
from .rationale import format_value

__all__ = ["Finding", "Diagnosis", "diagnose", "THRESHOLDS"]

#: the decision thresholds of the module table
THRESHOLDS: dict[str, float] = {
    "lag_frames": 0.15, "lag_share": 0.25, "latency_note_frames": 0.2, "timing_growth_frames": 0.3,
    "frozen_drop": 0.30, "friction_share": 0.15, "friction_min": 0.3, "offset_min": 0.5, "offset_share": 0.30,
    "friction_probe_step": 0.01, "structure_rho": 0.9, "structure_motion_share": 0.01, "probe_step": 0.05,
    "readout_frames": 0.15, "readout_share": 0.25,
}


@dataclass
class Finding:
    """One thing the residuals show.

    Attributes:
        kind: ``latency`` | ``rolling_shutter`` | ``timing`` | ``frozen`` | ``friction`` | ``offset`` |
            ``structure``.
        severity: ``warning`` (the parameters are probably not the physical ones) or ``note``.
        message: one plain sentence with the numbers.
        evidence: the numbers behind it (JSON-ready).
    """

    kind: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "message": self.message, "evidence": self.evidence}


@dataclass
class Diagnosis:
    """Result of :func:`diagnose`.

    Attributes:
        findings: warnings first.
        statistics: every test's numbers, also when it stayed quiet.
        rollouts: diagnostic rollouts spent (probes).
    """

    findings: list[Finding]
    statistics: dict[str, Any]
    rollouts: int = 0

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def misspecified(self) -> bool:
        """True when any warning was raised."""
        return bool(self.warnings)

    @property
    def kinds(self) -> list[str]:
        """Kinds named by any finding (warning or note), in order."""
        return list(dict.fromkeys(f.kind for f in self.findings))

    def summary(self) -> str:
        """Plain text: the warnings (then notes), or that nothing unexplained was found."""
        if not self.findings:
            return ("Residual diagnosis: no structure the free parameters cannot explain (no lag, no release of a "
                    "frozen parameter would help, no friction-like, offset-like or strongly correlated residual).")
        head = ("Residual diagnosis — the model is probably wrong somewhere; do not read the parameters as physical "
                "before checking: " if self.warnings else "Residual diagnosis: ")
        return head + " ".join(f.message for f in self.findings)

    def headline(self) -> str:
        """One clause for a list of insights: what the findings below amount to."""
        if self.warnings:
            return (f"the model is probably wrong somewhere — do not read the parameters as physical before checking "
                    f"({len(self.warnings)} warning(s))")
        if self.findings:
            return "nothing unexplained; " + " ".join(f.message for f in self.findings)
        return "no structure the free parameters cannot explain"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``misspecified``, ``kinds``, ``summary`` (:meth:`headline`), ``text``
        (:meth:`summary`), ``findings``, ``statistics``, ``rollouts``, ``thresholds``."""
        return {"misspecified": self.misspecified, "kinds": self.kinds, "summary": self.headline(),
                "text": self.summary(),
                "findings": [f.to_dict() for f in self.findings], "statistics": self.statistics,
                "rollouts": self.rollouts, "thresholds": dict(THRESHOLDS)}


def _pairs(sims: Sequence[Trajectory], reals: Sequence[Trajectory]):
    """Aligned (real, sim) pairs with the both-valid mask, (T, K, D) arrays."""
    out = []
    for s, r in zip(sims, reals):
        ra, sa = align(r, s)
        m = ra.valid & sa.valid
        out.append((ra, sa, m))
    return out


def _velocity(traj: Trajectory) -> np.ndarray:
    """d keypoints / dt, central differences over the frame times, (T, K, D) per s."""
    t = traj.time
    if t.size < 3:
        return np.zeros_like(traj.keypoints)
    return np.gradient(traj.keypoints, t, axis=0)


def _shift_fit(pairs, rows: slice | None = None) -> tuple[float, float]:
    """(best shift s, share of the squared residual it removes) by one Gauss–Newton step on the shift."""
    num = den = ssr = 0.0
    for ra, sa, m in pairs:
        v = _velocity(sa)
        r = sa.keypoints - ra.keypoints
        sel = m.copy()
        if rows is not None:
            keep = np.zeros(sel.shape[0], bool)
            keep[rows] = True
            sel &= keep[:, None]
        sel &= np.all(np.isfinite(v), axis=2)
        rr, vv = r[sel], v[sel]
        num += float(np.sum(rr * vv))
        den += float(np.sum(vv * vv))
        ssr += float(np.sum(rr * rr))
    if den <= 0 or ssr <= 0:
        return 0.0, 0.0
    delta = num / den  # sim(t - δ) ≈ sim − δ ṡ: minimising ‖r − δ ṡ‖² gives δ = Σ r·ṡ / Σ ṡ·ṡ
    return delta, float(min(max((num * num / den) / ssr, 0.0), 1.0))


def _row_lag_fit(pairs) -> dict[str, float] | None:
    """A lag linear in the image row: ``r ≈ ṡ · (a + b · (v − v̄))`` by least squares (``v`` the twin's row, px).

    A rolling shutter reads row ``v`` ``b`` s per row later than the row above it, so the
    residual ``r = sim − real`` of a keypoint at row ``v`` is the twin's velocity times a lag that
    is linear in ``v``; ``a`` is the lag at the mean row (what a latency takes). Returns ``a``
    (``lag_at_mean_row_s``), ``b`` (``lag_per_row_s``, s/px), the rows the keypoints visit
    (``row_span_px``), the share of the squared residual the ``b`` term removes beyond ``a``
    alone (``share_removed``), and the same share when each keypoint has its own lag
    (``within_keypoint_share``: only the row changes *within* a keypoint's path count, which a
    per-keypoint delay or a per-link dynamics error cannot mimic as easily). None without motion.
    """
    rows, vels, res, kid = [], [], [], []
    for ra, sa, m in pairs:
        v = _velocity(sa)
        ok = m & np.all(np.isfinite(v), axis=2) & np.all(np.isfinite(sa.keypoints), axis=2)
        if not ok.any():
            continue
        rows.append(sa.keypoints[..., 1][ok])
        vels.append(v[ok])
        res.append((sa.keypoints - ra.keypoints)[ok])
        kid.append(np.broadcast_to(np.arange(ok.shape[1]), ok.shape)[ok])
    if not rows:
        return None
    row, vel, r, kid = np.concatenate(rows), np.concatenate(vels), np.concatenate(res), np.concatenate(kid)
    ssr = float(np.sum(r * r))
    if ssr <= 0 or float(np.sum(vel * vel)) <= 0:
        return None
    w = row - row.mean()
    y = r.ravel()

    def ssr_of(cols):
        X = np.stack([c.ravel() for c in cols], axis=1)
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        e = y - X @ coef
        return float(e @ e), coef

    s_a, _ = ssr_of([vel])
    s_ab, coef = ssr_of([vel, vel * w[:, None]])
    per_k = [vel * (kid == k)[:, None] for k in np.unique(kid)]
    s_k, _ = ssr_of(per_k)
    wk = row.copy()
    for k in np.unique(kid):
        sel = kid == k
        wk[sel] -= row[sel].mean()
    s_kb, _ = ssr_of(per_k + [vel * wk[:, None]])
    return {"lag_at_mean_row_s": float(coef[0]), "lag_per_row_s": float(coef[1]), "row_span_px": float(np.ptp(row)),
            "share_removed": max(s_a - s_ab, 0.0) / ssr, "within_keypoint_share": max(s_k - s_kb, 0.0) / ssr}


def _motion_scale(reals: Sequence[Trajectory]) -> float:
    """RMS displacement of the real keypoints about their mean position (in the unit): how far things move."""
    vals = []
    for r in reals:
        for k in range(r.num_keypoints):
            x = r.keypoints[r.valid[:, k], k]
            if x.shape[0] > 2:
                vals.append(float(np.mean(np.sum((x - x.mean(axis=0)) ** 2, axis=1))))
    return float(math.sqrt(np.mean(vals))) if vals else 0.0


def _unmodelled_friction_fields(model: Any, params: ParameterSet) -> list[str]:
    """Friction fields of a MuJoCo model that no parameter target writes (tendons, then DoFs)."""
    if model is None:
        return []
    targeted = " ".join(s.target for s in params)
    out = []
    if getattr(model, "ntendon", 0) > 0 and hasattr(model, "tendon_frictionloss") and "tendon_frictionloss" not in targeted:
        out.append("tendon_frictionloss")
    if getattr(model, "nv", 0) > 0 and hasattr(model, "dof_frictionloss") and "dof_frictionloss" not in targeted:
        out.append("dof_frictionloss")
    return out


def _free_columns(objective: TrialObjective, params: ParameterSet, full: Mapping[str, float], r0: np.ndarray):
    """(forward-difference residual columns of the free parameters, rollouts spent)."""
    h = THRESHOLDS["probe_step"]
    cols, spent = [], 0
    for s in params.free:
        u = s.to_unit(full[s.name])
        step = h if u + h <= 1.0 else -h
        pev, _ = objective.evaluate({**full, s.name: s.from_unit(u + step)})
        spent += pev.rollouts
        if not pev.failed:
            cols.append((residual_vector(pev.sim, objective.real) - r0) / step)
    return cols, spent


def _release_drop(r0: np.ndarray, col: np.ndarray, free_cols: Sequence[np.ndarray]) -> tuple[float, float | None]:
    """(share of the squared residual a joint step with ``col`` released removes, the step along ``col``)."""
    good = np.isfinite(r0) & np.isfinite(col)
    for c in free_cols:
        good &= np.isfinite(c)
    r, q = r0[good], col[good]
    total = float(np.sum(r0[good] ** 2))
    if free_cols:
        F = np.stack([c[good] for c in free_cols], axis=1)
        q = q - F @ np.linalg.lstsq(F, q, rcond=None)[0]
        r = r - F @ np.linalg.lstsq(F, r, rcond=None)[0]
    qq = float(q @ q)
    if qq <= 0 or total <= 0:
        return 0.0, None
    return float((q @ r) ** 2 / qq) / total, -float(q @ r) / qq


def diagnose(objective: TrialObjective, values: Mapping[str, float], *,
             parameters: ParameterSet | None = None, probe: bool = True) -> Diagnosis:
    """Test the residuals at ``values`` for unexplained structure (module table).

    Args:
        objective: the training objective of the calibration (twin, excitations, real trajectories).
        values: the identified values (full or partial, SI).
        parameters: the spec (default ``objective.parameters``): which parameters are free or frozen.
        probe: run the frozen-parameter release probes (costs ``(free + frozen physics) × trials``
            diagnostic rollouts); False skips that test.

    Returns:
        Diagnosis. A point that cannot be simulated gives one ``structure`` warning saying so.
    """
    params = parameters if parameters is not None else objective.parameters
    full = params.complete(dict(values))
    ev, _ = objective.evaluate(full)
    spent = ev.rollouts
    if ev.failed:
        return Diagnosis([Finding("structure", "warning", f"The identified parameters cannot be simulated "
                                                          f"({ev.message}); nothing else can be diagnosed.")], {}, spent)
    reals = objective.real
    pairs = _pairs(ev.sim, reals)
    rate = float(np.median([1.0 / np.median(np.diff(r.time)) for r in reals if r.num_frames > 2] or [30.0]))
    unit = getattr(objective, "unit", "px")
    findings: list[Finding] = []
    stats: dict[str, Any] = {"unit": unit, "frame_rate_hz": rate}

    r_all = residual_vector(ev.sim, reals)
    r_all = r_all[np.isfinite(r_all)]
    ssr = float(np.sum(r_all ** 2))
    stats["residual_rms"] = float(math.sqrt(ssr / max(r_all.size, 1)))

    # -- lag / latency --------------------------------------------------------------------
    delta, share = _shift_fit(pairs)
    stats["lag"] = {"shift_s": delta, "shift_frames": delta * rate, "share_removed": share}
    lat = next((s for s in params.free if s.target == MEASUREMENT_PREFIX + "latency"), None)
    if abs(delta) * rate >= THRESHOLDS["lag_frames"] and share >= THRESHOLDS["lag_share"]:
        direction = "later than" if delta > 0 else "earlier than"
        # never advise freeing what is free already
        cause = ("a camera latency (free the 'latency' nuisance)" if lat is None else
                 f"a camera latency beyond what the free '{lat.name}' nuisance reached (bounds {1000 * lat.lower:.3g} "
                 f"to {1000 * lat.upper:.3g} ms: widen them if it sits at one)")
        findings.append(Finding("latency", "warning",
                                f"The robot moves {abs(delta) * 1000:.1f} ms ({abs(delta) * rate:.2f} frame) {direction} "
                                f"the twin in every trial: shifting the twin by that much would remove "
                                f"{100 * share:.0f} % of the squared residual — {cause} or a delay in the drive.",
                                {"shift_s": delta, "share_removed": share}))
    if lat is not None:
        tau = float(full[lat.name])
        stats["latency_identified_s"] = tau
        if abs(tau) * rate >= THRESHOLDS["latency_note_frames"]:
            findings.append(Finding("latency", "note",
                                    f"The video lags the commands by {tau * 1000:.1f} ms ({tau * rate:.2f} frame); "
                                    f"identified as the '{LATENCY}' nuisance and kept out of the physics.",
                                    {"latency_s": tau, "latency_frames": tau * rate}))

    # -- rolling shutter: a lag that grows with the image row ---------------------------------------
    rs = _row_lag_fit(pairs) if unit == "px" else None
    if rs is not None:
        cam = getattr(objective.twin, "camera", None)
        height = int(getattr(cam, "height", 0) or 0) or int(math.ceil(rs["row_span_px"])) + 1
        rs["readout_s"] = -rs["lag_per_row_s"] * (height - 1)  # row v is read (H-1-v)/(H-1)·readout early
        rs["image_height_px"] = height
        stats["rolling_shutter"] = {**rs, "readout_frames": rs["readout_s"] * rate}
        if abs(rs["readout_s"]) * rate >= THRESHOLDS["readout_frames"] and rs["share_removed"] >= THRESHOLDS["readout_share"]:
            order = "top to bottom" if rs["readout_s"] > 0 else "bottom to top"
            findings.append(Finding("rolling_shutter", "warning",
                                    f"The robot's lag behind the twin grows with the image row: rows are read "
                                    f"{order} over about {abs(rs['readout_s']) * 1000:.1f} ms "
                                    f"({abs(rs['readout_s']) * rate:.2f} frame) per image, and a row-dependent shift "
                                    f"would remove {100 * rs['share_removed']:.0f} % of the squared residual "
                                    f"({100 * rs['within_keypoint_share']:.0f} % beyond one lag per keypoint) — a "
                                    f"rolling-shutter camera (use a global shutter, or model each keypoint's read "
                                    f"time).", {"readout_s": rs["readout_s"], "share_removed": rs["share_removed"],
                                                "within_keypoint_share": rs["within_keypoint_share"]}))

    # -- timing drift (dropped frames) -------------------------------------------------------
    T = min(p[0].num_frames for p in pairs)
    if T >= 12:
        d_first, _ = _shift_fit(pairs, slice(0, T // 3))
        d_last, _ = _shift_fit(pairs, slice(T - T // 3, T))
        growth = (d_last - d_first) * rate
        stats["timing"] = {"shift_first_third_frames": d_first * rate, "shift_last_third_frames": d_last * rate}
        if abs(growth) >= THRESHOLDS["timing_growth_frames"]:
            findings.append(Finding("timing", "warning",
                                    f"The lag between robot and twin changes within the trials, from "
                                    f"{d_first * rate:+.2f} frame in the first third to {d_last * rate:+.2f} frame in "
                                    f"the last: frames were dropped or the frame rate is not the nominal "
                                    f"{rate:.3g} Hz (check the video's timestamps).",
                                    {"shift_first_frames": d_first * rate, "shift_last_frames": d_last * rate}))

    # -- constant per-keypoint bias ------------------------------------------------------------
    names = pairs[0][0].names
    bias_stats = {}
    for k, name in enumerate(names):
        rs = np.concatenate([(sa.keypoints[:, k] - ra.keypoints[:, k])[m[:, k]] for ra, sa, m in pairs])
        if rs.shape[0] < 5:
            continue
        mean = rs.mean(axis=0)
        ms = float(np.mean(np.sum(rs ** 2, axis=1)))
        b_share = float(np.sum(mean ** 2) / ms) if ms > 0 else 0.0
        bias_stats[name] = {"mean": mean.tolist(), "share": b_share}
        if float(np.linalg.norm(mean)) >= THRESHOLDS["offset_min"] and b_share >= THRESHOLDS["offset_share"]:
            axes = "xyz"
            parts = ", ".join(f"{axes[i]} {-mean[i]:+.2f}" for i in range(mean.size))
            # never advise freeing what is free already
            todo = [what for what, pre in (("the marker offsets", f"{MEASUREMENT_PREFIX}offset[{name}]"),
                                           ("the camera pose", "camera.")) if not any(
                s.target.startswith(pre) for s in params.free)]
            fix = f"free {' or '.join(todo)}" if todo else "the marker offsets and the camera pose are free already"
            findings.append(Finding("offset", "warning",
                                    f"Keypoint '{name}' of the robot sits at a constant offset from the twin's "
                                    f"({parts} {unit}, {100 * b_share:.0f} % of its squared residual): a marker off "
                                    f"its model site or a camera pose/offset error ({fix}).",
                                    {"keypoint": name, "offset": (-mean).tolist(), "share": b_share}))
    stats["offset"] = bias_stats

    # -- friction-like: residual along the motion vs sign of motion ------------------------------
    rows_abs, rows_sign, rows_r = [], [], []
    for ra, sa, m in pairs:
        v = _velocity(sa)
        speed = np.linalg.norm(v, axis=2)
        moving = speed > 0.05 * (np.nanmax(speed) if np.isfinite(speed).any() else 0.0)
        sel = m & moving & np.isfinite(speed)
        if not sel.any():
            continue
        vhat = v[sel] / speed[sel][:, None]
        r_par = np.sum((sa.keypoints[sel] - ra.keypoints[sel]) * vhat, axis=1)
        rows_abs.append(speed[sel])
        rows_sign.append(np.ones(sel.sum()))
        rows_r.append(r_par)
    if rows_r:
        y = np.concatenate(rows_r)
        X = np.stack([np.concatenate(rows_abs), np.concatenate(rows_sign)], axis=1)
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        # the share the constant (against-the-motion) term explains beyond the speed term
        resid_speed = y - X[:, :1] @ np.linalg.lstsq(X[:, :1], y, rcond=None)[0]
        resid_both = y - X @ coef
        f_share = float((np.sum(resid_speed ** 2) - np.sum(resid_both ** 2)) / ssr) if ssr > 0 else 0.0
        stats["friction"] = {"speed_coefficient_s": float(coef[0]), "constant_along_motion": float(coef[1]),
                             "share": f_share}
        if f_share >= THRESHOLDS["friction_share"] and abs(coef[1]) >= THRESHOLDS["friction_min"]:
            where = "behind" if coef[1] > 0 else "ahead of"
            findings.append(Finding("friction", "warning",
                                    f"While moving, the robot stays a constant {abs(coef[1]):.2f} {unit} {where} the "
                                    f"twin along the direction of motion, whatever the speed ({100 * f_share:.0f} % of "
                                    f"the squared residual): a force against the motion the model lacks — Coulomb "
                                    f"friction or backlash in the drive.",
                                    {"constant_along_motion": float(coef[1]), "share": f_share}))

    # -- non-white residuals -----------------------------------------------------------------
    rho_num = rho_den = 0.0
    for ra, sa, m in pairs:
        r = sa.keypoints - ra.keypoints
        ok = m[1:] & m[:-1]
        a, b = r[1:][ok], r[:-1][ok]
        a, b = a - a.mean(axis=0), b - b.mean(axis=0)
        rho_num += float(np.sum(a * b))
        rho_den += float(np.sqrt(np.sum(a * a) * np.sum(b * b)))
    rho = rho_num / rho_den if rho_den > 0 else 0.0
    motion = _motion_scale(reals)
    ratio = (stats["residual_rms"] / motion) if motion > 0 else math.inf
    stats["whiteness"] = {"lag1_autocorrelation": rho, "motion_rms": motion, "rms_over_motion": ratio}

    # -- frozen-parameter release probe -------------------------------------------------------------
    frozen = [s for s in params if s.frozen and s.kind == "physics"]
    free_cols: list[np.ndarray] = []
    if probe and frozen:
        h = THRESHOLDS["probe_step"]
        r0 = residual_vector(ev.sim, reals)
        ok = np.isfinite(r0)

        def column(spec, base):
            u = spec.to_unit(base[spec.name])
            step = h if u + h <= 1.0 else -h
            val = spec.from_unit(u + step)
            pev, _ = objective.evaluate({**base, spec.name: val})
            if pev.failed:
                return None, step, pev.rollouts
            return (residual_vector(pev.sim, reals) - r0) / step, step, pev.rollouts

        free_cols = []
        for s in params.free:
            col, _, n = column(s, full)
            spent += n
            if col is not None:
                free_cols.append(col)
        probes = {}
        for s in frozen:
            unfrozen = dict(full)
            col, step, n = column(s, unfrozen)
            spent += n
            if col is None:
                continue
            good = ok & np.isfinite(col) & np.all([np.isfinite(c) for c in free_cols], axis=0) if free_cols else \
                ok & np.isfinite(col)
            r, q = r0[good], col[good]
            if free_cols:
                F = np.stack([c[good] for c in free_cols], axis=1)
                coefs, *_ = np.linalg.lstsq(F, q, rcond=None)
                q = q - F @ coefs  # what only this parameter can do
                coefs_r, *_ = np.linalg.lstsq(F, r, rcond=None)
                r = r - F @ coefs_r  # what the free parameters can still fix (≈ 0 at an optimum)
            qq = float(q @ q)
            if qq <= 0:
                continue
            du = -float(q @ r) / qq
            drop = float((q @ r) ** 2 / qq) / float(np.sum(r0[good] ** 2)) if np.sum(r0[good] ** 2) > 0 else 0.0
            u_now = s.to_unit(full[s.name])
            target = s.from_unit(min(max(u_now + du, 0.0), 1.0))
            probes[s.name] = {"predicted_drop": drop, "points_to": target, "unit": s.unit, "normalised_move": du}
            if drop >= THRESHOLDS["frozen_drop"]:
                findings.append(Finding("frozen", "warning",
                                        f"{s.name} (frozen at {format_value(full[s.name], s.unit)}) is probably wrong: "
                                        f"freeing it would lower the training error by about {100 * drop:.0f} % "
                                        f"(the residual points to about {format_value(target, s.unit)}).",
                                        {"parameter": s.name, "predicted_drop": drop, "points_to": target}))
        stats["release_probe"] = probes

    # -- unmodelled friction probe (MuJoCo twins) ------------------------------------------------
    model = getattr(objective.twin, "model", None)
    fields = _unmodelled_friction_fields(model, params) if probe else []
    if fields:
        r0 = residual_vector(ev.sim, reals)
        h = THRESHOLDS["friction_probe_step"]
        cols, n = [], 0
        cache = getattr(objective, "_cache", None)
        for fld in fields:
            arr = getattr(model, fld)
            old = np.array(arr, copy=True)
            try:
                if cache is not None:
                    cache.clear()  # the rollout cache keys on parameter values; this probe changes the model
                arr[:] = old + h
                pev, _ = objective.evaluate(full)
            finally:
                arr[:] = old
                if cache is not None:
                    cache.clear()
            spent += pev.rollouts
            if not pev.failed:
                cols.append(((residual_vector(pev.sim, reals) - r0) / h, fld))
        free_cols = free_cols if probe and frozen else _free_columns(objective, params, full, r0)
        if isinstance(free_cols, tuple):
            free_cols, extra = free_cols
            spent += extra
        fr_probes = {}
        for col, fld in cols:
            drop, du = _release_drop(r0, col, free_cols)
            fr_probes[fld] = {"predicted_drop": drop, "points_to_added": du * h if du is not None else None}
        stats["friction_probe"] = fr_probes
        if fr_probes:
            fld, best = max(fr_probes.items(), key=lambda kv: kv[1]["predicted_drop"])
            frozen_best = max((p["predicted_drop"] for p in stats.get("release_probe", {}).values()), default=0.0)
            if best["predicted_drop"] >= THRESHOLDS["frozen_drop"] and best["predicted_drop"] > frozen_best:
                findings = [f for f in findings if not (f.kind == "frozen" and
                                                        f.evidence["predicted_drop"] < best["predicted_drop"])]
                where = "the tendons" if fld.startswith("tendon") else "the joints"
                findings.append(Finding("friction", "warning",
                                        f"The model probably lacks Coulomb friction in {where}: adding it "
                                        f"({fld}, which no parameter sets) would lower the training error by about "
                                        f"{100 * best['predicted_drop']:.0f} %, more than freeing any frozen "
                                        f"parameter ({100 * frozen_best:.0f} %).",
                                        {"field": fld, "predicted_drop": best["predicted_drop"],
                                         "frozen_best_drop": frozen_best}))

    explained = {f.kind for f in findings if f.severity == "warning"}
    if (rho >= THRESHOLDS["structure_rho"] and ratio >= THRESHOLDS["structure_motion_share"]
            and not explained):
        findings.append(Finding("structure", "warning",
                                f"The residuals are strongly correlated in time (lag-1 autocorrelation {rho:.2f}) and "
                                f"large ({stats['residual_rms']:.2f} {unit} RMS, {100 * ratio:.1f} % of the "
                                f"{motion:.3g} {unit} RMS motion): the model is too simple for this data, or the "
                                f"parameters are not at the optimum.",
                                {"lag1_autocorrelation": rho, "rms_over_motion": ratio}))
    findings.sort(key=lambda f: f.severity != "warning")
    return Diagnosis(findings, stats, spent)
