"""What a twin's rollout looks like to a given sensor: image px, 3-D points in m, joint coordinates.

A twin's :meth:`~vid2sid_ros.sim.base.Twin.rollout` returns image keypoints (px) as its
``trajectory``; the same rollout also holds the world positions of the keypoints
(``state["keypoints_world"]``, (T, K, 3) m — MuJoCo site/body/marker positions,
PyElastica points on the rod's centreline) and, for MuJoCo twins, the generalised
coordinates (``state["qpos"]``, (T, nq)). :func:`measure` turns a rollout into a
:class:`~vid2sid_ros.core.trajectory.Trajectory` of the same kind, names, unit and frame
as a real measurement, so that the objective compares like with like.

Frames: the twin's world frame is called ``"world"``; a real 3-D measurement in another
frame (a motion-capture volume) must be transformed into it first
(:func:`vid2sid_ros.io.mocap.load_mocap` takes the frame's pose).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.trajectory import Trajectory
from .base import RolloutResult, TwinError

__all__ = ["measure", "joint_coordinates", "points_world"]


def points_world(twin: Any, result: RolloutResult) -> np.ndarray:
    """World positions of the twin's keypoints, (T, K, 3) m, in ``twin.keypoint_names`` order.

    Raises:
        TwinError: the twin's rollouts carry no ``keypoints_world`` state.
    """
    pts = (result.state or {}).get("keypoints_world")
    if pts is None:
        raise TwinError(f"twin {type(twin).__name__} reports no 3-D keypoint positions "
                        "(state['keypoints_world']); it cannot be compared with 3-D point measurements")
    return np.asarray(pts, dtype=float)


def joint_units(model: Any) -> dict[str, str]:
    """``{joint name: unit}`` of a MuJoCo model's 1-dof joints: ``rad`` for hinges, ``m`` for slides (the
    units of ``sensor_msgs/JointState.position``); ``{}`` for anything that is not an ``MjModel``."""
    import mujoco

    if not isinstance(model, mujoco.MjModel):
        return {}
    out = {}
    for j in range(model.njnt):
        jt = int(model.jnt_type[j])
        if jt in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            out[model.joint(j).name] = "rad" if jt == int(mujoco.mjtJoint.mjJNT_HINGE) else "m"
    return out


def joint_coordinates(twin: Any, result: RolloutResult, names) -> tuple[np.ndarray, tuple[str, ...]]:
    """Coordinates of the named 1-dof joints of a MuJoCo twin, ((T, J), units).

    Revolute (hinge) joints are in rad, prismatic (slide) joints in m — the units of
    ``sensor_msgs/JointState.position``.

    Raises:
        TwinError: the twin is not a MuJoCo twin with ``state["qpos"]``, or a name is not
            a hinge/slide joint of its model (lists the joints it has).
    """
    import mujoco

    model = getattr(twin, "model", None)
    qpos = (result.state or {}).get("qpos")
    if not isinstance(model, mujoco.MjModel) or qpos is None:
        raise TwinError(f"twin {type(twin).__name__} reports no joint coordinates (a MuJoCo model and "
                        "state['qpos']); it cannot be compared with joint measurements")
    have = joint_units(model)  # {name: unit} of the 1-dof joints, the model's order
    missing = [n for n in names if n not in have]
    if missing:
        raise TwinError(f"joint(s) {missing} are not hinge/slide joints of the model; it has: "
                        + (", ".join(have) or "none"))
    q = np.asarray(qpos, dtype=float)
    return q[:, [int(model.joint(n).qposadr[0]) for n in names]], tuple(have[n] for n in names)


def measure(twin: Any, result: RolloutResult, like: Trajectory) -> Trajectory:
    """The rollout as the sensor of ``like`` sees it.

    Args:
        twin: the twin that produced ``result``.
        result: one rollout.
        like: a real measurement; its ``kind`` picks what is read, its ``names`` which
            keypoints/joints (in its order).

    Returns:
        ``result.trajectory`` itself for image trajectories (unchanged); otherwise a new
        trajectory with the rollout's time and steps, ``source="sim"``, valid where finite.

    Raises:
        TwinError: the twin cannot produce that kind, a name it does not know, or a
            3-D measurement in a frame other than ``"world"``.
    """
    sim = result.trajectory
    if like.kind == "image":
        if sim.names != like.names and set(like.names) < set(sim.names):
            return sim.select(like.names)  # the real camera tracked a subset of the twin's keypoints
        return sim
    if like.kind == "points":
        if like.frame != "world":
            raise TwinError(f"3-D measurement of trial {like.trial_id!r} is in frame {like.frame!r}; "
                            "transform it into the twin's 'world' frame (mocap 'frame' pose in the rig config)")
        pts = points_world(twin, result)
        names = tuple(getattr(twin, "keypoint_names", sim.names))
        missing = [n for n in like.names if n not in names]
        if missing:
            raise TwinError(f"trial {like.trial_id!r}: marker(s) {missing} are not keypoints of the twin "
                            f"({', '.join(names)})")
        data = pts[:, [names.index(n) for n in like.names]]
        unit: Any = "m"
    else:
        q, units = joint_coordinates(twin, result, like.names)
        data, unit = q[:, :, None], units
    valid = np.all(np.isfinite(data), axis=2)
    return Trajectory(sim.time, data, valid, like.names, "sim", sim.trial_id, sim.steps, dict(sim.meta),
                      kind=like.kind, unit=unit, frame=like.frame)
