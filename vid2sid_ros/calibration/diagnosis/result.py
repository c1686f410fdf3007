"""What a residual diagnosis returns: :class:`Finding` (one thing the residuals show) and :class:`Diagnosis`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding", "Diagnosis", "THRESHOLDS"]

#: the decision constants of the comparison (:mod:`.compare`); documented in the package docstring
THRESHOLDS: dict[str, float] = {
    # family-wise false-alarm probability of the likelihood-ratio tests (Bonferroni over the candidates)
    "alpha": 0.01,
    # a named cause must explain at least this share of the residual sum of squares left after
    # refitting the free parameters alone (practical significance; a statistically significant
    # 2 % is not a cause anyone can act on)
    "min_share": 0.10,
    # two causes are told apart only if their refitted sums of squares differ by more than the
    # likelihood-ratio threshold AND by more than this share of the best one's reduction (the
    # accuracy of a few chord Gauss-Newton steps from finite differences)
    "refit_accuracy": 0.10,
    # causes refitted after screening (the rest keep their linearised score)
    "refit_top": 8,
    # chord Gauss-Newton evaluations per refit
    "refit_evaluations": 4,
    # refits from afar (when the local refits leave a systematic part): the candidates refitted (best
    # linearised share first), the residual evaluations of each (besides its Jacobians), and where a cause
    # starts: at least this share of its search range
    "far_top": 6, "far_evaluations": 12, "far_start_share": 0.3,
    # two errors at once (when no single cause explains the residual): the best causes of different kinds paired
    # and each pair refitted together (``pair_top`` of them: at most pair_top·(pair_top−1)/2 refits)
    "pair_top": 4,
    # forward-difference step of the free parameters, normalised units
    "probe_step": 0.01,
    # time fraction of each trial held out when no holdout trial is given
    "held_out_time": 0.3,
    # a recommendation must lower the held-out error by at least this share
    "held_out_gain": 0.05,
    # an identified latency nuisance of at least this many frames is reported as a note
    "latency_note_frames": 0.2,
    # "the model is too simple here": lag-1 autocorrelation, residual RMS over the motion RMS,
    # residual sum of squares over the noise level's
    "structure_rho": 0.9, "structure_motion_share": 0.01, "structure_noise_ratio": 4.0,
    # consider analysis (:mod:`.consider`): a candidate at its plausible error is "visible" when the diagnosis
    # would flag it with at least this probability (power of its likelihood-ratio test); an invisible one is a
    # caveat for a free parameter it moves beyond that parameter's 95 % half-width and by at least this share
    # of its value (5 %: the size the misspecification suite counts as a wrong answer)
    "consider_power": 0.9, "consider_min_shift": 0.05,
    # an ``unchecked`` verdict lists at most this many causes (those that move an identified value furthest); the
    # misspecification suite counts a set (indistinguishable or unchecked) of more causes as no diagnosis
    "set_max_causes": 5,
}


@dataclass
class Finding:
    """One thing the residuals show.

    Attributes:
        kind: ``inertia`` | ``joint`` | ``friction`` | ``actuator`` | ``frozen`` | ``latency`` |
            ``timing`` | ``rolling_shutter`` | ``camera`` | ``offset`` | ``encoder`` (a named cause of that kind),
            ``initial_state`` (a warning: a joint-state trial starts away from the twin's initial state),
            ``tracker`` (a note: the tracker's own bias measured on renders of the twin explains the
            residual — the measurement, not the model),
            ``convergence`` (a note: the point is not the free parameters' optimum, nothing else is looked for),
            ``resolution`` (a note: the residual is at the simulation's resolution, nothing is looked for),
            ``indistinguishable`` (several causes of different kinds explain the residual equally),
            ``structure`` (no candidate explains it: the model is too simple here).
        severity: ``warning`` (the parameters are probably not the physical ones), ``caveat`` (kind
            ``consider``: the fit cannot check a nominal value the identified parameters rest on, see
            :mod:`.consider`; not a claim that the model is wrong) or ``note``.
        message: plain sentences with the numbers and their units.
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
    """Result of :func:`~vid2sid_ros.calibration.diagnosis.diagnose`.

    Attributes:
        findings: warnings first.
        statistics: the comparison's numbers (noise level, test, every candidate's score), also
            when nothing was named.
        rollouts: diagnostic rollouts spent (probes and refits; never charged to a budget).
        verdict: ``named`` (one cause, or one kind of cause, explains the residual clearly better
            than the others), ``indistinguishable`` (several of different kinds explain it equally),
            ``unexplained`` (no candidate does; the model is too simple here), ``not_at_optimum`` (the free
            parameters alone would remove the residual's systematic part: the run stopped before converging;
            no cause is named, no warning), ``unchecked`` (nothing beyond the noise, but the consider analysis
            finds nominal values the trials cannot check: a caveat listing them, no warning), ``none`` (the
            residual is at the noise level or no candidate matters) or ``failed``.
        recommendation: what to free and what that did on held-out data, or None.
        consider: the consider analysis (:meth:`.consider.ConsiderResult.to_dict`), or None.
        causes: the verdict's causes, ``[{cause, kind, fields, ...}]``: the named cause (a camera group: each
            field group), the indistinguishable set, or the unchecked set (at most ``set_max_causes`` listed);
            empty for any other verdict.
        set_size: how many causes the verdict's set holds (the unchecked set before it is cut to
            ``set_max_causes``); 0 when ``causes`` is empty.
    """

    findings: list[Finding]
    statistics: dict[str, Any]
    rollouts: int = 0
    verdict: str = "none"
    recommendation: dict[str, Any] | None = None
    consider: dict[str, Any] | None = None
    causes: list[dict[str, Any]] = field(default_factory=list)
    set_size: int = 0

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def caveats(self) -> list[Finding]:
        """Consider-analysis caveats: a nominal value the fit cannot check (not a model error)."""
        return [f for f in self.findings if f.severity == "caveat"]

    @property
    def misspecified(self) -> bool:
        """True when any warning was raised."""
        return bool(self.warnings)

    @property
    def kinds(self) -> list[str]:
        """Kinds named by any finding (warning or note), in order; an indistinguishable set adds the
        kinds of its members after ``indistinguishable``."""
        out: list[str] = []
        for f in self.findings:
            if f.severity == "caveat":  # not a cause: see ``caveats``
                continue
            out.append(f.kind)
            if f.kind == "indistinguishable":
                out.extend(c["kind"] for c in f.evidence.get("causes", []))
        return list(dict.fromkeys(out))

    def summary(self) -> str:
        """Plain text: the warnings (then notes), or that nothing unexplained was found."""
        if not self.findings:
            return ("Residual diagnosis: no structure the free parameters cannot explain (no candidate cause — "
                    "a frozen parameter, a model quantity, the actuator, the timing or the camera — explains "
                    "more of the residual than the measurement noise can).")
        head = ("Residual diagnosis — the model is probably wrong somewhere; do not read the parameters as physical "
                "before checking: " if self.warnings else "Residual diagnosis: ")
        text = head + " ".join(f.message for f in self.findings if f.severity != "caveat")
        if self.caveats and not self.warnings and not [f for f in self.findings if f.severity == "note"]:
            text = ("Residual diagnosis: no structure the free parameters cannot explain. "
                    + " ".join(f.message for f in self.caveats))
        elif self.caveats:
            text += " " + " ".join(f.message for f in self.caveats)
        return text

    def headline(self) -> str:
        """One clause for a list of insights: what the findings below amount to."""
        if self.warnings:
            n = len(self.warnings)
            return ("the model is probably wrong somewhere — do not read the parameters as physical before checking"
                    + (f" ({n} warnings)" if n > 1 else ""))
        notes = [f for f in self.findings if f.severity == "note"]
        if notes:
            return "nothing unexplained; " + " ".join(f.message for f in notes)
        return "no structure the free parameters cannot explain"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``misspecified``, ``caveat`` (a consider caveat was raised), ``kinds``, ``summary``
        (:meth:`headline`), ``text`` (:meth:`summary`), ``findings``, ``statistics``, ``rollouts``,
        ``thresholds``, ``verdict``, ``causes``, ``set_size``, ``recommendation``, ``consider``."""
        return {"misspecified": self.misspecified, "caveat": bool(self.caveats), "consider": self.consider,
                "causes": [dict(c) for c in self.causes], "set_size": self.set_size,
                "kinds": self.kinds, "summary": self.headline(),
                "text": self.summary(), "verdict": self.verdict, "recommendation": self.recommendation,
                "findings": [f.to_dict() for f in self.findings], "statistics": self.statistics,
                "rollouts": self.rollouts, "thresholds": dict(THRESHOLDS)}
