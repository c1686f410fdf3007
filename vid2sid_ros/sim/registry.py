"""Built-in twins by name (mujoco_playground style: a name -> ``make_rig(**options)``).

These are the twins shipped with the package; a rig config selects one with
``model: {builtin: NAME}`` (options in ``model.options``). Rigs themselves — built-in or a
user's — are rig configs read by :func:`vid2sid_ros.rigs.load_rig`; the built-in rig
names (``finger``, ``tentacle``, ``tentacle_water``, ``pendulum``) resolve to configs in
``vid2sid_ros/rigs/builtin/``. The registry holds package code only: a config cannot
name arbitrary code here.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.rig import Rig, UnknownRigError

__all__ = ["Rig", "BUILTIN_TWINS", "make_rig", "available_twins", "UnknownRigError"]

#: built-in twin name -> "module:function" (package code) returning a Rig; imported lazily.
BUILTIN_TWINS: dict[str, str] = {
    "finger": "vid2sid_ros.sim.mujoco_finger:make_rig",
    "tentacle": "vid2sid_ros.sim.elastica_tentacle:make_rig",
    "tentacle_water": "vid2sid_ros.sim.elastica_tentacle:make_water_rig",
    "toy": "vid2sid_ros.sim.toy:make_rig",
}


def available_twins() -> list[str]:
    """Built-in twin names."""
    return list(BUILTIN_TWINS)


def make_rig(name: str, **options: Any) -> Rig:
    """Build a built-in twin's rig (its parameters, excitations and tracker); ``options``
    update its default config.

    Raises:
        UnknownRigError: if ``name`` is not a built-in twin (lists the valid names).
    """
    if name not in BUILTIN_TWINS:
        raise UnknownRigError(f"unknown built-in twin {name!r}; valid: {', '.join(BUILTIN_TWINS)}")
    mod, fn = BUILTIN_TWINS[name].split(":")
    return getattr(importlib.import_module(mod), fn)(**options)
