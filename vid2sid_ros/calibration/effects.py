"""Does every free parameter change the training rollouts? Checked once, at the start of a run.

A free parameter that leaves the training rollouts unchanged between its bounds cannot be
calibrated from them, whatever the proposer: a physics parameter then means a target that does
not take effect (a body welded to the world, a field MuJoCo does not read, an actuator the
trials never command), and the run is refused with one line naming it
(:class:`ParameterEffectError`); a nuisance parameter means a value only data outside the
training trials could show (a held-out trial's own initial state or time offset, marker offsets
when the trials measure joint angles), which the loop holds at its start value for every
proposer and reports as unobservable on the training data.

Cost: none when the start point's identifiability check ran (``check_identifiability``): a
parameter whose finite-difference column is not zero has shown its effect there. The others
(and every parameter when that check is off: one evaluation at its farther bound against the
start point) are evaluated at their lower and upper bounds, the other parameters at the start
point, then at 30 % and at 70 % of their ranges (a start point at rest hides every effect).
These evaluations are diagnostics (``EffectCheck.rollouts``), not charged to the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..core.parameters import ParameterSet
from .identifiability import IdentifiabilityReport
from .objective import TrialObjective, trajectory_vector
from .proposers.proposer import Evaluation

__all__ = ["ParameterEffectError", "EffectCheck", "check_parameter_effects", "NO_EFFECT"]

#: largest change of any training sample (in the measurement's unit: px, m or rad) that counts as
#: "identical rollouts" (a field MuJoCo does not read changes nothing at all; round-off is ~1e-14)
NO_EFFECT = 1e-9

#: the cause named when the twin names none
_GENERIC_CAUSE = "the simulator does not read this target during a rollout, or the training trials do not excite it"

#: where the other free parameters sit (normalised) when the start point shows no effect
_OTHER_POINTS = (0.3, 0.7)


class ParameterEffectError(ValueError):
    """A free physics parameter does not change the training rollouts; one line names it, its
    target and the likely cause."""


@dataclass
class EffectCheck:
    """Result of :func:`check_parameter_effects`.

    Attributes:
        unobservable: free nuisance parameters whose value does not change the training rollouts
            (held at their start value by the loop).
        rollouts: twin rollouts the check cost (diagnostic).
        probed: parameters that needed evaluations at their bounds.
    """

    unobservable: list[str] = field(default_factory=list)
    rollouts: int = 0
    probed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"unobservable": list(self.unobservable), "rollouts": self.rollouts, "probed": list(self.probed)}


def _changes(a: Evaluation, b: Evaluation, real) -> bool | None:
    """True when the two evaluations' training samples differ by more than :data:`NO_EFFECT`,
    None when either failed (nothing can be concluded)."""
    if a.failed or b.failed:
        return None
    va, vb = trajectory_vector(a.sim, real), trajectory_vector(b.sim, real)
    if va.shape != vb.shape:
        return True
    d = np.abs(va - vb)
    finite = np.isfinite(va) & np.isfinite(vb)
    return bool(np.any(d[finite] > NO_EFFECT) or np.any(np.isfinite(va) != np.isfinite(vb)))


def check_parameter_effects(objective: TrialObjective, parameters: ParameterSet, point: Mapping[str, float], *,
                            report: IdentifiabilityReport | None = None,
                            explain: Callable[[str], str] | None = None) -> EffectCheck:
    """Check that every free parameter of ``parameters`` changes ``objective``'s training rollouts.

    Args:
        objective: the training trials (twin, excitations, real trajectories for the sample mask).
        parameters: the spec; its free parameters are checked.
        point: the start point (full values, SI).
        report: the identifiability check at ``point``, if it ran: a parameter with a non-zero
            sensitivity there needs no further rollout.
        explain: ``name -> likely cause`` of a parameter without effect (the twin's
            ``no_effect_cause``), or None.

    Returns:
        :class:`EffectCheck` (the nuisance parameters without effect, the rollouts spent).

    Raises:
        ParameterEffectError: a free physics parameter gives identical training rollouts at its
            bounds and at the probe points; the message names it, its target and the likely cause.
    """
    point = parameters.complete(point)
    out = EffectCheck()
    real = objective.real

    def ev(values: Mapping[str, float]) -> Evaluation:
        e, _ = objective.evaluate(values)
        out.rollouts += e.rollouts
        return e

    free = parameters.free_names
    sens = dict(report.sensitivity_px) if report is not None else {}
    todo = [n for n in free if not (np.isfinite(sens.get(n, np.nan)) and sens[n] > NO_EFFECT)]
    if not todo:
        return out
    base: Evaluation | None = None
    if report is None:  # one evaluation per parameter: its farther bound against the start point
        base = ev(point)
        kept = []
        for n in todo:
            s = parameters[n]
            far = s.lower if s.to_unit(point[n]) > 0.5 else s.upper
            if _changes(base, ev({**point, n: far}), real) is False:
                kept.append(n)
        todo = kept
    for n in todo:
        out.probed.append(n)
        s = parameters[n]
        others = [point] + [parameters.from_unit_vector(np.full(len(free), u), point) for u in _OTHER_POINTS]
        seen = False
        for at in others:
            changed = _changes(ev({**at, n: s.lower}), ev({**at, n: s.upper}), real)
            if changed is not False:  # an effect, or a failed rollout (no evidence of none)
                seen = True
                break
        if seen:
            continue
        if s.kind == "physics":
            cause = (explain(n) if explain is not None else "") or _GENERIC_CAUSE
            raise ParameterEffectError(
                f"free parameter '{n}' (target {s.target or 'none'}) at {s.lower:g} and {s.upper:g} {s.unit} gives "
                f"identical training rollouts: {cause}; fix the target, freeze the parameter, or add a trial that "
                "excites it")
        out.unobservable.append(n)
    return out
