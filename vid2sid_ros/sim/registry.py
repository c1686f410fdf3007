"""Registry of rigs (mujoco_playground style: a name -> ``make_rig(**overrides)``).

A :class:`Rig` bundles a twin factory, the parameter specification, named excitation
sets (``train``, ``holdout``) and the tracker configuration, so the CLI, the benchmark
and the ROS nodes all build a rig the same way from one name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from .base import Twin

__all__ = ["Rig", "RIGS", "make_rig", "available_rigs", "UnknownRigError"]


class UnknownRigError(KeyError):
    """The rig name is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass
class Rig:
    """A calibratable rig.

    Attributes:
        name: registry name (``finger``, ``tentacle``, ``tentacle_water``, ``pendulum``...).
        description: one paragraph for reports and VLM prompts (what moves, what the keypoints are).
        parameters: the parameter specification.
        excitations: ``{"train": [...], "holdout": [...]}``.
        make_twin: ``make_twin(**kwargs) -> Twin``; kwargs may include ``width``, ``height``.
        tracker: tracker configuration (kind, colours...), see ``vid2sid_ros.perception``.
        config: the full resolved configuration (for reports and reproducibility).
    """

    name: str
    description: str
    parameters: ParameterSet
    excitations: dict[str, list[Excitation]]
    make_twin: Callable[..., Twin]
    tracker: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


#: rig name -> "module:function" returning a Rig; imported lazily.
RIGS: dict[str, str] = {
    "finger": "vid2sid_ros.sim.mujoco_finger:make_rig",
    "tentacle": "vid2sid_ros.sim.elastica_tentacle:make_rig",
    "tentacle_water": "vid2sid_ros.sim.elastica_tentacle:make_water_rig",
    "pendulum": "vid2sid_ros.sim.pendulum:make_rig",
}


def available_rigs() -> list[str]:
    """Registered rig names."""
    return list(RIGS)


def make_rig(name: str, **overrides: Any) -> Rig:
    """Build a registered rig; ``overrides`` update its default config.

    Raises:
        UnknownRigError: if ``name`` is not registered (lists valid names).
    """
    if name not in RIGS:
        raise UnknownRigError(f"unknown rig {name!r}; valid rigs: {', '.join(RIGS)}")
    mod, fn = RIGS[name].split(":")
    return getattr(importlib.import_module(mod), fn)(**overrides)
