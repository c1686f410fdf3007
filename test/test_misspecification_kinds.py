"""The misspecification kinds mass, deadzone, backlash and focal change the stand-in real side as documented."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from vid2sid_ros.benchmark.misspecification import (MisspecificationError, apply_model_changes, command_transform,
                                                    mass_target, parse_misspecify, perturb_real_twin)
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.sim.registry import make_rig


@pytest.fixture(scope="module")
def finger():
    return make_rig("finger")


def _clean(rig, truth):
    return make_sim2sim_trial(rig, truth, seed=0, noise="none")


def test_parse_new_kinds_defaults_and_bounds():
    assert parse_misspecify("mass,deadzone,backlash,focal") == {"mass": 0.2, "deadzone": 0.3, "backlash": 0.2,
                                                                "focal": 0.03}
    for bad in ("mass=-1", "deadzone=1.0", "backlash=-0.1", "focal=0.6"):
        with pytest.raises(MisspecificationError, match=bad.split("=")[0]):
            parse_misspecify(bad)


def test_mass_scales_the_middle_link_mass_and_inertia(finger):
    tw = finger.make_twin()
    assert mass_target(tw.model) == "middle"
    b = mujoco.mj_name2id(tw.model, mujoco.mjtObj.mjOBJ_BODY, "middle")
    m0, i0 = float(tw.model.body_mass[b]), tw.model.body_inertia[b].copy()
    values, info = perturb_real_twin(tw, finger.parameters, finger.parameters.nominal(), {"mass": 0.2})
    tw.set_parameters(values)
    apply_model_changes(tw, info)
    assert info["mass"]["body"] == "middle"
    assert tw.model.body_mass[b] == pytest.approx(1.2 * m0)
    np.testing.assert_allclose(tw.model.body_inertia[b], 1.2 * i0)
    other = mujoco.mj_name2id(tw.model, mujoco.mjtObj.mjOBJ_BODY, "distal")
    assert tw.model.body_mass[other] == pytest.approx(finger.make_twin().model.body_mass[other])


def test_mass_changes_the_stand_in_keypoints(finger):
    truth = finger.parameters.nominal()
    a = _clean(finger, truth)
    b = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="mass=0.2")
    assert b.meta["misspecification"]["applied"]["mass"]["scale"] == pytest.approx(1.2)
    diff = np.nanmax(np.abs(a.train[1].keypoints - b.train[1].keypoints))
    assert diff > 0.1  # px: a heavier middle link moves the fingertips


def test_mass_unknown_body_refused(finger):
    tw = finger.make_twin()
    with pytest.raises(MisspecificationError, match="no body 'nope'"):
        perturb_real_twin(tw, finger.parameters, finger.parameters.nominal(), {"mass": 0.2}, mass_body="nope")


def test_command_transform_deadzone_and_backlash():
    u = np.array([[0.0], [0.2], [0.5], [-0.5], [-0.05]])
    np.testing.assert_allclose(command_transform(u, deadzone=np.array([0.1]))[:, 0], [0.0, 0.1, 0.4, -0.4, 0.0])
    tri = np.array([0.0, 1.0, 2.0, 1.0, 0.0, 1.0])[:, None]
    out = command_transform(tri, backlash=np.array([1.0]))[:, 0]  # play 1: follows 0.5 behind, holds at reversals
    np.testing.assert_allclose(out, [0.0, 0.5, 1.5, 1.5, 0.5, 0.5])


def test_deadzone_is_applied_to_the_real_side_commands(finger):
    truth = finger.parameters.nominal()
    b = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="deadzone=0.3")
    info = b.meta["misspecification"]["applied"]["deadzone"]
    peak = max(float(np.max(np.abs(e.values))) for v in finger.excitations.values() for e in v)
    assert list(info["width"].values())[0] == pytest.approx(0.3 * peak)
    # the stand-in equals the twin driven by the transformed commands
    tw = finger.make_twin()
    tw.set_parameters(truth)
    exc = finger.excitations["train"][0]
    from dataclasses import replace
    d = np.array([0.3 * peak])
    ref = tw.rollout(replace(exc, values=command_transform(exc.values, deadzone=d))).trajectory.keypoints
    np.testing.assert_allclose(b.train[0].keypoints, ref, atol=1e-9)
    assert np.nanmax(np.abs(ref - _clean(finger, truth).train[0].keypoints)) > 0.1


def test_backlash_changes_the_stand_in(finger):
    truth = finger.parameters.nominal()
    b = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="backlash=0.2")
    span = float(np.ptp(np.concatenate([e.values[:, 0] for v in finger.excitations.values() for e in v])))
    assert list(b.meta["misspecification"]["applied"]["backlash"]["width"].values())[0] == pytest.approx(0.2 * span)
    assert np.nanmax(np.abs(b.train[1].keypoints - _clean(finger, truth).train[1].keypoints)) > 0.1


def test_focal_scales_keypoints_about_the_principal_point_and_kinds_compose(finger):
    truth = finger.parameters.nominal()
    a = _clean(finger, truth)
    b = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="focal=0.03")
    cam = finger.make_twin().camera
    c = np.array([cam.cx, cam.cy])
    np.testing.assert_allclose(b.train[0].keypoints, c + 1.03 * (a.train[0].keypoints - c), atol=1e-9)
    both = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="mass=0.2,focal=0.03")
    assert set(both.meta["misspecification"]["applied"]) == {"mass", "focal"}
    m = make_sim2sim_trial(finger, truth, seed=0, noise="none", misspecify="mass=0.2")
    np.testing.assert_allclose(both.train[0].keypoints, c + 1.03 * (m.train[0].keypoints - c), atol=1e-9)


def test_mass_on_a_body_a_free_parameter_sets_makes_the_truth_the_real_sides_mass(tmp_path):
    import yaml

    from vid2sid_ros.rigs import load_rig
    from test_sim2sim_joint_trials import _write_rig

    _write_rig(tmp_path)
    rig = load_rig(tmp_path / "rig.yaml")  # one body 'ball', whose mass the free parameter 'mass' sets
    real = make_sim2sim_trial(rig, {"mass": 1.0}, seed=0, noise="none", misspecify="mass=0.2")
    applied = real.meta["misspecification"]["applied"]
    assert applied["mass"]["body"] == "ball"
    assert real.truth["mass"] == pytest.approx(1.2 * 2.0)  # 1.2 x the model's 2 kg, not the drawn 1 kg
    assert applied["truth_from_model"]["mass"] == {"field": "body_mass[1]", "target": "body_mass[ball]",
                                                   "drawn": 1.0, "real": pytest.approx(2.4)}
    doc = yaml.safe_load((tmp_path / "rig.yaml").read_text())
    doc["parameters"]["mass"]["target"] = "body_mass[ball]*2"
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(MisspecificationError, match=r"^--misspecify mass: changes body_mass\[1\] \(target "
                                                    r"'body_mass\[ball\]\*2'\), which free parameter 'mass' sets "
                                                    r"through 1 target\(s\) \(ratio 2\)"):
        make_sim2sim_trial(load_rig(tmp_path / "rig.yaml"), {"mass": 1.0}, seed=0, noise="none",
                           misspecify="mass=0.2")
