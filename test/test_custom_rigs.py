"""The three rigs of examples/rigs (none built in): each loads through the one rig loader, renders
with MuJoCo through its camera, is tracked, and calibrates in sim2sim with a small budget.

The full 5-seed figures are in docs/benchmarks.md (``bench/bench_custom_rigs.py``); these runs use one
seed and a smaller budget, with thresholds several times looser than the measured errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.benchmark.run import run_benchmark
from vid2sid_ros.rigs import load_rig

RIGS = Path(__file__).resolve().parents[1] / "examples" / "rigs"


def _physics_error(rig, rec) -> float:
    phys = [n for n in rig.parameters.free_names if rig.parameters[n].kind == "physics"]
    return float(np.mean([rec["rel_error"][n] for n in phys]))


def _prefix(exc, fraction: float, seconds: float = 9.0):
    """The first ``fraction * seconds`` of an excitation (meta kept: trial, init, scoring start)."""
    from vid2sid_ros.core.excitation import Excitation

    n = int(round(fraction * seconds * exc.rate))
    meta = dict(exc.meta)
    if "scored_from_frame" in meta:
        meta["scored_from_frame"] = int(round(0.6 * seconds * exc.rate))
    return Excitation(exc.name, exc.rate, exc.values[:n], exc.actuator_names, meta)


def _bench(rig, budget: int, seed: int = 0):
    res = run_benchmark(rig, ["reasoner"], [seed], budget=budget, iterations=10, noise="camera", out=None,
                        progress=False)
    seed_rec = res["per_seed"][0]
    return seed_rec, seed_rec["methods"]["reasoner"]


def test_urdf_arm_mesh_links_gain_damping_friction():
    rig = load_rig(RIGS / "urdf_arm" / "rig.yaml")
    twin = rig.make_twin()
    assert twin.model.nmesh == 3 and twin.actuator_names == ("shoulder_motor", "elbow_motor")
    assert set(rig.parameters.free_names) == {"shoulder_gain", "elbow_gain", "shoulder_damping", "elbow_damping",
                                              "shoulder_friction", "elbow_friction"}
    exc = rig.excitations["train"][0]
    assert exc.values.shape[1] == 2 and np.all(np.std(exc.values, axis=0) > 0.01)   # both motors driven
    seed_rec, rec = _bench(rig, budget=40)
    tracking = next(iter(seed_rec["tracking"].values()))
    assert tracking["tracking_error_px_mean"] < 0.5                                  # rendered + tracked
    assert rec["initial_train_mae"] > 5 * rec["train_mae"]
    assert _physics_error(rig, rec) < 0.08, rec["rel_error"]                         # measured 1.8 % at 40


def test_spherical_pendulum_physics_with_the_camera_pose_free():
    rig = load_rig(RIGS / "spherical_pendulum" / "rig.yaml")
    free = rig.parameters.free_names
    assert {"camera_x", "camera_y", "camera_z", "camera_roll", "camera_pitch", "camera_yaw"} <= set(free)
    # test budget: the first 9 s of the 15 s swing (same 60/40 split), fewer rollouts
    rig.excitations = {part: [_prefix(e, 0.6 if part == "train" else 1.0) for e in sets]
                       for part, sets in rig.excitations.items()}
    seed_rec, rec = _bench(rig, budget=50, seed=1)
    assert _physics_error(rig, rec) < 0.03, rec["rel_error"]                         # measured 0.3 % (15 s)
    pose = [rec["rel_error"][n] for n in ("camera_x", "camera_y", "camera_z", "camera_pitch", "camera_yaw")]
    assert max(pose) < 0.03, rec["rel_error"]
    assert rec["holdout_mae"] < 0.5


def test_soft_trunk_three_trials_fitted_one_held_out():
    rig = load_rig(RIGS / "soft_trunk" / "rig.yaml")
    train, hold = rig.excitations["train"], rig.excitations["holdout"]
    assert [e.meta["trial"] for e in train] == ["bend_top", "bend_middle", "s_curve"]
    assert [e.meta["trial"] for e in hold] == ["hook"]
    twin = rig.make_twin()
    starts = np.stack([twin.rollout(e).state["qpos"][0] for e in train + hold])
    assert len({tuple(np.round(s, 6)) for s in starts}) == 4                         # four initial states
    seed_rec, rec = _bench(rig, budget=60)
    assert rec["holdout_mae"] is not None and rec["holdout_mae"] < 0.5         # the held-out trial
    assert _physics_error(rig, rec) < 0.05, rec["rel_error"]                         # measured 0.3 %


@pytest.mark.parametrize("name", ["urdf_arm", "spherical_pendulum", "soft_trunk"])
def test_rendered_markers_are_where_the_keypoints_project(name):
    """Each rig's first frame, rendered by MuJoCo through its camera, tracked by its own tracker."""
    from vid2sid_ros.perception import make_tracker

    rig = load_rig(RIGS / name / "rig.yaml")
    twin = rig.make_twin()
    exc = rig.excitations["train"][0]
    from vid2sid_ros.core.excitation import Excitation

    short = Excitation(exc.name, exc.rate, exc.values[:5], exc.actuator_names, exc.meta)
    res = twin.rollout(short, render=True)
    tracked = make_tracker(rig.tracker).track(res.frames, time=res.trajectory.time).select(res.trajectory.names)
    err = np.linalg.norm(tracked.keypoints - res.trajectory.keypoints, axis=2)
    assert tracked.valid.all() and np.max(err) < 1.0, err
    twin.close()
