"""The offline reasoner: diagnose from dynamic signatures, refine by least squares, explain each move.

A deterministic, network-free proposer that works like an engineer with a stopwatch
and a ruler, for any rig: it knows nothing about fingers or tentacles, only the
parameter specs (name, unit, meaning, bounds, kind), the measured signatures of the
real and simulated trajectories (:mod:`~vid2sid_ros.calibration.proposers.signatures`: dominant
frequency, decay rate, damping ratio, amplitudes, phase lag, steady-state offset, onset
delay, dead-band, per trial and keypoint) and finite-difference sensitivities measured
on the twin.

Per iteration:

1. **Sensitivities** (first iteration, and again when the model stops predicting well):
   one forward finite-difference rollout set per free parameter (step ``fd_step`` in
   normalised units, toward the interior), giving both the Jacobian ``J`` of the
   trajectory residuals (px — or the measurement's unit — per normalised unit) and ``J_s`` of the signature
   discrepancies. ``J_s`` *is* the learned signature-to-parameter map: which parameter
   moves the frequency, which the decay, which the offset — no rig-specific rules.
2. **Diagnosis** (while the signatures disagree by more than ``signature_tolerance``):
   a bounded, damped Gauss–Newton step on the signature discrepancies,
   ``min ‖d + J_s δ‖² + μ‖δ‖²`` over the trust region ``|δ|∞ ≤ Δ`` inside the bounds
   (``scipy.optimize.lsq_linear``). Signatures vary smoothly with the parameters even
   when trajectories are out of phase, so this step is the global one.
3. **Refinement** (once signatures agree, or when the diagnosis step fails): a
   Levenberg–Marquardt trust-region step on the trajectory residuals,
   ``min ‖r + J δ‖² + λ‖D δ‖²`` (Moré, "The Levenberg–Marquardt algorithm:
   implementation and theory", 1978; ``D² = diag(JᵀJ)``), with the same box.
4. Every evaluated step updates ``J`` and ``J_s`` with Broyden's rank-one secant
   formula (Broyden 1965), so later steps cost one evaluation each. A refinement step
   is accepted when it lowers the sum of squared residuals ``‖r‖²``: the objective the
   step minimises and the convergence test reads (one objective from the first step to
   the stop; the training MAE is reported beside it); a diagnosis step when it lowers the
   MAE, or brings the signatures closer while the MAE stays within
   ``diagnosis_slack`` of the best seen (the loop keeps the best point anyway).
   Accepted steps grow the trust region, rejected ones shrink it; two rejected
   diagnosis steps end the diagnosis phase, and so does a diagnosis step smaller than
   ``diagnosis_min_step`` (the signature model has nothing left to say: under sensor
   noise the signatures' floor can stay above ``signature_tolerance``, and tiny steps
   accepted for "closer signatures" would otherwise stall the run in the diagnosis); repeated rejections (or a long way
   travelled since), or ``refresh_distance`` travelled at all, trigger a re-measurement of the sensitivities,
   and so do two accepted refinement steps in a row that each remove less than half of ``‖r‖²`` while the
   linear model still promises a tenth of it (secant updates converging slowly).
5. **Convergence**: when a damped step's predicted gain is one the test would pass (its
   relative offset at most ``converged_offset``, or below the simulation's resolution:
   :meth:`Reasoner._promises_little`), the sensitivities are re-measured at the point if they were
   carried there by secant updates, and :func:`first_order_test` decides: the Bates–Watts
   relative offset of the bounded Gauss–Newton step against the residual noise (or a
   predicted decrease below the simulation's resolution). Passed: the reasoner holds its
   parameters and says ``converged``. Failed: it goes on (a damped step on the fresh
   sensitivities, else the undamped Gauss–Newton step halved on each rejection, else
   sensitivities re-measured with half the finite-difference step) and reports ``stalled``
   only when no move is left; a test the budget cannot pay for is no convergence. After a
   failed test, sensitivities are measured with a step of twice the last accepted step
   (between ``fine_fd_step`` and ``fd_step``: :meth:`Reasoner._fd_step_at`).
6. **Latency**: a free latency nuisance costs no rollout, so it is searched over its whole
   range (:meth:`Reasoner._scan_latency`, on the training RMS error: the same least-squares
   objective) whenever the sensitivities are measured and at every refinement iteration,
   before the local steps.

Each accepted move gets a rationale naming the signature it corrects and the
parameter it moves, with units, e.g. "the twin's dominant frequency of tip in
chirp_0.3-3Hz is 2.1 Hz against 1.6 Hz for the robot; lowering pip_stiffness from
0.30 to 0.19 N·m/rad (measured: +10 % of its range raises that frequency by 6 %)",
and a confidence from how well the local model predicted the improvement and how
well conditioned the sensitivities are.

State: the reasoner keeps its memory (``J``, ``J_s``, trust radius, damping) only in
``Proposal.state``; the loop stores it with each iteration and hands it back through
the history, so the reasoner is a deterministic function of (context, seed) and an
interrupted run resumes exactly.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ...core.parameters import ParameterSet
from ...core.trajectory import display_unit, format_error
from ..nuisance import LATENCY, MEASUREMENT_PREFIX
from ..objective import measurement_unit, resolution_floor, residual_vector
from .proposer import BudgetExhausted, Evaluation, Proposal, ProposalContext
from .rationale import lead_with_moves
from .signatures import SIGNATURES, SignatureDiscrepancy, compare_signatures, measure_all

__all__ = ["Reasoner", "first_order_test", "FirstOrderTest"]


def _unit_str(unit: str) -> str:
    return "" if unit in ("1", "") else unit.replace("*", "·")


def _with_unit(x: float, unit: str) -> str:
    u = _unit_str(unit)
    return f"{_fmt(x)} {u}" if u else _fmt(x)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


class Reasoner:
    """Signature-diagnosing, least-squares-refining, explaining proposer (module docstring).

    Args:
        fd_step: finite-difference step in normalised units.
        signature_tolerance: RMS signature discrepancy (dimensionless; ~ relative) below
            which the reasoner refines on trajectories rather than on signatures.
        initial_radius: starting trust radius (normalised units, ∞-norm).
        max_radius: largest trust radius.
        ridge: Tikhonov weight on steps (normalised units) for ill-conditioned directions.
        refresh_after: consecutive rejected steps before re-measuring sensitivities.
        refresh_travel: after this accepted travel (normalised ∞-norm, summed) since the
            last measurement, a single rejected step triggers a re-measurement, and so does a
            convergence call (once per iteration).
        refresh_distance: after this accepted travel since the last measurement the
            sensitivities are re-measured at the start of the next iteration even when every
            step was accepted (Broyden's secant updates correct them only along the steps taken).
        diagnosis_slack: a diagnosis step that brings the signatures closer is accepted
            while the training MAE stays below this multiple of the best seen.
        converged_fraction: after a failed convergence test, the damped step on the fresh
            sensitivities is tried only when it is predicted to lower the squared residual by at
            least this fraction (else the Gauss–Newton step is); the test itself is called when a
            step's gain is one it would pass (:meth:`_promises_little`).
        converged_offset: the test's threshold on the Bates–Watts relative offset of the
            Gauss–Newton step (the step's length in standard errors, RMS over the parameters).
        min_fd_step: smallest finite-difference step (normalised units): when every length
            of the Gauss–Newton step is rejected, the sensitivities are re-measured with half
            the step, down to this; below it the reasoner reports a stall (not converged).
        fine_fd_step: smallest finite-difference step of a measurement after a failed convergence test
            (normalised units): there the step is twice the last accepted refinement step, between this
            and ``fd_step`` (:meth:`_fd_step_at`).
        diagnosis_min_step: a diagnosis step whose largest component is below this
            (normalised units, ∞-norm; 0.005 = 0.5 % of a range) ends the diagnosis phase
            without a rollout: the reasoner refines on the trajectories from there.
        evaluations_per_iteration: fixed number of step evaluations per iteration
            (default: the remaining budget spread over the remaining iterations).
    """

    name = "reasoner"
    wants_video = False

    def __init__(self, *, fd_step: float = 0.05, signature_tolerance: float = 0.05, initial_radius: float = 0.25,
                 max_radius: float = 0.5, ridge: float = 1e-3, refresh_after: int = 2, refresh_travel: float = 0.5,
                 refresh_distance: float = 2.0,
                 diagnosis_slack: float = 1.5,
                 converged_fraction: float = 1e-3, evaluations_per_iteration: int | None = None,
                 diagnosis_min_step: float = 0.005, converged_offset: float = 0.25,
                 min_fd_step: float = 1e-4, fine_fd_step: float = 0.005) -> None:
        if not 0 < fd_step < 0.5:
            raise ValueError(f"Reasoner: fd_step must be in (0, 0.5), got {fd_step}")
        if not 0 <= diagnosis_min_step < 0.5:
            raise ValueError(f"Reasoner: diagnosis_min_step must be in [0, 0.5), got {diagnosis_min_step}")
        self.diagnosis_min_step = diagnosis_min_step
        self.fd_step = fd_step
        self._unit = "px"  # of the measurements of the current context (propose sets it)
        self.signature_tolerance = signature_tolerance
        self.initial_radius = initial_radius
        self.max_radius = max_radius
        self.ridge = ridge
        self.refresh_after = refresh_after
        self.refresh_travel = refresh_travel
        if not refresh_distance > 0:
            raise ValueError(f"Reasoner: refresh_distance must be > 0 (normalised units), got {refresh_distance}")
        self.refresh_distance = float(refresh_distance)
        self.diagnosis_slack = diagnosis_slack
        self.evaluations_per_iteration = evaluations_per_iteration
        self.converged_fraction = converged_fraction
        if not 0 < converged_offset < 1:
            raise ValueError(f"Reasoner: converged_offset must be in (0, 1), got {converged_offset}")
        if not 0 < min_fd_step <= fd_step:
            raise ValueError(f"Reasoner: min_fd_step must be in (0, fd_step], got {min_fd_step}")
        self.converged_offset = float(converged_offset)
        self.min_fd_step = float(min_fd_step)
        if not min_fd_step <= fine_fd_step <= fd_step:
            raise ValueError(f"Reasoner: fine_fd_step must be in [min_fd_step, fd_step], got {fine_fd_step}")
        self.fine_fd_step = float(fine_fd_step)

    # -- state ------------------------------------------------------------------------
    def _load_state(self, ctx: ProposalContext) -> dict[str, Any] | None:
        for rec in reversed(ctx.history):
            st = rec.extra.get("proposer_state")
            if isinstance(st, Mapping) and st.get("kind") == "reasoner":
                return dict(st)
        return None

    # -- main -------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Proposal:
        """One diagnosis/refinement iteration (see module docstring).

        The iteration: restore the memory (:meth:`_restore`), search the latency and measure the
        sensitivities when due (:meth:`_prepare`), then up to a quota of step evaluations, each
        planned by :meth:`_plan_step`, replaced by the convergence call (:meth:`_convergence_call`)
        when it promises little, and judged by :meth:`_judge`.

        Raises:
            RuntimeError: without ``context.evaluate`` (the reasoner measures sensitivities).
        """
        if ctx.evaluate is None:
            raise RuntimeError("the reasoner needs context.evaluate to measure sensitivities")
        self._unit = measurement_unit(ctx.real)  # px, m, rad, or sigma (mixed) in the rationale
        params = ctx.parameters
        names = [s.name for s in params.free]
        cost = max(len(ctx.real), 1)
        from ..loop import UNLIMITED_ROLLOUTS

        unlimited = ctx.rollouts_remaining >= UNLIMITED_ROLLOUTS
        excitations = self._excitations(ctx)
        anchor = _Point.of(ctx.current_eval, ctx, excitations, params)
        if anchor.failed:
            raise RuntimeError(f"the current parameters cannot be simulated ({ctx.current_eval.message})")
        s = _Search(anchor, evals_left=10 ** 6 if unlimited else ctx.rollouts_remaining // cost, cost=cost,
                    fd_step=self.fd_step, radius=self.initial_radius)
        # a probe of a measurement nuisance (latency, marker offset) re-uses the anchor's rollouts: free
        s.n_paid = sum(1 for p in params.free if not p.target.startswith(MEASUREMENT_PREFIX))
        self._restore(s, self._load_state(ctx), names)
        early = self._prepare(ctx, s, excitations)
        if early is not None:
            return early

        quota = self.evaluations_per_iteration
        if quota is None:
            quota = max(1, math.ceil(s.evals_left / max(ctx.iterations_remaining, 1))) if s.evals_left > 0 else 0
        quota = min(quota, s.evals_left)
        # if probing found a better point, move the linearisation there (secant-corrected)
        if s.best is not s.anchor:
            s.J, s.Js = self._broyden(s.J, s.Js, s.anchor, s.best, s.sig_keys)
            s.travel += float(np.max(np.abs(s.best.u - s.anchor.u)))
            s.anchor = s.best
        if s.converged and quota > 0:
            s.lines.append(f"Converged earlier: the least-squares model predicts no useful improvement of the "
                           f"{format_error(s.anchor.error, self._unit)} training MAE; holding the parameters and "
                           "saving the rollouts.")
            quota = 0
        steps = 0  # evaluated steps; a re-measurement or a convergence test takes no slot of the quota
        while steps < quota or (steps == quota and s.fo.fresh_at(s.anchor.u) and s.fo.J is not s.tested):
            mode, step, predicted, rows = self._plan_step(params, s)
            gauss_newton = False
            if (step is None or np.max(np.abs(step)) < 1e-6 or steps >= quota
                    or (s.want_test is not None and s.fo.J is s.want_test)
                    or (mode == "refinement" and self._promises_little(ctx, s.anchor, predicted))):
                # the damped step promises little: the convergence test, on sensitivities measured here
                action = self._convergence_call(ctx, s, excitations)
                if action == "continue":
                    continue
                if action == "break":
                    break
                mode, step, predicted = action
                gauss_newton = True  # a rejection of the step below counts as a backtrack
            if steps >= quota:
                break  # the quota is spent: the test above was the last thing this proposal could do
            u_new = np.clip(s.anchor.u + step, 0.0, 1.0)
            values = params.from_unit_vector(u_new, ctx.current)
            steps += 1
            try:
                ev = ctx.evaluate({k: values[k] for k in names})
            except BudgetExhausted:
                break
            s.evals_left -= 1
            cand = _Point.of(ev, ctx, excitations, params)
            s.tried.append(cand)
            self._judge(params, s, cand, mode, predicted, rows, gauss_newton)
            # secant steps making slow progress: fresh sensitivities, when the budget also leaves a re-measurement
            # for the convergence test and a step after it
            if (s.slow >= 2 and steps < quota and s.evals_left >= 2 * s.n_paid + 2 and not s.fo.fresh_at(s.anchor.u)
                    and self._remeasure_for_test(ctx, s, excitations, for_test=False) == "break"):
                break
        # propose where the reasoning stands (the loop keeps the best point seen separately)
        return self._finish(ctx, s.anchor, s.anchor, s.tried, s.lines, s.diagnosis, (s.J, s.Js), s.radius, s.lam,
                            s.failures, s.sig_keys, s.phase, s.converged, s.travel, s.diag_failures, s.fo,
                            s.slow, s.last_step)

    def _restore(self, s: "_Search", state: Mapping[str, Any] | None, names: Sequence[str]) -> None:
        """The memory of the last proposal (``Proposal.state``) into ``s``, when it is of this problem."""
        n = len(names)
        if state is None or state.get("m") != s.anchor.r.size or state.get("names") != names:
            return
        s.J = np.asarray(state["J"], float)
        s.Js = np.asarray(state["Js"], float) if state.get("Js") else np.zeros((0, n))
        s.sig_keys = [list(k) for k in state.get("sig_keys", [])]
        s.radius = float(state.get("radius", s.radius))
        s.lam = float(state.get("lambda", s.lam))
        s.failures = int(state.get("failures", 0))
        s.travel = float(state.get("travel", 0.0))
        s.diag_failures = int(state.get("diag_failures", 0))
        s.slow = int(state.get("slow", 0))
        s.last_step = math.inf if state.get("last_step") is None else float(state["last_step"])
        s.phase = str(state.get("phase", s.phase))
        s.converged = bool(state.get("converged", False)) and np.array_equal(
            np.asarray(state.get("u_anchor", []), float), s.anchor.u)
        s.fo = _FirstOrder.restore(state, self.fd_step, s.J, s.anchor.u)
        u_prev = np.asarray(state.get("u_anchor", s.anchor.u), float)
        if not np.array_equal(u_prev, s.anchor.u):
            s.lines.append("The current parameters were set by another proposer; my sensitivities were measured "
                           "elsewhere and are used as an approximation.")

    def _prepare(self, ctx: ProposalContext, s: "_Search", excitations: Sequence[Any]) -> Proposal | None:
        """The latency search and the sensitivities, when due, before the iteration's steps.

        Returns:
            the proposal when nothing else can be done (sensitivities the budget cannot pay for), else None.
        """
        # secant updates correct J only along the steps taken: far enough from where it was measured it is
        # re-measured even while every step is accepted (a valley crept along in tiny steps)
        stale = (s.failures >= self.refresh_after or (s.travel >= self.refresh_travel and s.failures >= 1)
                 or s.travel >= self.refresh_distance)
        need_fd = s.J is None or ((stale or s.fo.pending) and not s.converged)
        if not s.converged and (s.phase == "refine" or need_fd):
            # the latency costs no rollout: searched over its whole range whenever the sensitivities are measured and
            # at every refinement iteration, so that a local optimum near 0 (a shift by a whole period of the motion
            # looks as good) never holds it. Not at every diagnosis step: while the signatures still disagree, the
            # shift that best hides wrong physics drifts (to a bound) and the diagnosis steps follow it
            # while the physics is still off (diagnosis phase), a shift is taken only when it explains much of the
            # misfit (a fifth of the training RMS error): one that explains little is as likely to hide wrong physics
            moved, paid = self._scan_latency(ctx, s.anchor, excitations, s.lines,
                                             min_gain=0.0 if s.phase == "refine" else 0.2)
            s.evals_left -= math.ceil(paid / s.cost)
            if moved is not None:
                if s.J is not None:
                    s.J, s.Js = self._broyden(s.J, s.Js, s.anchor, moved, s.sig_keys)
                    s.travel += float(np.max(np.abs(moved.u - s.anchor.u)))
                s.tried.append(moved)
                s.anchor = s.best = moved
        if need_fd and s.evals_left < s.n_paid + (1 if s.J is None else 2):
            if s.J is None:
                return self._probe_only(ctx, s.anchor, s.evals_left, s.lines)
            need_fd = False
        if not need_fd:
            return None
        if s.J is not None:
            if s.failures:
                s.lines.append(f"My sensitivities were measured {s.travel:.2f} (normalised) away and the last "
                               f"{s.failures} step(s) did not improve the fit: re-measuring them at the current point.")
            else:
                s.lines.append(f"My sensitivities were measured {s.travel:.2f} (normalised) away and only updated "
                               "by secants along the steps since: re-measuring them at the current point.")
        s.travel = 0.0
        try:
            h = self._fd_step_at(s)
            J, Js, sig_keys, probes = self._finite_differences(ctx, s.anchor, excitations, h)
        except BudgetExhausted:
            return self._finish(ctx, s.anchor, s.best, s.tried, s.lines, s.diagnosis, None, s.radius, s.lam,
                                s.failures, s.sig_keys)
        s.J, s.Js, s.sig_keys = J, Js, sig_keys
        s.fo.measured(J, s.anchor.u, h)
        s.slow = 0
        s.evals_left -= math.ceil(sum(p.evaluation.rollouts for p in probes) / s.cost)
        s.failures = 0
        s.tried.extend(probes)
        s.lines.append(self._sensitivity_summary(ctx.parameters, s.anchor, Js, sig_keys, J))
        better = [p for p in probes if not p.failed and p.ssr < s.best.ssr]
        if better:
            s.best = min(better, key=lambda p: p.ssr)
        s.radius = max(s.radius, self.initial_radius)
        return None

    def _plan_step(self, params: ParameterSet, s: "_Search"):
        """(mode, δ, predicted SSR decrease, signature rows) of the next trial step from the anchor.

        A diagnosis step below ``diagnosis_min_step`` ends the diagnosis phase: the refinement step is planned instead.
        """
        sig_table = s.anchor.sig_table(s.sig_keys)
        mode, step, predicted, rows = self._step(params, s.anchor, s.J, s.Js, s.sig_keys, sig_table, s.radius, s.lam,
                                                 allow_diagnosis=(s.phase == "diagnose"))
        if mode == "diagnosis" and step is not None and np.max(np.abs(step)) < self.diagnosis_min_step:
            s.lines.append(f"The signature model asks for adjustments below {100 * self.diagnosis_min_step:.2g} % "
                           f"of every range (signatures as close as it can bring them, training MAE "
                           f"{format_error(s.anchor.error, self._unit)}): I switch to least-squares refinement on "
                           "the trajectories.")
            s.phase = "refine"
            mode, step, predicted, rows = self._step(params, s.anchor, s.J, s.Js, s.sig_keys, sig_table, s.radius,
                                                     s.lam, allow_diagnosis=False)
        return mode, step, predicted, rows

    def _convergence_call(self, ctx: ProposalContext, s: "_Search", excitations: Sequence[Any]):
        """The convergence test at the anchor, on sensitivities measured there (module docstring, step 5).

        Returns:
            ``"continue"`` (sensitivities re-measured, or the finite-difference step halved: plan again),
            ``"break"`` (converged, stalled, or a test the budget cannot pay for: the proposal ends), or
            ``(mode, δ, predicted SSR decrease)``: the step to try after a failed test.
        """
        if not s.fo.fresh_at(s.anchor.u):
            if s.evals_left >= s.n_paid and s.remeasured < 2:
                return self._remeasure_for_test(ctx, s, excitations)
            s.fo.pending = True
            why = (f"which the remaining budget ({s.evals_left} evaluation(s)) cannot pay for"
                   if s.evals_left < s.n_paid else "which I leave to the next iteration (two re-measurements "
                                                   "in this one already)")
            s.lines.append(f"The least-squares model predicts little further gain (training MAE "
                           f"{format_error(s.anchor.error, self._unit)}), but only on sensitivities carried here "
                           f"by secant updates; the convergence test needs them re-measured ({s.n_paid} "
                           f"evaluation(s)), {why}: not converged.")
            return "break"
        s.tested, s.want_test = s.fo.J, None
        test = first_order_test(s.anchor.r, s.fo.J, s.anchor.u, floor=self._floor(ctx, s.anchor),
                                threshold=self.converged_offset)
        if test.passed:
            s.lines.append(f"Converged: {test.text(self._unit)} (training MAE "
                           f"{format_error(s.anchor.error, self._unit)}); holding the parameters.")
            s.converged = True
            return "break"
        # not converged: go on along the undamped Gauss-Newton direction, halving it on each rejection;
        # when every length is rejected, re-measure the sensitivities with half the finite-difference step
        fo = s.fo
        fo.failed_tests += 1
        if fo.backtracks > 6 or not np.max(np.abs(test.step)) > 0:
            if fo.h / 2 < self.min_fd_step:
                fo.stalled = (f"no step along the Gauss-Newton direction lowers the sum of squared residuals "
                              f"(training RMS error {self._rms(s.anchor)}), with sensitivities measured down "
                              f"to a {fo.h:.2g} (normalised) finite-difference step; "
                              f"{test.text(self._unit)}")
                s.lines.append(f"Stalled, not converged: {fo.stalled}.")
                return "break"
            fo.fd_step = fo.h / 2
            fo.backtracks = 0
            fo.J = None  # forces the re-measurement above, with the smaller step
            s.lines.append(f"Every length of the Gauss-Newton step was rejected: re-measuring my sensitivities "
                           f"with a finite-difference step of {fo.fd_step:.2g} (normalised).")
            s.remeasured = min(s.remeasured, 1)
            return "continue"
        return self._after_failed_test(ctx.parameters, s, test)

    def _fd_step_at(self, s: "_Search") -> float:
        """The finite-difference step (normalised units) of a measurement at ``s.anchor``.

        ``fd_step`` (or the convergence memory's halved step) until a convergence test has failed; after that
        (the point is near an optimum the coarse sensitivities misjudge), twice the last accepted refinement
        step, between ``fine_fd_step`` and that step. A forward difference errs by ``h/2`` times the
        curvature, and a Gauss–Newton step on it contracts the distance to the optimum only by a factor of
        order ``h`` times the curvature over the slope: a step comparable to the distance left keeps the
        fast convergence of a finite-difference Gauss–Newton iteration (Dennis & Schnabel, "Numerical
        Methods for Unconstrained Optimization and Nonlinear Equations", 1983, sec. 5.4), where a fixed
        5 % step converged only linearly near a noise-free optimum.
        """
        h = s.fo.fd_step
        if s.fo.failed_tests and math.isfinite(s.last_step):
            h = min(h, max(self.fine_fd_step, 2.0 * s.last_step))
        return float(h)

    def _remeasure_for_test(self, ctx: ProposalContext, s: "_Search", excitations: Sequence[Any],
                            for_test: bool = True) -> str:
        """Sensitivities re-measured at the anchor for the convergence test (or, ``for_test=False``, because
        the secant-carried ones make slow progress: ``s.slow``); ``"continue"`` or ``"break"``.

        A probe better than the anchor shows there is no optimum here: the steps go on from the best probe.
        """
        h = self._fd_step_at(s)
        why = "for the convergence test" if for_test else (
            f"(the last {s.slow} steps each removed less than half of the squared residual: the secant-updated "
            "sensitivities converge slowly)")
        if s.travel > 0.0:
            s.lines.append(f"My sensitivities were measured {s.travel:.2f} (normalised) away and only "
                           f"updated by secants since; re-measuring them here {why} (finite-difference step "
                           f"{h:.2g}).")
        else:
            s.lines.append("My sensitivities here were updated by secants since they were measured; "
                           f"re-measuring them {why} (finite-difference step {h:.2g}).")
        if for_test:
            s.remeasured += 1
        s.slow = 0
        try:
            J, Js, sig_keys, probes = self._finite_differences(ctx, s.anchor, excitations, h)
        except BudgetExhausted:
            return "break"
        s.J, s.Js, s.sig_keys = J, Js, sig_keys
        s.fo.measured(J, s.anchor.u, h)
        if for_test:
            s.want_test = s.fo.J  # re-measured for the test: the test comes next, whatever the damped step says
        s.evals_left -= math.ceil(sum(p.evaluation.rollouts for p in probes) / s.cost)
        s.tried.extend(probes)
        s.travel, s.failures = 0.0, 0
        s.lines.append(self._sensitivity_summary(ctx.parameters, s.anchor, Js, sig_keys, J))
        better = [p for p in probes if not p.failed and p.ssr < s.anchor.ssr]
        if better:  # a probe is better: no optimum here; steps go on from the best probe
            cand = min(better, key=lambda p: p.ssr)
            s.J, s.Js = self._broyden(s.J, s.Js, s.anchor, cand, s.sig_keys)
            s.travel += float(np.max(np.abs(cand.u - s.anchor.u)))
            s.anchor, s.want_test = cand, None
            if s.anchor.ssr < s.best.ssr:
                s.best = s.anchor
        s.radius = max(s.radius, self.initial_radius)
        return "continue"

    def _after_failed_test(self, params: ParameterSet, s: "_Search", test: "FirstOrderTest"):
        """``(mode, δ, predicted SSR decrease)`` after a failed convergence test, on the fresh sensitivities.

        First (no backtrack yet) a damped step with less damping and the trust region reset, when it
        promises enough; else the undamped Gauss–Newton step ``test.step``, halved on each rejection.
        """
        fo = s.fo
        s.J = fo.J.copy()
        step = None
        mode, predicted = "refinement", 0.0
        if fo.backtracks == 0:
            # first a damped step on the fresh sensitivities, with less damping and the trust region reset
            s.lam = max(s.lam / 10.0, 1e-7)
            s.radius = max(s.radius, self.initial_radius)
            mode, step, predicted, _rows = self._step(params, s.anchor, s.J, s.Js, s.sig_keys,
                                                      s.anchor.sig_table(s.sig_keys), s.radius, s.lam,
                                                      allow_diagnosis=False)
            if step is not None and predicted >= self.converged_fraction * s.anchor.ssr:
                s.lines.append(f"Not converged yet: {test.text(self._unit)}; a damped least-squares step on "
                               "the freshly measured sensitivities.")
            else:  # no damped step worth a rollout: its slot is spent, the whole Gauss-Newton step comes next
                step = None
                fo.backtracks = 1
        if step is None:  # then the undamped Gauss-Newton step, halved on each rejection
            k = max(fo.backtracks - 1, 0)
            step = test.step * 0.5 ** k
            big = float(np.max(np.abs(step)))
            if big > self.max_radius:
                step = step * (self.max_radius / big)
            mode = "refinement"
            predicted = float(s.anchor.ssr - np.sum((s.anchor.r + s.J @ step) ** 2))
            s.lines.append(f"Not converged yet: {test.text(self._unit)}; taking "
                           f"{'the' if k == 0 else f'1/{2 ** k} of the'} undamped "
                           "Gauss-Newton step on the freshly measured sensitivities.")
        return mode, step, predicted

    def _judge(self, params: ParameterSet, s: "_Search", cand: "_Point", mode: str, predicted: float, rows,
               gauss_newton: bool) -> None:
        """Accept or reject an evaluated step; update the Jacobians, the trust region, the damping and the phase."""
        names = [p.name for p in params.free]
        anchor = s.anchor
        if cand.failed:
            s.lines.append(f"A {mode} step to {self._values_text(params, anchor, cand, names)} made the twin "
                           f"diverge ({cand.evaluation.message}); shrinking the trust region.")
            s.radius *= 0.3
            s.lam *= 4.0
            s.failures += 1
            return
        if mode == "diagnosis":
            # diagnosis steps are judged on the signatures they were computed from (global
            # information, no phase wrapping), as long as the trajectories do not get much worse
            sa, sc = anchor.sig_vector(s.sig_keys)[rows], cand.sig_vector(s.sig_keys)[rows]
            both = np.isfinite(sa) & np.isfinite(sc)
            accept = cand.error < anchor.error or (
                both.sum() >= len(names) and float(np.sum(sc[both] ** 2)) < float(np.sum(sa[both] ** 2))
                and cand.error < self.diagnosis_slack * s.best.error)
        else:  # a least-squares step: judged on the objective it minimises and the convergence test reads
            accept = cand.ssr < anchor.ssr
        explanation = self._explain(params, mode, anchor, cand, s.Js, s.sig_keys, s.diagnosis, s.radius) \
            if accept else ""
        s.J, s.Js = self._broyden(s.J, s.Js, anchor, cand, s.sig_keys)
        if accept and mode == "diagnosis":
            s.diag_failures = 0
        if gauss_newton:
            s.fo.backtracks = 0 if accept else s.fo.backtracks + 1
        if accept:
            ratio = ((anchor.ssr - cand.ssr) / predicted) if predicted > 0 else 1.0
            s.lines.append(explanation)
            if ratio > 0.5:
                s.radius = min(s.radius * 2.0, self.max_radius)
                s.lam = max(s.lam / 3.0, 1e-7)
            s.travel += float(np.max(np.abs(cand.u - anchor.u)))
            if mode == "refinement":
                # the step removed less than half of the squared residual while the linear model still promised a
                # tenth or more: secant-carried sensitivities converging linearly toward an optimum they misjudge.
                # Near a noise floor the promised gain collapses with the actual one, and this does not count
                s.slow = s.slow + 1 if cand.ssr > 0.5 * anchor.ssr and predicted >= 0.1 * anchor.ssr else 0
                s.last_step = float(np.max(np.abs(cand.u - anchor.u)))
            s.anchor = cand
            s.failures = 0
        elif mode == "diagnosis":
            s.diag_failures += 1
            if s.diag_failures >= 2:
                s.lines.append(f"A signature-matching step ({self._values_text(params, anchor, cand, names)}) "
                               f"again brought neither the signatures nor the trajectories closer "
                               f"(training MAE {self._num(anchor.error)} → {format_error(cand.error, self._unit)}): "
                               "the signatures are as close as this linear model can bring them, so I switch to "
                               "least-squares refinement on the trajectories.")
                s.phase = "refine"
            else:
                s.lines.append(f"A signature-matching step ({self._values_text(params, anchor, cand, names)}) did "
                               f"not bring the signatures closer without degrading the trajectories (training MAE "
                               f"{self._num(anchor.error)} → {format_error(cand.error, self._unit)}); halving the "
                               "step.")
                s.radius = max(s.radius * 0.5, 1e-3)
        else:
            s.lines.append(f"Tried a {mode} step ({self._values_text(params, anchor, cand, names)}): the training "
                           f"RMS error went from {self._rms(anchor)} to {self._rms(cand)} (MAE "
                           f"{self._num(anchor.error)} → {format_error(cand.error, self._unit)}), so I "
                           f"keep the previous values and shrink the trust region to {s.radius * 0.35:.3g}.")
            s.radius = max(s.radius * 0.35, 1e-3)
            s.lam *= 4.0
            s.failures += 1
        if s.anchor.ssr < s.best.ssr:
            s.best = s.anchor

    # -- pieces -----------------------------------------------------------------------
    def _scan_latency(self, ctx: ProposalContext, anchor: "_Point", excitations: Sequence[Any],
                      lines: list[str], min_gain: float = 0.0) -> tuple["_Point | None", int]:
        """Global search of the free latency nuisance over its whole range, the other parameters held.

        A latency is a time shift of the twin's trajectory (:mod:`~vid2sid_ros.calibration.nuisance`):
        every value re-uses the anchor's rollouts, so the search is a dense grid over the bounds
        (spacing 1/8 of a frame period, at least 21 points, at most 201) followed by a bounded
        Brent refinement (``scipy.optimize.minimize_scalar``) between the best grid point's
        neighbours, all on the training RMS error ``sqrt(‖r‖² / m)``: the least-squares objective the
        refinement steps are judged on and the convergence test reads (a latency at the MAE's optimum
        is not at the sum of squares' one, and the test saw the difference as a step left to take).
        A derivative-based step from 0 stops in the nearest dip of the (periodic) misfit; the grid
        sees every dip.

        Args:
            min_gain: the move is taken only when it lowers the training RMS error by more than this
                fraction (0: any decrease).

        Returns:
            ``(the best point found, when it lowers the anchor's training RMS error enough, else None;
            rollouts paid — 0 unless the anchor's rollouts were no longer cached)``.
        """
        params = ctx.parameters
        spec = next((s for s in params.free if s.target == MEASUREMENT_PREFIX + LATENCY), None)
        if spec is None or not spec.upper > spec.lower:
            return None, 0
        from scipy.optimize import minimize_scalar

        rate = next((float(e.rate) for e in excitations if e is not None and getattr(e, "rate", None)), 0.0)
        lo, hi = float(spec.lower), float(spec.upper)
        n = int(min(201, max(21, math.ceil((hi - lo) * rate * 8) + 1))) if rate > 0 else 21
        base = {k: anchor.values[k] for k in params.free_names}
        seen: dict[float, tuple[float, Evaluation]] = {}
        paid = 0

        def rms(x: float) -> float:
            nonlocal paid
            x = float(spec.clip(float(x)))
            if x not in seen:
                ev = ctx.evaluate({**base, spec.name: x})
                paid += int(ev.rollouts)
                r = None if ev.failed or len(ev.sim) != len(ctx.real) else residual_vector(ev.sim, ctx.real)
                ok = r is not None and r.size > 0 and bool(np.all(np.isfinite(r)))
                seen[x] = (float(np.sqrt(np.mean(r ** 2))) if ok else math.inf, ev)
            return seen[x][0]

        grid = np.linspace(lo, hi, n)
        try:
            errs = [rms(x) for x in grid]
            k = int(np.argmin(errs))
            if math.isfinite(errs[k]):
                minimize_scalar(rms, bounds=(float(grid[max(k - 1, 0)]), float(grid[min(k + 1, n - 1)])),
                                method="bounded", options={"xatol": (hi - lo) * 1e-5, "maxiter": 25})
        except BudgetExhausted:
            pass
        if not seen:
            return None, paid
        x_best, (e_best, ev_best) = min(seen.items(), key=lambda kv: kv[1][0])
        if not e_best < (1.0 - min_gain) * math.sqrt(anchor.ssr / max(anchor.r.size, 1)):
            return None, paid
        p = _Point.of(ev_best, ctx, excitations, params)
        if p.failed:
            return None, paid
        lines.append(f"I searched the {spec.name} over its whole range ({n} values from {_with_unit(lo, spec.unit)} "
                     f"to {_with_unit(hi, spec.unit)}, then refined; no rollout: it shifts the measurement): "
                     f"{_fmt(anchor.values[spec.name])} → {_with_unit(x_best, spec.unit)} lowers the training RMS "
                     f"error {self._rms(anchor)} → {self._rms(p)} (MAE {self._num(anchor.error)} → "
                     f"{format_error(p.error, self._unit)}).")
        return p, paid

    @staticmethod
    def _floor(ctx: ProposalContext, anchor: "_Point") -> float:
        """Squared-residual change below the simulation's resolution: ``m (1e-9 e0)²``
        (:func:`~vid2sid_ros.calibration.objective.resolution_floor`, which the residual diagnosis reads too).

        ``e0`` is the training MAE at the start of the run (the scale of the misfit, in the
        measurement's unit), or the anchor's when larger.
        """
        e0 = next((float(r.error_px) for r in ctx.history if math.isfinite(r.error_px)), anchor.error)
        e0 = max(e0, anchor.error) if math.isfinite(anchor.error) else e0
        return resolution_floor(anchor.r.size, e0)

    def _promises_little(self, ctx: ProposalContext, anchor: "_Point", predicted: float) -> bool:
        """Does a refinement step predicted to lower the squared residual by ``predicted`` call the convergence test?

        Yes when the test itself would pass on that prediction: the step's Bates–Watts relative offset
        ``sqrt(predicted / n) / s`` (:func:`first_order_test`, same ``s``) is at most ``converged_offset``, or
        ``predicted`` is below the simulation's resolution (:meth:`_floor`). A laxer call (a fixed fraction of
        the squared residual) paid for fresh sensitivities at points the test then failed, and the step it
        took from there left the sensitivities to be measured again.
        """
        m, n = anchor.r.size, max(len(ctx.parameters.free), 1)
        s2 = max(anchor.ssr - max(predicted, 0.0), 0.0) / max(m - n, 1)
        return predicted <= self._floor(ctx, anchor) or predicted <= self.converged_offset ** 2 * n * s2

    def _rms(self, p: "_Point") -> str:
        """A point's training RMS error ``sqrt(‖r‖² / m)`` with the unit (the objective steps are judged on)."""
        return format_error(math.sqrt(p.ssr / max(p.r.size, 1)), self._unit)

    def _num(self, error: float) -> str:
        """An error as a bare number in the display unit of :attr:`_unit` (mm for m)."""
        f, u = display_unit(self._unit)
        return f"{error * f:.{4 if u == 'rad' else 3}f}"

    @staticmethod
    def _excitations(ctx: ProposalContext) -> list[Any]:
        excs = list(getattr(ctx, "excitations", None) or [])
        if len(excs) == len(ctx.real):
            return excs
        return [None] * len(ctx.real)

    def _finite_differences(self, ctx: ProposalContext, anchor: "_Point", excitations: Sequence[Any],
                            fd_step: float | None = None):
        step = self.fd_step if fd_step is None else float(fd_step)
        params = ctx.parameters
        names = params.free_names
        n = len(names)
        # signature rows: every discrepancy measurable at the anchor
        table0 = anchor.sig_full
        keys = sorted(table0)
        d0 = np.array([table0[k].d for k in keys])
        J = np.zeros((anchor.r.size, n))
        Js = np.zeros((len(keys), n))
        probes = []
        # measurement nuisances first: their probes re-use the anchor's rollouts, still in the objective's cache
        # before the physics probes push it out (a latency probed last paid a full rollout set)
        meas = [s.target.startswith(MEASUREMENT_PREFIX) for s in params.free]
        order = sorted(range(n), key=lambda j: not meas[j])
        steps, points = {}, []
        for j in order:
            h = step if anchor.u[j] + step <= 1.0 else -step
            u = anchor.u.copy()
            u[j] += h
            # only parameter j moves: the others keep the anchor's exact values (a unit-vector round trip
            # of a log-scaled 3e5 gives 299999.99999999994, a different physics point to the rollout cache,
            # so a latency probe paid a full rollout set instead of none)
            values = {k: anchor.values[k] for k in names}
            values[names[j]] = params[names[j]].from_unit(u[j])
            steps[j] = h
            points.append(values)
        # the columns' rollouts in one batch (the calibration's executor), charged as one by one
        evs = ctx.evaluate_many(points) if ctx.evaluate_many is not None else [ctx.evaluate(v) for v in points]
        for j, ev in zip(order, evs):
            h = steps[j]
            p = _Point.of(ev, ctx, excitations, params)
            probes.append(p)
            if p.failed:
                continue  # a diverging probe leaves a zero column: that parameter is not moved by the model
            J[:, j] = (p.r - anchor.r) / h
            d = np.array([p.sig_full[k].d if k in p.sig_full else np.nan for k in keys])
            Js[:, j] = np.where(np.isfinite(d), (d - d0) / h, 0.0)
        return J, Js, [list(k) for k in keys], probes

    def _broyden(self, J, Js, a: "_Point", b: "_Point", sig_keys):
        """Broyden rank-one secant update of both Jacobians along a -> b."""
        s = b.u - a.u
        ss = float(s @ s)
        if b.failed or ss < 1e-14:
            return J, Js
        J = J + np.outer((b.r - a.r) - J @ s, s) / ss
        if Js is not None and Js.size:
            da = a.sig_vector(sig_keys)
            db = b.sig_vector(sig_keys)
            y = db - da
            ok = np.isfinite(y)
            upd = np.outer(np.where(ok, y - Js @ s, 0.0), s) / ss
            Js = Js + upd
        return J, Js

    def _step(self, params: ParameterSet, a: "_Point", J, Js, sig_keys, sig_table, radius: float, lam: float,
              *, allow_diagnosis: bool = True):
        """(mode, δ, predicted SSR decrease) for the next trial step."""
        from scipy.optimize import lsq_linear

        n = a.u.size
        lo = np.maximum(-radius, -a.u)
        hi = np.minimum(radius, 1.0 - a.u)
        hi = np.maximum(hi, lo + 1e-12)
        d = a.sig_vector(sig_keys)
        ok = np.isfinite(d) & np.all(np.isfinite(Js), axis=1) if Js is not None and Js.size else np.zeros(0, bool)
        sig_rms = float(np.sqrt(np.mean(d[ok] ** 2))) if ok.any() else 0.0
        # measurement nuisances (latency, marker offsets) act on the trajectory, not on the dynamics the
        # signatures describe: the signature diagnosis leaves them alone, the trajectory refinement fits them
        meas = np.array([s.target.startswith(MEASUREMENT_PREFIX) for s in params.free], bool)
        n_moving = int(n - meas.sum())
        # which signature rows moved smoothly is judged on the dynamics columns alone: a latency probe
        # shifts every phase and onset signature, and its column would change the row norms the
        # smoothness test compares (a different, worse, diagnosis step than without the nuisance)
        smooth = self._smooth_rows(Js[:, ~meas]) if Js is not None and Js.size else np.zeros(0, bool)
        mode = ("diagnosis" if (allow_diagnosis and n_moving > 0 and (ok & smooth).sum() >= n_moving
                                and sig_rms > self.signature_tolerance) else "refinement")
        if mode == "diagnosis":
            keep = ~meas  # the measurement nuisances stay exactly where they are
            ok &= smooth
            A, b = Js[ok][:, keep], -d[ok]
        else:
            keep = np.ones(n, bool)
            A, b = J, -a.r
        scale = np.sqrt(np.sum(A ** 2, axis=0)) + 1e-12
        reg = math.sqrt(lam + self.ridge) * np.diag(scale)
        res = lsq_linear(np.vstack([A, reg]), np.concatenate([b, np.zeros(int(keep.sum()))]),
                         bounds=(lo[keep], hi[keep]), method="bvls")
        step = np.zeros(n)
        step[keep] = np.asarray(res.x, float)
        pred_r = a.r + J @ step
        predicted = float(a.ssr - np.sum(pred_r ** 2))
        return mode, step, predicted, (ok if mode == "diagnosis" else None)

    @staticmethod
    def _smooth_rows(Js) -> np.ndarray:
        """Rows of J_s that look like smooth functions of the parameters.

        A signature whose finite difference is more than 5x the median row norm
        jumped (e.g. a spectral peak switching to another mode) rather than moved;
        it is left out of the diagnosis step.
        """
        if Js is None or not Js.size:
            return np.zeros(0, bool)
        norms = np.sqrt(np.sum(np.where(np.isfinite(Js), Js, 0.0) ** 2, axis=1))
        med = float(np.median(norms[norms > 0])) if np.any(norms > 0) else 0.0
        return np.isfinite(Js).all(axis=1) & (norms <= 5.0 * med if med > 0 else norms >= 0)

    def _sensitivity_summary(self, params: ParameterSet, a: "_Point", Js, sig_keys, J) -> str:
        parts = []
        for j, spec in enumerate(params.free):
            px = float(np.sqrt(np.mean(J[:, j] ** 2))) * 0.1 if J.size else 0.0
            top = None
            if Js is not None and Js.size:
                col = np.where(self._smooth_rows(Js), np.abs(Js[:, j]), 0.0)
                i = int(np.argmax(col))
                if col[i] > 0:
                    top = (tuple(sig_keys[i]), Js[i, j])
            txt = f"{spec.name} (+10 % of its range moves the keypoints {format_error(px, self._unit, 2)} RMS"
            if top is not None:
                (trial, kp, sig), g = top
                txt += f"; strongest effect on the {SIGNATURES[sig][2]} of {kp} in {trial}: {_effect_text(sig, g * 0.1)}"
            parts.append(txt + ")")
        sv = np.linalg.svd(J / math.sqrt(max(J.shape[0], 1)), compute_uv=False) if J.size else np.zeros(1)
        cond = sv[0] / sv[-1] if sv[-1] > 0 else math.inf
        return ("Measured sensitivities at the current point: " + "; ".join(parts)
                + f". Condition number of the trajectory sensitivities: {cond:.3g}.")

    def _values_text(self, params: ParameterSet, a: "_Point", b: "_Point", names: Sequence[str]) -> str:
        moved = [(abs(b.u[j] - a.u[j]), j) for j in range(len(names))]
        moved.sort(reverse=True)
        out = []
        for _, j in moved[:3]:
            s = params[names[j]]
            out.append(f"{s.name} {_fmt(a.values[s.name])}→{_fmt(b.values[s.name])} {_unit_str(s.unit)}")
        return ", ".join(out)

    def _explain(self, params: ParameterSet, mode: str, a: "_Point", b: "_Point", Js, sig_keys,
                 diagnosis: dict[str, str], radius: float) -> str:
        """Rationale for an accepted move a -> b.

        A parameter's move is explained by a signature only when the evidence holds up:
        the sim disagreed with the robot on it, the measured sensitivity says this
        parameter's move pushes it toward the robot's value and accounts for most of
        the predicted change, and the signature really moved that way.
        """
        free = params.free
        delta = b.u - a.u
        order = [j for j in np.argsort(-np.abs(delta)) if abs(delta[j]) >= 0.005][:3]
        used: set[tuple] = set()
        sentences = []
        for j in order:
            spec = free[j]
            verb = "raising" if delta[j] > 0 else "lowering"
            what = (spec.meaning or f"{spec.kind} parameter").split(";")[0].strip()
            move = (f"{verb} {spec.name} ({what}) from {_fmt(a.values[spec.name])} to "
                    f"{_with_unit(b.values[spec.name], spec.unit)}")
            ev = self._evidence(j, delta, a, b, Js, sig_keys, used)
            if ev is not None:
                key, before, after = ev
                used.add(key)
                s_a, real = before.sim, before.real
                state = "too high" if delta[j] < 0 else "too low"
                sentences.append(
                    f"the twin's {s_a.describe()} is {_with_unit(s_a.value, s_a.unit)} against "
                    f"{_with_unit(real.value, real.unit)} for the robot: {spec.name} is {state}; {move} brings it to "
                    f"{_with_unit(after.sim.value, after.sim.unit)}")
                diagnosis[spec.name] = (f"{state}: the {s_a.describe()} was {_with_unit(s_a.value, s_a.unit)} vs "
                                        f"{_with_unit(real.value, real.unit)} on the robot")
            else:
                sentences.append(f"{move} fits the trajectories better (no single signature isolates it)")
                diagnosis.setdefault(spec.name, f"{'too low' if delta[j] > 0 else 'too high'}: trajectory residual")
        head = ("Diagnosis from signatures" if mode == "diagnosis" else
                f"Least-squares refinement (Levenberg–Marquardt, trust region {radius:.2g} in normalised units)")
        body = "; ".join(sentences) if sentences else "adjustments below 0.5 % of every range"
        return f"{head}: {body}. Training MAE {self._num(a.error)} → {format_error(b.error, self._unit)}."

    @staticmethod
    def _evidence(j: int, delta: np.ndarray, a: "_Point", b: "_Point", Js, sig_keys, used: set):
        """(key, discrepancy before, discrepancy after) best explaining parameter j's move, or None."""
        if Js is None or not Js.size:
            return None
        best, score = None, 0.0
        finite = np.isfinite(Js).all(axis=1).tolist()
        own_col = (Js[:, j] * delta[j]).tolist()  # each row's Js[i, j] * delta[j]
        for i, k in enumerate(sig_keys):
            key = tuple(k)
            if not finite[i] or key in used or key not in a.sig_full or key not in b.sig_full:
                continue
            d_a, d_b = a.sig_full[key].d, b.sig_full[key].d
            own = own_col[i]
            actual = d_b - d_a
            if abs(d_a) < 0.02 or own * d_a >= 0 or actual * own <= 0:
                continue  # no discrepancy, wrong direction, or it did not move as predicted
            if not 0.2 * abs(own) <= abs(actual) <= 3.0 * abs(own) + 0.02 or abs(own) < 0.5 * abs(float(Js[i] @ delta)):
                continue  # the sensitivity is not trustworthy here, or another parameter dominates
            gain = abs(d_a) - abs(d_b)
            if gain < max(0.005, 0.1 * abs(d_a)):
                continue  # closed less than a tenth of the gap: not the evidence for this move
            if gain > score:
                best, score = (key, a.sig_full[key], b.sig_full[key]), gain
        return best

    def _probe_only(self, ctx: ProposalContext, anchor: "_Point", evals_left: int, lines: list[str]) -> Proposal:
        lines.append(f"Only {evals_left} evaluation(s) left, fewer than the {len(ctx.parameters.free) + 1} needed to "
                     "measure sensitivities; keeping the current parameters.")
        return Proposal(values={n: ctx.current[n] for n in ctx.parameters.free_names}, rationale=" ".join(lines),
                        confidence=0.1, best_evaluation=None)

    def _finish(self, ctx, anchor: "_Point", best: "_Point", tried, lines, diagnosis, jac, radius, lam, failures,
                sig_keys, phase: str = "diagnose", converged: bool = False, travel: float = 0.0,
                diag_failures: int = 0, fo: "_FirstOrder | None" = None, slow: int = 0,
                last_step: float = math.inf) -> Proposal:
        names = ctx.parameters.free_names
        if best.error >= anchor.error and best is not anchor:
            best = anchor
        state = None
        if jac is not None:
            J, Js = jac
            state = {"kind": "reasoner", "names": list(names), "m": int(best.r.size), "u_anchor": best.u.tolist(),
                     "J": J.tolist(), "Js": Js.tolist() if Js is not None else [], "sig_keys": sig_keys,
                     "radius": float(radius), "lambda": float(lam), "failures": int(failures), "phase": phase, "travel": float(travel),
                     "diag_failures": int(diag_failures),
                     "converged": bool(converged), "slow": int(slow),
                     "last_step": float(last_step) if math.isfinite(last_step) else None}
            if fo is not None:
                state.update(fo.to_state(J, best.u))
        start_error = float(ctx.current_eval.error_px)
        improved = best.error < start_error
        if not lines:
            lines.append("No evaluation was possible this iteration; keeping the parameters.")
        conf = 0.2
        if converged and not improved:
            # no new evidence this iteration: hold the last confidence, never raise it
            prev = [r.confidence for r in ctx.history[1:] if math.isfinite(r.confidence)]
            conf = float(prev[-1]) if prev else 0.2
        if improved:
            gain = (start_error - best.error) / max(start_error, 1e-9)
            conf = float(min(0.95, 0.45 + 0.5 * gain))
        elif tried and not converged:
            lines.append(f"No step improved on {format_error(start_error, self._unit)} this iteration.")
        # what a person reads first: one plain sentence per parameter moved, with the observation; the trace follows
        diagnosis = net_diagnosis(diagnosis, ctx.current, best.values)
        evidence = {}
        for n, text in diagnosis.items():
            verdict, _, rest = str(text).partition(": ")
            evidence[n] = f"{rest} ({n} was {verdict})" if rest else str(text)
        rationale = lead_with_moves(" ".join(lines), ctx.parameters, ctx.current, best.values, evidence=evidence,
                                    observation=(f"the training MAE went {self._num(start_error)} → "
                                                 f"{format_error(best.error, self._unit)}" if improved else ""))
        return Proposal(values={n: best.values[n] for n in names}, rationale=rationale, confidence=conf,
                        diagnosis=dict(diagnosis), best_evaluation=best.evaluation if best.evaluation is not
                        ctx.current_eval else None, state=state, converged=bool(converged),
                        stalled=fo.stalled if fo is not None and not converged else "")


def net_diagnosis(diagnosis: Mapping[str, str], before: Mapping[str, float],
                  after: Mapping[str, float]) -> dict[str, str]:
    """Per-parameter verdicts (``"too low: ..."`` / ``"too high: ..."``) agreeing with the iteration's net move.

    An iteration takes several sub-steps; a verdict recorded on one of them (``friction_2``
    lowered first: "too high") contradicts a net move the other way (raised in the end), and the
    lead sentence read "Raising friction_2 ... (friction_2 was too high)". A verdict against the
    net move is replaced by the net direction's ``"too low|too high: trajectory residual"``; a
    parameter that ended where it started keeps no verdict. Other texts are kept as they are.

    Args:
        diagnosis: ``{name: verdict text}`` from the sub-steps.
        before, after: values ``{name: value}`` at the start and the end of the iteration.
    """
    out: dict[str, str] = {}
    for n, text in diagnosis.items():
        text = str(text)
        if n not in before or n not in after or not text.startswith(("too low", "too high")):
            out[n] = text
            continue
        a, b = float(before[n]), float(after[n])
        if b == a:
            continue
        net = "too low" if b > a else "too high"
        out[n] = text if text.startswith(net) else f"{net}: trajectory residual"
    return out


def _effect_text(sig: str, delta: float) -> str:
    """Signature change for a given change of the discrepancy coordinate."""
    kind = SIGNATURES[sig][1]
    if kind == "log":
        return f"{(math.exp(delta) - 1) * 100:+.1f} %"
    if kind == "amplitude":
        return f"{delta * 100:+.1f} % of the peak displacement"
    if kind == "period":
        return f"{delta:+.3f} cycles"
    return f"{delta:+.3g} {_unit_str(SIGNATURES[sig][0])}"


class _Point:
    """An evaluated parameter point with its residual vector and signatures."""

    def __init__(self, evaluation: Evaluation, u: np.ndarray, r: np.ndarray, values: dict[str, float],
                 sig_full: Mapping[tuple, SignatureDiscrepancy], failed: bool) -> None:
        self.evaluation, self.u, self.r, self.values, self.sig_full, self.failed = (
            evaluation, u, r, values, sig_full, failed)
        self.error = math.inf if failed else float(evaluation.error_px)
        self.ssr = math.inf if failed else float(np.sum(r ** 2))

    @classmethod
    def of(cls, ev: Evaluation, ctx: ProposalContext, excitations: Sequence[Any], params: ParameterSet) -> "_Point":
        values = params.complete(ev.values)
        u = params.to_unit_vector(values)
        failed = bool(ev.failed) or len(ev.sim) != len(ctx.real)
        r = np.zeros(0)
        sig: dict = {}
        if not failed:
            r = residual_vector(ev.sim, ctx.real)
            if not np.all(np.isfinite(r)):
                failed = True
            else:
                s_sig, r_sig = measure_all(ev.sim, ctx.real, excitations)
                sig = compare_signatures(s_sig, r_sig)
        return cls(ev, u, r, values, sig, failed)

    def sig_table(self, keys: Sequence[Sequence[str]]) -> dict[tuple, SignatureDiscrepancy]:
        return {tuple(k): self.sig_full[tuple(k)] for k in keys if tuple(k) in self.sig_full}

    def sig_vector(self, keys: Sequence[Sequence[str]]) -> np.ndarray:
        return np.array([self.sig_full[tuple(k)].d if tuple(k) in self.sig_full else np.nan for k in keys])


class FirstOrderTest:
    """The result of :func:`first_order_test` (see there).

    Attributes:
        passed: the fit is at a first-order optimum as far as the noise can tell.
        offset: the Bates–Watts relative offset ``ρ`` (dimensionless; inf without a noise estimate).
        predicted: predicted decrease of the squared residual by the Gauss–Newton step (unit²).
        noise: the residual standard deviation estimate ``s`` (the measurement's unit).
        step: the box-constrained Gauss–Newton step, shape (n,), normalised units.
        gradient: the projected gradient ``‖P(Jᵀr)‖∞`` (unit² per normalised unit).
        threshold: the bound on ``ρ`` used.
        floor: predicted decreases at or below this (unit²) are below the simulation's resolution.
    """

    def __init__(self, passed: bool, offset: float, predicted: float, noise: float, step: np.ndarray,
                 gradient: float, threshold: float, floor: float) -> None:
        self.passed, self.offset, self.predicted, self.noise = passed, offset, predicted, noise
        self.step, self.gradient, self.threshold, self.floor = step, gradient, threshold, floor

    def text(self, unit: str) -> str:
        """One clause for a rationale, naming the test, its numbers and its source."""
        if self.predicted <= self.floor:
            return (f"the Gauss-Newton step on freshly measured sensitivities predicts a decrease of the squared "
                    f"residual of {self.predicted:.3g} {unit}², below the simulation's resolution "
                    f"({self.floor:.3g} {unit}²)")
        return (f"the Gauss-Newton step on freshly measured sensitivities has a relative offset of {self.offset:.3g} "
                f"{'≤' if self.passed else '>'} {self.threshold:.3g} (Bates & Watts: its predicted decrease of the "
                f"squared residual, {self.predicted:.3g} {unit}², per parameter, against the residual noise "
                f"{self.noise:.3g} {unit}; projected gradient {self.gradient:.3g})")


def first_order_test(r: np.ndarray, J: np.ndarray, u: np.ndarray, *, floor: float = 0.0,
                     threshold: float = 0.25) -> FirstOrderTest:
    """First-order optimality of a bounded least-squares fit, judged against its own noise.

    The Gauss–Newton step ``δ = argmin ‖r + J δ‖²`` inside the box ``0 ≤ u + δ ≤ 1`` (BVLS,
    ``scipy.optimize.lsq_linear``) predicts the decrease ``P = ‖r‖² − ‖r + J δ‖²``; ``P = 0``
    exactly when the projected gradient ``Jᵀr`` vanishes (the first-order / KKT condition for a
    box, Nocedal & Wright, *Numerical Optimization*, 2nd ed., §12.3 and §16.7; Dennis & Schnabel,
    *Numerical Methods for Unconstrained Optimization*, §7.2, stop on a gradient scaled to the
    function's size). The noise sets the scale: with ``m`` residuals, ``n`` parameters and
    ``s² = (‖r‖² − P) / (m − n)`` the residual variance estimate, the relative offset
    (Bates & Watts, "A relative offset convergence criterion for nonlinear least squares",
    *Technometrics* 23, 1981; *Nonlinear Regression Analysis*, 1988, §2.2.3)

        ``ρ = sqrt(P / n) / s``

    is the remaining step's length in standard errors of the estimate (RMS over the parameters):
    ``P / s²`` is its squared Mahalanobis length. The fit has converged when ``ρ ≤ threshold``
    (a step that small moves the estimate by a small fraction of what the noise already leaves
    uncertain), or when ``P ≤ floor`` (no decrease the arithmetic can show; noise-free data).
    Bates & Watts suggest 0.001 for analytic derivatives; a forward-difference Jacobian of a
    simulator (step 0.05 of a range) is a few % off, which alone keeps ``ρ`` near that size at
    the optimum, so the default 0.25 asks for a remaining step under a quarter of a standard
    error: the 95 % intervals (±1.96 standard errors) would move by under 13 % of their half-width.

    Args:
        r: residual vector, shape (m,), in the measurement's unit.
        J: Jacobian ``∂r/∂u`` measured at ``u`` (finite differences), shape (m, n).
        u: the point in normalised coordinates, shape (n,), in [0, 1].
        floor: predicted decreases at or below this pass (unit²).
        threshold: bound on ``ρ`` (dimensionless, > 0).

    Returns:
        :class:`FirstOrderTest`.
    """
    from scipy.optimize import lsq_linear

    r = np.asarray(r, float)
    J = np.asarray(J, float)
    u = np.asarray(u, float)
    m, n = J.shape
    lo = -u
    hi = np.maximum(1.0 - u, lo + 1e-15)
    scale = np.sqrt(np.sum(J ** 2, axis=0))
    live = scale > 0
    step = np.zeros(n)
    ssr = float(r @ r)
    if live.any():
        # a ridge of 1e-12 of each column's squared norm only keeps exactly dependent columns from a huge step
        reg = 1e-6 * np.diag(scale[live])
        res = lsq_linear(np.vstack([J[:, live], reg]), np.concatenate([-r, np.zeros(int(live.sum()))]),
                         bounds=(lo[live], hi[live]), method="bvls")
        step[live] = np.asarray(res.x, float)
    predicted = max(ssr - float(np.sum((r + J @ step) ** 2)), 0.0)
    g = J.T @ r
    # projected gradient: a component pushing out through an active bound is no first-order descent direction
    g = np.where(((u <= 0.0) & (g > 0)) | ((u >= 1.0) & (g < 0)), 0.0, g)
    s2 = max(ssr - predicted, 0.0) / max(m - n, 1)
    noise = math.sqrt(s2)
    offset = math.sqrt(predicted / max(n, 1)) / noise if noise > 0 else (0.0 if predicted == 0 else math.inf)
    passed = predicted <= floor or offset <= threshold
    return FirstOrderTest(bool(passed), float(offset), float(predicted), noise, step,
                          float(np.max(np.abs(g))) if g.size else 0.0, float(threshold), float(floor))


class _Search:
    """One proposal's working state: the point reasoned from, the Jacobians, the trust region, the phase.

    ``anchor``: the point the steps start from; ``best``: the lowest training MAE seen in this proposal;
    ``tried``: every evaluated point; ``lines``/``diagnosis``: the rationale so far; ``J`` (m, n) and
    ``Js`` (signature rows, n): the sensitivities per normalised unit; ``radius``/``lam``: trust region
    (normalised ∞-norm) and Levenberg–Marquardt damping; ``failures``/``diag_failures``: consecutive
    rejected steps; ``travel``: accepted travel since the sensitivities were measured; ``phase``:
    ``"diagnose"`` or ``"refine"``; ``fo``: the convergence test's memory; ``evals_left``: evaluations
    the budget still pays for, each ``cost`` rollouts; ``n_paid``: evaluations a Jacobian costs;
    ``want_test``/``tested``/``remeasured``: a Jacobian re-measured for the test and not tested yet, the
    one the last test used, re-measurements for a convergence call in this proposal (at most two);
    ``slow``: consecutive accepted refinement steps that removed less than half of the squared residual
    where the linear model promised a tenth or more (secant-carried sensitivities converging linearly); ``last_step``: the last accepted step's length
    (normalised ∞-norm), the scale of the finite-difference step near the optimum (:meth:`Reasoner._fd_step_at`).
    The memory carried to the next proposal is :meth:`Reasoner._finish`'s ``Proposal.state``.
    """

    def __init__(self, anchor: "_Point", *, evals_left: int, cost: int, fd_step: float, radius: float) -> None:
        self.anchor = self.best = anchor
        self.tried: list[_Point] = []
        self.lines: list[str] = []
        self.diagnosis: dict[str, str] = {}
        self.J: np.ndarray | None = None
        self.Js: np.ndarray | None = None
        self.sig_keys: list[list[str]] = []
        self.radius = radius
        self.lam = 1e-3
        self.failures = 0
        self.travel = 0.0
        self.diag_failures = 0
        self.phase = "diagnose"
        self.converged = False
        self.fo = _FirstOrder(fd_step=fd_step)
        self.evals_left = evals_left
        self.cost = cost
        self.n_paid = 0
        self.want_test: np.ndarray | None = None
        self.tested: np.ndarray | None = None
        self.remeasured = 0
        self.slow = 0
        self.last_step = math.inf


class _FirstOrder:
    """The reasoner's convergence-test memory within and across proposals.

    ``J``/``u``: the Jacobian last measured by finite differences and where (a secant-updated
    or carried Jacobian is never used for the test); ``fd_step``: the finite-difference step
    (halved when every length of a Gauss–Newton step was rejected); ``backtracks``: rejected
    Gauss–Newton steps at this point; ``pending``: a test owed that the budget could not pay
    for (re-measure first next time); ``stalled``: why no step is left, or ""; ``failed_tests``: convergence
    tests failed so far (after one, measurements near the optimum use a finer step:
    :meth:`Reasoner._fd_step_at`); ``h``: the step of the last measurement.
    """

    def __init__(self, fd_step: float) -> None:
        self.J: np.ndarray | None = None
        self.u: np.ndarray | None = None
        self.fd_step = float(fd_step)
        self.h = float(fd_step)  # the step of the last measurement (at most fd_step: Reasoner._fd_step_at)
        self.backtracks = 0
        self.failed_tests = 0
        self.pending = False
        self.stalled = ""

    def measured(self, J: np.ndarray, u: np.ndarray, h: float | None = None) -> None:
        self.J, self.u, self.pending = np.array(J, float), np.array(u, float), False
        self.h = self.fd_step if h is None else float(h)

    def fresh_at(self, u: np.ndarray) -> bool:
        return self.J is not None and self.u is not None and np.array_equal(self.u, u)

    def to_state(self, J: np.ndarray, u: np.ndarray) -> dict[str, Any]:
        fresh = self.fresh_at(u) and self.J is not None and np.array_equal(self.J, J)
        return {"fresh": bool(fresh), "fd_step": self.fd_step, "fd_step_used": self.h,
                "failed_tests": int(self.failed_tests),
                "backtracks": int(self.backtracks), "pending": bool(self.pending)}

    @classmethod
    def restore(cls, state: Mapping[str, Any], fd_step: float, J: np.ndarray, u: np.ndarray) -> "_FirstOrder":
        fo = cls(float(state.get("fd_step", fd_step)))
        fo.backtracks = int(state.get("backtracks", 0))
        fo.failed_tests = int(state.get("failed_tests", 0))
        fo.pending = bool(state.get("pending", False))
        if state.get("fresh") and np.array_equal(np.asarray(state.get("u_anchor", []), float), u):
            fo.measured(J, u, float(state.get("fd_step_used", fo.fd_step)))
        return fo


def _dead_columns(J: np.ndarray, names: Sequence[str]) -> list[str]:
    """Names of the parameters whose sensitivity column of ``J`` (residuals x parameters) is zero.

    A column is dead when its norm is at most 1e-9 of the largest column's (or exactly 0):
    the parameter did not move the keypoints at the point where ``J`` was measured.
    """
    if J is None or J.size == 0:
        return []
    norms = np.linalg.norm(np.nan_to_num(np.asarray(J, float)), axis=0)
    top = float(norms.max()) if norms.size else 0.0
    return [n for n, v in zip(names, norms) if v <= 1e-9 * top or v == 0.0]
