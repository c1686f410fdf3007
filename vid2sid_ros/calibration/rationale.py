"""Rationales a person reads first: one plain sentence per parameter moved.

Every proposer's rationale begins with these sentences ("raising joint_stiffness
0.3 → 0.42 N·m/rad (+40 %): the twin rang 8 % slower than the robot"), and the numeric
trace of the step follows. :func:`moved_sentences` builds them from the values before
and after a move; :func:`lead_with_moves` puts them in front of an existing rationale.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ..core.parameters import ParameterSet

__all__ = ["moved_sentences", "lead_with_moves", "format_value"]


def format_value(x: float, unit: str) -> str:
    """``0.42 N·m/rad``: three significant digits and the unit (``1`` = dimensionless, omitted)."""
    u = "" if unit in ("", "1") else unit.replace("*", "·")
    return f"{x:.3g} {u}".strip()


def moved_sentences(parameters: ParameterSet, before: Mapping[str, float], after: Mapping[str, float], *,
                    observation: str = "", evidence: Mapping[str, str] | None = None,
                    relative_tolerance: float = 1e-6) -> list[str]:
    """One sentence per free parameter whose value changed by more than ``relative_tolerance``.

    Args:
        parameters: the specs (units, kind).
        before, after: values ``{name: value}`` (SI) before and after the move.
        observation: what was seen for the move as a whole (e.g. "the training MAE fell
            4.1 → 0.9 px"); it follows the parameter sentences as one sentence of its own.
        evidence: ``{name: text}`` per-parameter observation (takes precedence).
        relative_tolerance: relative change (of the parameter's range) below which a
            parameter counts as unmoved.

    Returns:
        sentences, free-parameter order (then the observation); empty if nothing moved.
    """
    out: list[str] = []
    for s in parameters.free:
        if s.name not in before or s.name not in after:
            continue
        a, b = float(before[s.name]), float(after[s.name])
        if not (math.isfinite(a) and math.isfinite(b)):
            continue
        if abs(b - a) <= relative_tolerance * max(abs(s.upper - s.lower), 1e-300):
            continue
        verb = "raising" if b > a else "lowering"
        rel = f" ({100 * (b - a) / abs(a):+.1f} %)" if a != 0 else ""
        why = (evidence or {}).get(s.name)
        kind = " (a measurement nuisance, not physics)" if s.kind == "nuisance" else ""
        sentence = f"{verb.capitalize()} {s.name}{kind} {format_value(a, s.unit)} → {format_value(b, s.unit)}{rel}"
        out.append(sentence + (f": {why}." if why else "."))
    if out and observation:
        out.append(observation[0].upper() + observation[1:] + ".")
    return out


def lead_with_moves(rationale: str, parameters: ParameterSet, before: Mapping[str, float],
                    after: Mapping[str, float], *, observation: str = "",
                    evidence: Mapping[str, str] | None = None) -> str:
    """``rationale`` with :func:`moved_sentences` in front, separated by ``" Trace: "``.

    Returns the rationale unchanged when nothing moved.
    """
    lead: Sequence[str] = moved_sentences(parameters, before, after, observation=observation, evidence=evidence)
    if not lead:
        return rationale
    return " ".join(lead) + " Trace: " + rationale
