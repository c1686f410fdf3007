"""Where a calibration's time and rollouts go, phase by phase.

A :class:`PhaseLedger` splits a run into consecutive named phases (the start checks, the
iterations, the final identifiability check, the holdout score, the residual diagnosis, the
report's trial curves, writing the results) and records for each its wall time
(``time.perf_counter``), its CPU time (``time.process_time``: this process, all its threads;
the CPU of executor worker processes or Ray actors is not included) and the rollouts it spent,
charged to the calibration's budget and diagnostic (not charged) apart. Every rollout of the
run falls into exactly one phase, so the phases' rollouts add up to the run's totals.
"""

from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["PhaseLedger", "phase_summary_line"]


class PhaseLedger:
    """Consecutive phases of one run (module docstring).

    Args:
        counts: ``() -> (charged rollouts, diagnostic rollouts)`` so far (the session's meters);
            None counts none (phases before a calibration session exists, :meth:`count_with`).
        clock, cpu: wall and CPU clocks in s (injectable for tests).
    """

    def __init__(self, counts: Callable[[], tuple[int, int]] | None = None, *,
                 clock: Callable[[], float] = time.perf_counter, cpu: Callable[[], float] = time.process_time) -> None:
        self._counts, self._clock, self._cpu = counts or (lambda: (0, 0)), clock, cpu
        self.phases: dict[str, dict[str, float]] = {}
        self._open: tuple[str, float, float, int, int] | None = None

    def start(self, name: str) -> None:
        """End the open phase (if any) and open ``name`` (a name met again adds to its totals)."""
        self.stop()
        charged, diagnostic = self._counts()
        self._open = (name, self._clock(), self._cpu(), charged, diagnostic)

    def stop(self) -> None:
        """End the open phase (no-op when none is open)."""
        if self._open is None:
            return
        name, w0, c0, r0, d0 = self._open
        charged, diagnostic = self._counts()
        row = self.phases.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0, "charged_rollouts": 0,
                                            "diagnostic_rollouts": 0})
        row["wall_s"] += self._clock() - w0
        row["cpu_s"] += self._cpu() - c0
        row["charged_rollouts"] += charged - r0
        row["diagnostic_rollouts"] += diagnostic - d0
        self._open = None

    def add_rollouts(self, charged: int = 0, diagnostic: int = 0) -> None:
        """Add rollouts the meters did not see (e.g. a start stage run before the session existed) to the
        open phase.

        Raises:
            RuntimeError: no phase is open.
        """
        if self._open is None:
            raise RuntimeError("PhaseLedger.add_rollouts: no phase is open")
        name, w0, c0, r0, d0 = self._open
        self._open = (name, w0, c0, r0 - int(charged), d0 - int(diagnostic))

    def count_with(self, counts: Callable[[], tuple[int, int]]) -> None:
        """Read the rollout meters from ``counts`` from now on (a calibration session adopting a ledger its
        caller started: the open phase keeps the counts it started with, from the old meters)."""
        if self._open is not None:  # rebase the open phase: what it counted so far carries over
            name, w0, c0, r0, d0 = self._open
            (r_old, d_old), (r_new, d_new) = self._counts(), counts()
            self._open = (name, w0, c0, r_new - (r_old - r0), d_new - (d_old - d0))
        self._counts = counts

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{phase: {"wall_s", "cpu_s", "charged_rollouts", "diagnostic_rollouts"}}`` in run order (s, s, counts)."""
        return {k: dict(v) for k, v in self.phases.items()}


def phase_summary_line(phases: dict[str, Any] | None) -> str | None:
    """One line for the terminal: the run's wall and CPU time and rollouts, charged and diagnostic
    apart, and the phase that took the most wall time; None without phases (an older run)."""
    if not phases:
        return None
    phases = {k: v for k, v in phases.items() if isinstance(v, dict)}
    if not phases:
        return None
    wall = sum(float(v.get("wall_s", 0.0)) for v in phases.values())
    cpu = sum(float(v.get("cpu_s", 0.0)) for v in phases.values())
    diag = sum(int(v.get("diagnostic_rollouts", 0)) for v in phases.values())
    top = max(phases, key=lambda k: float(phases[k].get("wall_s", 0.0)))
    # each phase that charged rollouts to the budget with its own count (the iterations first, then e.g. a
    # multistart): one total beside the iterations' time would give them rollouts they did not make
    charging = ["iterations"] + [k for k, v in phases.items()
                                 if k != "iterations" and int(v.get("charged_rollouts", 0))]
    charged = ", ".join(f"{k} {float((phases.get(k) or {}).get('wall_s', 0.0)):.1f} s for "
                        f"{int((phases.get(k) or {}).get('charged_rollouts', 0))} charged rollouts" for k in charging)
    return (f"time: {wall:.1f} s wall, {cpu:.1f} s CPU; {charged}, diagnostics {diag} rollouts; longest phase: "
            f"{top} ({float(phases[top]['wall_s']):.1f} s) (result.json: phases)")
