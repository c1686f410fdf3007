"""Rationales a person reads first: one plain sentence per parameter moved.

Every proposer's rationale begins with these sentences ("raising joint_stiffness
0.3 → 0.42 N·m/rad (+40 %): the twin rang 8 % slower than the robot"), and the numeric
trace of the step follows. :func:`moved_sentences` builds them from the values before
and after a move; :func:`lead_with_moves` puts them in front of an existing rationale.

The calibration loop passes every proposer's rationale through :func:`ensure_lead` (the
one place this rule is enforced): a rationale that already begins with one sentence per
moved parameter (the reasoner's, with the signature behind each move; the least-squares
peers') is kept as it is; any other (the black-box baselines' search summaries, a VLM's own
words) gets the measured sentences in front — the values before → after and what the
evaluation showed — and keeps its own text as the trace after ``" Trace: "``.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ...core.parameters import ParameterSet

__all__ = ["unit_text", "moved_sentences", "lead_with_moves", "format_value", "leads_with_moves", "ensure_lead",
           "TRACE_MARK", "truncate_text"]

#: what separates the lead sentences from the trace that follows them
TRACE_MARK = " Trace: "


def unit_text(unit: str) -> str:
    """A unit as every line a person reads spells it (terminal, report, rationale):
    ``N*m/rad`` -> ``N·m/rad``; ``1`` (dimensionless) -> ``""``. Config files and
    ``result.yaml`` keep the ASCII ``*`` they were written with."""
    return "" if unit in ("", "1") else str(unit).replace("*", "·")


def format_value(x: float, unit: str, digits: int = 3) -> str:
    """``0.42 N·m/rad``: ``digits`` significant digits and the unit (``1`` = dimensionless, omitted)."""
    return f"{x:.{digits}g} {unit_text(unit)}".strip()


def moved_sentences(parameters: ParameterSet, before: Mapping[str, float], after: Mapping[str, float], *,
                    observation: str = "", evidence: Mapping[str, str] | None = None,
                    relative_tolerance: float = 1e-6) -> list[str]:
    """One sentence per free parameter whose value changed by more than ``relative_tolerance``.

    Values are printed with as many significant digits (3 to 6) as it takes to tell before from
    after; a change below 6 digits is no move. The change is a percentage for a positive physical
    quantity, and the absolute change with its unit for a nuisance or a signed parameter.

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
        digits = next((d for d in range(3, 7) if f"{a:.{d}g}" != f"{b:.{d}g}"), None)
        if digits is None:  # below the printed resolution: "1.61 → 1.61" is no move to a reader
            continue
        verb = "raising" if b > a else "lowering"
        why = (evidence or {}).get(s.name)
        kind = " (a measurement nuisance, not physics)" if s.kind == "nuisance" else ""
        sentence = (f"{verb.capitalize()} {s.name}{kind} {format_value(a, s.unit, digits)} → "
                    f"{format_value(b, s.unit, digits)}{_change_text(s, a, b)}")
        out.append(sentence + (f": {why}." if why else "."))
    if out and observation:
        out.append(observation[0].upper() + observation[1:] + ".")
    return out


def _change_text(spec, a: float, b: float) -> str:
    """`` (+24.1 %)`` for a positive physical quantity (its lower bound >= 0); the absolute change with
    its unit (`` (+0.257 ms)`` as ``(+0.000257 s)``) for a signed one or a nuisance (latency, an offset:
    a percentage of a value near zero says nothing)."""
    if spec.kind != "nuisance" and spec.lower >= 0 and a > 0:
        pct = 100.0 * (b - a) / a
        return f" ({pct:+.1f} %)" if abs(pct) >= 0.1 else f" ({pct:+.2g} %)"
    return f" ({'+' if b > a else ''}{format_value(b - a, spec.unit)})"


def lead_with_moves(rationale: str, parameters: ParameterSet, before: Mapping[str, float],
                    after: Mapping[str, float], *, observation: str = "",
                    evidence: Mapping[str, str] | None = None) -> str:
    """``rationale`` with :func:`moved_sentences` in front, separated by ``" Trace: "``.

    Returns the rationale unchanged when nothing moved.
    """
    lead: Sequence[str] = moved_sentences(parameters, before, after, observation=observation, evidence=evidence)
    if not lead:
        return rationale
    return " ".join(lead) + TRACE_MARK + rationale


def _moved_names(parameters: ParameterSet, before: Mapping[str, float], after: Mapping[str, float],
                 relative_tolerance: float = 1e-6) -> list[str]:
    return [s.split(" ")[1] for s in moved_sentences(parameters, before, after, relative_tolerance=relative_tolerance)]


def leads_with_moves(rationale: str, parameters: ParameterSet, before: Mapping[str, float],
                     after: Mapping[str, float]) -> bool:
    """True when ``rationale`` begins with one sentence per moved free parameter (nothing moved: True).

    "Begins with": the text starts with a ``Raising …``/``Lowering …`` sentence, and before the
    trace (:data:`TRACE_MARK`, else the whole text) every moved parameter has a sentence
    ``Raising|Lowering NAME … → …``.
    """
    names = _moved_names(parameters, before, after)
    if not names:
        return True
    text = str(rationale or "")
    if not text.startswith(("Raising ", "Lowering ")):
        return False
    lead = text.partition(TRACE_MARK)[0]
    sentences = [x.strip() for x in lead.replace(". ", ".\n").splitlines()]
    return all(any(x.startswith((f"Raising {n} ", f"Lowering {n} ")) and "→" in x for x in sentences)
               for n in names)


def ensure_lead(rationale: str, parameters: ParameterSet, before: Mapping[str, float], after: Mapping[str, float], *,
                observation: str = "") -> str:
    """``rationale`` when it already :func:`leads_with_moves`, else :func:`lead_with_moves` with
    ``observation`` (what the evaluation of the move measured, with its numbers)."""
    text = str(rationale or "")
    if leads_with_moves(text, parameters, before, after):
        return text
    return lead_with_moves(text or "(the proposer gave no rationale)", parameters, before, after,
                           observation=observation)


def truncate_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters in all, ending ``" [truncated: N characters]"``
    (N = the original length) when cut; unchanged when it fits."""
    if len(text) <= limit:
        return text
    mark = f" [truncated: {len(text):,} characters]"
    return text[:max(limit - len(mark), 0)] + mark
