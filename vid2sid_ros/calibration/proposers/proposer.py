"""The one proposer interface (``../shared/design.md``, "Proposers").

``propose(context) -> Proposal``. A proposer sees the parameter specs, the current
values, the history of earlier iterations, the current metrics and (for VLMs) the
paired videos. Proposers that search (baselines, the reasoner's local refinement) may
call ``context.evaluate(values)``, which runs the twin on the training excitations and
is metered against the rollout budget by the calibration loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from ...core.parameters import ParameterSet
from ...core.trajectory import Trajectory

__all__ = ["Proposal", "ProposalContext", "Evaluation", "IterationRecord", "Proposer", "BudgetExhausted"]


class BudgetExhausted(RuntimeError):
    """Raised by ``ProposalContext.evaluate`` when the rollout budget is spent."""


@dataclass
class Evaluation:
    """Result of evaluating one parameter vector on the training excitations.

    Attributes:
        values: the full parameter dict evaluated (SI units).
        error_px: mean pixel MAE over training trials (px); ``inf`` if it failed.
        per_keypoint_px: ``{keypoint: MAE px}`` averaged over trials.
        sim: the sim trajectories, one per training trial (same order as ``real``).
        failed: True if a rollout diverged or raised; ``message`` says why.
        rollouts: number of twin rollouts this evaluation cost.
    """

    values: dict[str, float]
    error_px: float
    per_keypoint_px: dict[str, float] = field(default_factory=dict)
    sim: list[Trajectory] = field(default_factory=list)
    failed: bool = False
    message: str = ""
    rollouts: int = 0


@dataclass
class IterationRecord:
    """One completed calibration iteration (one line of ``iterations.jsonl``)."""

    iteration: int
    proposer: str
    values: dict[str, float]
    error_px: float
    per_keypoint_px: dict[str, float]
    rationale: str
    confidence: float
    rollouts_used: int
    wall_s: float
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProposalContext:
    """Everything a proposer may look at for one iteration.

    Attributes:
        parameters: specs (name, unit, bounds, meaning); only ``parameters.free`` may move.
        current: current full parameter values ``{name: value}``.
        current_eval: evaluation at ``current`` (metrics, sim trajectories).
        real: real trajectories of the training trials, aligned with ``current_eval.sim``.
        history: earlier iterations, oldest first.
        iteration: 0-based index of the iteration being proposed.
        evaluate: meter-charged evaluation callback, or None when searching is not allowed.
        rollouts_remaining: rollouts left in the budget (each evaluation costs one per
            training trial).
        iterations_remaining: iterations left including this one.
        videos: optional ``{"sim": Path, "real": Path, "overlay": Path}`` mp4 files.
        rig: free-form rig description (name, what the keypoints are).
        rng_seed: seed for stochastic proposers (deterministic runs).
        excitations: the commanded training excitations, aligned with ``real`` (for
            signatures such as the lag behind the command); may be empty.
        evaluate_many: ``[values] -> [Evaluation]``: the same as ``evaluate`` on each in turn
            (same results, same charges, ``BudgetExhausted`` where ``evaluate`` would raise it),
            run concurrently on the calibration's executor; None where searching is not allowed.
    """

    parameters: ParameterSet
    current: dict[str, float]
    current_eval: Evaluation
    real: Sequence[Trajectory]
    history: Sequence[IterationRecord] = ()
    iteration: int = 0
    evaluate: Callable[[Mapping[str, float]], Evaluation] | None = None
    rollouts_remaining: int = 0
    iterations_remaining: int = 1
    videos: Mapping[str, Path] = field(default_factory=dict)
    rig: Mapping[str, Any] = field(default_factory=dict)
    rng_seed: int = 0
    excitations: Sequence[Any] = ()
    evaluate_many: Callable[[Sequence[Mapping[str, float]]], list[Evaluation]] | None = None


@dataclass
class Proposal:
    """A proposer's answer.

    Attributes:
        values: proposed values ``{name: value}`` for some or all free parameters
            (SI units); missing names keep their current value.
        rationale: plain-language reason for the move.
        confidence: in [0, 1].
        excitation_change: optional active-learning request, e.g.
            ``{"amplitude_gain": 1.5}``; applied only when the loop enables it.
        diagnosis: optional per-parameter notes ``{name: text}``.
        best_evaluation: when the proposer already evaluated ``values`` (search-based
            proposers), the evaluation, so the loop does not pay for it twice.
        notes: what happened while proposing that a reader of ``iterations.jsonl``
            should know (reply repaired, value clamped, fallback used...); the loop
            appends them to ``IterationRecord.notes``.
        extra: JSON-ready extras for the iteration record (token usage, cost in USD,
            model name, fallback reason...); the loop copies them into
            ``IterationRecord.extra``.
        converged: the proposer judges the fit converged at ``values`` (its own test); the loop
            records the iteration and stops with ``stopped = "converged"`` instead of
            spending further iterations. Set it only after a convergence test (the
            reasoner's: :func:`~vid2sid_ros.calibration.proposers.reasoner.first_order_test` on a freshly
            measured Jacobian).
        stalled: why the proposer has no move left although its convergence test fails
            (e.g. every step rejected at the smallest finite-difference step), or ""; the loop
            stops with ``stopped = "stalled: <why>"`` (not converged).
        state: optional JSON-serialisable proposer memory (e.g. the reasoner's
            Jacobian). The loop stores it with the iteration (record
            ``extra["proposer_state"]``, kept in ``run_dir/proposer_state/``) and hands it
            back through ``context.history``; a proposer that keeps its memory there
            (and nowhere else) resumes an interrupted run exactly.
    """

    values: dict[str, float]
    rationale: str
    confidence: float = 0.5
    excitation_change: dict[str, float] | None = None
    diagnosis: dict[str, str] = field(default_factory=dict)
    best_evaluation: Evaluation | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] | None = None
    converged: bool = False
    stalled: str = ""


@runtime_checkable
class Proposer(Protocol):
    """``name`` plus ``propose(context) -> Proposal``; may raise, the loop records it."""

    name: str

    def propose(self, context: ProposalContext) -> Proposal: ...
