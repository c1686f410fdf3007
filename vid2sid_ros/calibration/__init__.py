"""Calibration: fit a twin's physics parameters to a real trial, and explain each move.

The pipeline, by module:

- :mod:`.observation` — :class:`RealTrial`: what the robot did (trajectories per excitation);
- :mod:`.objective` — :class:`TrialObjective`: run the twin, compare in px (the paper's MAE);
- :mod:`.proposer` — the one proposer interface (context -> proposal, rationale, confidence);
- :mod:`.proposers` — :func:`make_proposer` registry: ``reasoner`` (offline, default),
  ``random``, ``nelder-mead``, ``golden-cd``, ``bo``, ``cmaes``, ``gemini``, ``openai-compatible``;
- :mod:`.signatures` and :mod:`.reasoner` — the offline reasoner's measurements and moves;
- :mod:`.baselines` — the black-box baselines;
- :mod:`.identifiability` — can the excitation tell the parameters apart;
- :mod:`.loop` — :func:`run_calibration`: budget, history, resume, result files;
- :mod:`.sim2sim` and :mod:`.benchmark` — hidden-truth validation across methods;
- :mod:`.executor`, :mod:`.batch` and :mod:`.sweep` — independent rollouts and benchmark cells on
  threads, processes or a Ray cluster, with the serial results;
- :mod:`.phases` — wall time, CPU time and rollouts of each phase of a run.

The main names are importable from here lazily (``from vid2sid_ros.calibration import
run_calibration``) so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RealTrial": ".observation",
    "TrialObjective": ".objective",
    "CalibrationConfig": ".loop",
    "CalibrationResult": ".loop",
    "CalibrationError": ".loop",
    "run_calibration": ".loop",
    "load_history": ".loop",
    "make_proposer": ".proposers",
    "available_proposers": ".proposers",
    "check_identifiability": ".identifiability",
    "IdentifiabilityWarning": ".identifiability",
    "IdentifiabilityReport": ".identifiability",
    "draw_ground_truth": ".sim2sim",
    "make_sim2sim_trial": ".sim2sim",
    "run_benchmark": ".benchmark",
    "make_executor": ".executor",
    "Executor": ".executor",
    "ExecutorError": ".executor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
