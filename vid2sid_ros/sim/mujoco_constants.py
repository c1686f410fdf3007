"""Constants MuJoCo derives at compile time, recomputed after in-place parameter writes.

A compiled ``MjModel`` holds, next to the fields a user sets (``body_mass``, ``body_inertia``,
``dof_armature``, ``body_pos`` ...), fields MuJoCo derives from them when it compiles the model:
the diagonal of the joint-space inertia at ``qpos0`` (``dof_M0``), inverse weights, subtree
masses, reference lengths, bounding volumes. With MuJoCo 4 the forward dynamics of a *simple*
body (one whose joint-space inertia is diagonal, e.g. a body on a single slide joint) read the
inertia from ``dof_M0``: writing ``body_mass`` or ``dof_armature`` in place then changes
nothing at all until ``mj_setConst`` recomputes the derived fields (measured: a slide-joint
ball with its mass doubled rolls out identically before ``mj_setConst``). Other bodies read the
mass at every step but the constraint solver's weights (``dof_invweight0`` ...) stay stale.

:func:`refresh_constants` is therefore called after every write of MjModel fields (the twins'
``set_parameters``, the randomisation export): ``mj_setConst``, so the model in memory
simulates exactly like the same values compiled from a file (the exported calibrated model).
Cost: about 2 µs on the three-joint finger, once per parameter write, against milliseconds
per rollout.

:data:`DERIVED_FIELDS` lists the fields ``mj_setConst`` overwrites (measured on MuJoCo 4.0 by
perturbing every real-valued field and calling it; ``test/test_parameter_targets.py`` repeats
the measurement). A parameter target naming one of them would be overwritten by the next
refresh, so it is refused with the field it derives from.
"""

from __future__ import annotations

import mujoco

from .base import TwinError

__all__ = ["DERIVED_FIELDS", "refresh_constants", "derived_field_problem"]

#: MjModel field -> what MuJoCo derives it from (rewritten by ``mj_setConst``)
DERIVED_FIELDS: dict[str, str] = {
    "dof_M0": "body_mass, body_inertia, body_ipos and dof_armature",
    "dof_invweight0": "the masses and inertias",
    "body_invweight0": "the masses and inertias",
    "body_subtreemass": "body_mass",
    "tendon_invweight0": "the masses and inertias",
    "tendon_length0": "the tendon path at qpos0",
    "actuator_acc0": "the masses, inertias and actuator gear",
    "actuator_length0": "the actuator transmission at qpos0",
    "dof_length": "the kinematic tree",
    "body_margin": "the geoms' margins",
    "geom_rbound": "geom_size",
    "geom_aabb": "geom_size",
    "bvh_aabb": "geom_size and the geoms' poses",
    "cam_pos0": "cam_pos",
    "cam_mat0": "cam_quat",
    "cam_poscom0": "cam_pos and the body masses",
    "light_pos0": "light_pos",
    "light_dir0": "light_dir",
    "light_poscom0": "light_pos and the body masses",
    "flexedge_invweight0": "the flex masses",
}


def derived_field_problem(field: str) -> str | None:
    """Why a parameter cannot target ``field`` (None when it can): MuJoCo derives it from
    other fields and rewrites it after every parameter write (:data:`DERIVED_FIELDS`)."""
    src = DERIVED_FIELDS.get(field)
    if src is None:
        return None
    return (f"'{field}' is derived by MuJoCo from {src} and recomputed after every parameter write; "
            "target the field it derives from instead")


def refresh_constants(model: mujoco.MjModel, data: mujoco.MjData | None = None) -> None:
    """Recompute the compile-time constants of ``model`` after in-place field writes.

    Calls ``mujoco.mj_setConst`` (it evaluates the model at ``qpos0`` in ``data``, whose state
    it overwrites: pass a scratch ``MjData``; default a new one). ``model.stat`` is left as
    compiled: MuJoCo 4 says its statistics do not affect the simulation.

    Args:
        model: compiled model, changed in place.
        data: scratch data of ``model`` (its state is overwritten), or None.

    Raises:
        TwinError: MuJoCo refuses the values (``body_ipos`` / ``body_iquat`` written on a body
            compiled as ``simple``: compile it with ``<body simple="false">``; the user-model twin
            does so for the bodies its targets move).
    """
    try:
        mujoco.mj_setConst(model, data if data is not None else mujoco.MjData(model))
    except mujoco.FatalError as err:  # e.g. a centre of mass moved on a body compiled as "simple"
        raise TwinError(f"MuJoCo refuses the written parameter values: {err}") from None
