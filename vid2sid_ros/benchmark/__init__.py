"""Benchmarks: do the calibrators recover a hidden truth, and how do they fail on a wrong model?

Above :mod:`vid2sid_ros.calibration` (it imports calibration; calibration never imports it):

- :mod:`.sim2sim` — stand-in "real" trials made by a twin at hidden parameters;
- :mod:`.misspecification` — stand-ins that differ from the twin in named, documented ways;
- :mod:`.run` — :func:`run_benchmark`: methods x seeds on a rig, scored against the truth;
- :mod:`.sweep` — a benchmark's cells on the rollout executor (threads, processes, Ray).

The main names are importable from here lazily (``from vid2sid_ros.benchmark import
run_benchmark``) so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_benchmark": ".run",
    "draw_ground_truth": ".sim2sim",
    "make_sim2sim_trial": ".sim2sim",
    "sim2sim_stand_in": ".sim2sim",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
