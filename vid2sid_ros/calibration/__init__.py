"""Calibration: fit a twin's physics parameters to a real trial, and explain each move.

The pipeline, by module (the real trial itself, :class:`RealTrial`, is
:mod:`vid2sid_ros.core.trial`):

- :mod:`.objective` — :class:`TrialObjective`: run the twin, compare in the measurement's unit;
- :mod:`.nuisance` and :mod:`.tracker_bias` — the measurement model: latency, marker offsets,
  the tracker's bias measured on the twin;
- :mod:`.proposers` — the one proposer interface (:mod:`.proposers.proposer`) and the
  :func:`make_proposer` registry: ``reasoner`` (offline, default; :mod:`.proposers.signatures`,
  :mod:`.proposers.rationale`), the black-box baselines (:mod:`.proposers.baselines`), the
  least-squares peers (:mod:`.proposers.peers`) and the vision-language proposers
  (:mod:`.proposers.vlm`: ``gemini``, ``openai-compatible``);
- :mod:`.start` — where a calibration starts (a global stage, named guesses);
- :mod:`.effects` and :mod:`.identifiability` — does every parameter move the rollout, can the
  excitation tell them apart, and the intervals of what was identified;
- :mod:`.loop` — :func:`run_calibration`: budget, history, resume, result files
  (:mod:`.run_lock`, :mod:`.fingerprint`, :mod:`.phases`, :mod:`.trial_curves`);
- :mod:`.diagnosis` — which candidate cause explains the residual;
- :mod:`.design` and :mod:`.active` — experiment design: the trial that separates what the
  data cannot, and the active-learning loop that runs it;
- :mod:`.executor` and :mod:`.batch` — independent rollouts on threads, processes or a Ray
  cluster, with the serial results.

Benchmarks (sim2sim stand-ins, misspecification, sweeps) are :mod:`vid2sid_ros.benchmark`, a
floor above this one; the domain-randomisation export is :mod:`vid2sid_ros.report.randomization`.

The main names are importable from here lazily (``from vid2sid_ros.calibration import
run_calibration``) so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RealTrial": "..core.trial",
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
    "make_executor": ".executor",
    "Executor": ".executor",
    "ExecutorError": ".executor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
