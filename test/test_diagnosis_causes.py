"""The residual diagnosis compares candidate causes: it names one only when it explains the residual clearly
better than the others, reports an indistinguishable set otherwise, names the camera's fixed fields for a
projection error, stays quiet on an unmodified rig, never proposes what is already free, and bounds a lag.

Small MuJoCo rigs built inline (one hinge link filmed from above by a pinhole camera), the real side made
from a deliberately different copy of the twin, and :func:`diagnose` called at the twin's values.
"""

from __future__ import annotations

import math
from dataclasses import replace

import mujoco
import numpy as np
import pytest

from vid2sid_ros.calibration.diagnosis import diagnose
from vid2sid_ros.calibration.diagnosis.causes import candidate_causes
from vid2sid_ros.calibration.diagnosis.context import ProbeContext
from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
from vid2sid_ros.sim.user_model import UserModelTwin

LINK = """
<mujoco model="link">
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 0 1" damping="0.02" stiffness="0.5" armature="0.0005"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.01" mass="0.2"/>
      <site name="tip" pos="0.2 0 0" size="0.01"/>
      <site name="mid" pos="0.1 0 0" size="0.01"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="hinge" gear="1"/></actuator>
</mujoco>
"""
CAMERA = {"width": 320, "height": 240, "fx": 400.0, "fy": 400.0, "cx": 159.5, "cy": 119.5,
          "pose": {"position": [0.0, 0.0, 1.0], "rpy": [0.0, math.pi / 2, 0.0]}}  # above the pivot, looking down
RATE = 30.0


def _spec(free=("damping",), stiffness=0.5, armature=0.0005):
    return ParameterSet((
        ParameterSpec("damping", "N*m*s/rad", 0.002, 0.2, 0.02, "joint damping", "dof_damping[hinge]", "log",
                      frozen="damping" not in free),
        ParameterSpec("stiffness", "N*m/rad", 0.05, 5.0, stiffness, "joint stiffness", "jnt_stiffness[hinge]", "log",
                      frozen="stiffness" not in free),
        ParameterSpec("armature", "kg*m^2", 1e-5, 0.01, armature, "rotor inertia", "dof_armature[hinge]", "log",
                      frozen="armature" not in free)))


def _twin(tmp_path, params, camera=CAMERA):
    path = tmp_path / "link.xml"
    path.write_text(LINK)
    return UserModelTwin(model=path, parameters=params, keypoints={"mid": "mid", "tip": "tip"}, camera=camera)


def _excitations(kind="rich"):
    t = np.arange(120) / RATE
    if kind == "slow_sine":  # one slow sinusoid: inertia and armature act alike
        return [Excitation("sine", RATE, (0.2 * np.sin(2 * np.pi * 0.4 * t))[:, None], ("m",))]
    step = np.where(t > 0.5, 0.3, 0.0)  # N·m: the link swings by about half a radian
    chirp = 0.2 * np.sin(2 * np.pi * (0.2 * t + 0.5 * t * t / 2))
    return [Excitation("step", RATE, step[:, None], ("m",)), Excitation("chirp", RATE, chirp[:, None], ("m",))]


def _real(twin, excs, values, seed=0, sigma=0.1, body_scale=None):
    """Trajectories of ``twin`` at ``values`` (optionally the link's mass and inertia × ``body_scale``), plus
    white pixel noise of ``sigma`` px."""
    rng = np.random.default_rng(seed)
    twin.set_parameters(values)
    m = twin.model
    saved = m.body_mass.copy(), m.body_inertia.copy()
    if body_scale is not None:
        m.body_mass[1] *= body_scale
        m.body_inertia[1] *= body_scale
        mujoco.mj_setConst(m, mujoco.MjData(m))
    out = []
    for e in excs:
        tr = twin.rollout(e).trajectory
        out.append(replace(tr, keypoints=tr.keypoints + rng.normal(0.0, sigma, tr.keypoints.shape), source="real"))
    m.body_mass[:], m.body_inertia[:] = saved
    mujoco.mj_setConst(m, mujoco.MjData(m))
    return out


def _diagnose(twin, params, excs, reals, values):
    return diagnose(TrialObjective(twin, excs, reals, params), values, parameters=params)


def _members(d):
    return [c for f in d.findings for c in f.evidence.get("causes", [])]


# -- (a) a wrong frozen parameter that alone explains the residual is named, its remedy checked -------------------
def test_a_wrong_frozen_stiffness_is_named_and_checked_on_held_out_time(tmp_path):
    params = _spec(free=("damping",), stiffness=0.5)
    twin = _twin(tmp_path, params)
    excs = _excitations()
    reals = _real(_twin(tmp_path, params), excs, {"damping": 0.02, "stiffness": 0.8, "armature": 0.0005})
    d = _diagnose(twin, params, excs, reals, {"damping": 0.02})
    assert d.verdict == "named", d.summary()
    f = d.warnings[0]
    assert f.kind == "frozen" and f.evidence["parameter"] == "stiffness", d.summary()
    assert f.evidence["points_to"] == pytest.approx(0.8, rel=0.1)  # the truth, 0.8 N·m/rad
    rec = d.recommendation
    assert rec["free"] == ["stiffness"] and rec["recommended"]
    assert rec["held_out"]["after"] < 0.5 * rec["held_out"]["before"]  # checked on the last 30 % of each trial
    assert "stiffness (frozen at 0.5 N·m/rad) is probably wrong" in f.message and "recommended" in f.message


# -- (b) two causes with the same effect on this excitation: indistinguishable, truth inside, none recommended --
def test_link_mass_and_joint_armature_on_a_slow_sine_are_reported_indistinguishable(tmp_path):
    params = _spec(free=("damping",))
    twin = _twin(tmp_path, params)
    excs = _excitations("slow_sine")
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    reals = _real(_twin(tmp_path, params), excs, truth, body_scale=1.2)  # the link 20 % heavier
    d = _diagnose(twin, params, excs, reals, {"damping": 0.02})
    assert d.verdict == "indistinguishable", d.summary()
    names = [c["cause"] for c in _members(d)]
    assert "mass of body 'link' (mass and inertia together)" in names  # the truth is in the set
    assert "frozen parameter 'armature'" in names
    assert d.recommendation is None and "None is recommended" in d.summary()
    assert "would separate them" in d.summary()


# -- (c) a projection error on a fixed camera names the camera's fields and what freeing them removes -------------
@pytest.mark.parametrize("error", ["focal", "position"])
def test_a_camera_error_on_a_fixed_camera_is_named_with_its_fields_unless_the_lens_ties_with_the_pose(tmp_path, error):
    params = _spec(free=("damping", "stiffness"))
    twin = _twin(tmp_path, params)
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    if error == "focal":  # the real lens's focal length 3 % longer than the config says
        real_twin = _twin(tmp_path, params, {**CAMERA, "fx": 412.0, "fy": 412.0})
    else:  # the real camera 6 cm off where the config puts it
        real_twin = _twin(tmp_path, params)
        real_twin.move_camera([0.04, -0.03, 0.03], [0.0, 0.0, 0.0])
    reals = _real(real_twin, excs, truth)
    d = _diagnose(twin, params, excs, reals, truth)
    if error == "focal":
        # a 3 % longer lens and the camera 3 % closer to this shallow scene fit it alike (was: named, with the
        # position freed): the pose and the focal length are listed together, neither is recommended
        assert d.verdict == "indistinguishable", d.summary()
        names = [c["cause"] for c in _members(d)]
        assert "camera focal length (fx and fy together)" in names and any("camera position" in n for n in names)
        assert d.recommendation is None and "a calibration target" in d.summary()
        assert [c["cause"] for c in d.causes] == names and d.set_size == len(names) <= 5
        return
    assert d.verdict == "named", d.summary()
    f = d.warnings[0]
    assert f.kind == "camera", d.summary()
    fields = f.evidence["camera_fields"]
    assert fields and all(x.startswith("camera.") for x in fields)
    assert f.evidence["share_removed"] > 0.8 and f.evidence["rms_after"] < 0.5 * f.evidence["rms_before"]
    assert "projection error" in f.message and "are fixed" in f.message or "is fixed" in f.message
    assert d.recommendation["recommended"]
    assert d.causes and all(c["kind"] == "camera" for c in d.causes) and d.set_size == len(d.causes)


# -- (d) no false alarm on an unmodified rig with noise ---------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_unmodified_rig_with_noise_raises_no_warning(tmp_path, seed):
    params = _spec(free=("damping", "stiffness"))
    twin = _twin(tmp_path, params)
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    reals = _real(_twin(tmp_path, params), excs, truth, seed=seed, sigma=0.3)
    d = _diagnose(twin, params, excs, reals, truth)
    assert d.verdict == "none" and not d.warnings, d.summary()
    assert d.statistics["noise_rms"] == pytest.approx(0.3, rel=0.15)  # the successive-difference estimate
    assert d.statistics["comparison"]["candidates"] > 20  # bodies, joints, actuator, timing, camera, markers


# -- (e) nothing already free is a candidate, and so never advised -----------------------------------------------
def test_no_candidate_frees_what_is_already_free(tmp_path):
    params = _spec(free=("damping", "stiffness"))
    specs = list(params.specs) + [
        ParameterSpec("latency", "s", -0.05, 0.05, 0.0, "camera delay", "measurement.latency", kind="nuisance"),
        ParameterSpec("marker_offset.tip.x", "px", -5, 5, 0.0, "", "measurement.offset[tip].x", kind="nuisance"),
        ParameterSpec("marker_offset.tip.y", "px", -5, 5, 0.0, "", "measurement.offset[tip].y", kind="nuisance")]
    twin = _twin(tmp_path, params)  # the twin takes the physics; the objective the nuisances too
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    reals = _real(_twin(tmp_path, params), excs, truth)
    params = ParameterSet(tuple(specs))
    ctx = ProbeContext(TrialObjective(twin, excs, reals, params), truth, params)
    fields = {f for c in candidate_causes(ctx) for f in c.fields}
    free = set(params.free_names)
    assert not fields & free
    assert "latency" not in fields and not {"marker_offset.tip.x", "marker_offset.tip.y"} & fields
    assert "jnt_stiffness[hinge]" not in fields and "dof_damping[hinge]" not in fields  # what the free ones write
    assert "dof_armature[hinge]" not in fields and "armature" in fields  # the frozen one, once, as a parameter
    assert "marker_offset.mid.x" in fields and "body_mass[link]" in fields


# -- (f) a reported lag is bounded by its search range; beyond it: not determined ----------------------------------
def test_a_lag_beyond_the_search_range_is_not_determined(tmp_path):
    params = _spec(free=("damping", "stiffness"))
    twin = _twin(tmp_path, params)
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    reals = _real(_twin(tmp_path, params), excs, truth)
    shift = 12  # frames: the video 0.4 s late, far beyond ±5 frames
    reals = [replace(r, keypoints=np.concatenate([np.repeat(r.keypoints[:1], shift, 0), r.keypoints[:-shift]]))
             for r in reals]
    d = _diagnose(twin, params, excs, reals, truth)
    lat = [c for c in d.statistics["causes"] if c["kind"] == "latency"]
    assert lat and lat[0].get("size") is None or abs(lat[0]["size"]) * RATE <= 5.0 + 1e-9
    for c in d.statistics["causes"]:
        if c["kind"] == "latency" and c.get("refitted"):
            assert c["size"] is None and "not determined" in c["size_text"] or abs(c["size"]) * RATE <= 5.0
    for f in d.findings:
        assert abs(f.evidence.get("shift_frames", 0.0)) <= 5.0
    assert "336" not in d.summary()


# -- the pieces: the noise estimate and the command transforms ----------------------------------------------------
def test_the_successive_difference_noise_estimate_ignores_a_smooth_error():
    from vid2sid_ros.calibration.diagnosis.context import SampleIndex, noise_variance
    from vid2sid_ros.core.trajectory import Trajectory

    rng = np.random.default_rng(3)
    t = np.arange(400) / RATE
    smooth = 5.0 * np.sin(2 * np.pi * 0.1 * t)[:, None, None] * np.ones((1, 2, 2))  # px, a model error
    real = Trajectory(t, np.zeros((400, 2, 2)), np.ones((400, 2), bool), ("a", "b"))
    sim = replace(real, keypoints=smooth + rng.normal(0.0, 0.4, smooth.shape), source="sim")
    r = (sim.keypoints - real.keypoints).ravel()
    est = noise_variance(r, SampleIndex([sim], [real]))
    assert est == pytest.approx(0.16, rel=0.1)  # σ = 0.4 px, although the RMS residual is about 3.5 px
    assert float(np.mean(r * r)) > 70 * est


def test_the_drive_transforms_do_what_their_names_say():
    from vid2sid_ros.calibration.diagnosis.causes import CommandTransform

    exc = Excitation("e", RATE, np.array([0.0, 0.3, -0.3, 0.05, 0.3, 0.2])[:, None], ("m",))
    dz = CommandTransform("dz", "actuator", ("dz",), "1", 0.01, (0, 1), column=0, mode="deadzone")
    assert np.allclose(dz.excitation(None, exc, 0.1).values[:, 0], [0.0, 0.2, -0.2, 0.0, 0.2, 0.1])
    bl = CommandTransform("bl", "actuator", ("bl",), "1", 0.01, (0, 1), column=0, mode="backlash")
    # play 0.2: the output follows once the input is 0.1 past it, and holds on reversal
    assert np.allclose(bl.excitation(None, exc, 0.2).values[:, 0], [0.0, 0.2, -0.2, -0.05, 0.2, 0.2])
    bias = CommandTransform("b", "actuator", ("b",), "1", 0.01, (-1, 1), column=0, mode="bias")
    assert np.allclose(bias.excitation(None, exc, 0.05).values[:, 0], exc.values[:, 0] + 0.05)


def test_a_camera_move_is_named_by_the_world_fields_a_user_frees():
    """Was: a camera 5 cm closer along its optical axis (world y for a camera looking along +y) was
    recommended as "free camera.z" (the optical z axis taken for the world z field, the camera height);
    freeing camera.z made the fit worse, freeing camera.y fixed it."""
    from types import SimpleNamespace

    from vid2sid_ros.calibration.diagnosis.causes import _world_fields, camera_pose_causes
    from vid2sid_ros.core.camera import camera_from_config

    cam = camera_from_config({"width": 160, "height": 120, "fovy": 50,
                              "pose": {"position": [0, -1.4, 1.0], "look_at": [0, 0, 1.0]}})
    assert np.allclose(cam.rotation[:, 2], [0, 1, 0], atol=1e-9)  # forward is world +y
    assert _world_fields(cam.rotation[:, 2]) == ("camera.y",)
    assert _world_fields(cam.rotation[:, 1]) == ("camera.z",)  # image down is world -z
    assert _world_fields(np.array([0.7, 0.7, 0.14])) in (("camera.x", "camera.y"), ("camera.y", "camera.x"))
    twin = SimpleNamespace(pinhole=cam, move_camera=lambda *a: None)
    ctx = SimpleNamespace(unit="px", twin=twin, params=[])
    by_what = {c.name: c.fields for c in camera_pose_causes(ctx)}
    assert by_what["camera position along the image z axis"] == ("camera.y",)
    assert by_what["camera position along the image y axis"] == ("camera.z",)
    assert by_what["camera tilt"] == ("camera.roll", "camera.pitch", "camera.yaw")


def _refitted(name, kind, ssr):
    """A one-dimensional cause's score with a refit leaving the sum of squares ``ssr`` (unit²)."""
    from vid2sid_ros.calibration.diagnosis.causes import Cause
    from vid2sid_ros.calibration.diagnosis.compare import Refit, Score

    s = Score(Cause(name, kind, (name,), "relative", 0.05, (-0.6, 1.5)), None)
    s.refit = Refit(np.zeros(1), np.array([0.2]), np.zeros(3), ssr)
    return s


# -- (f) a tie set by the refits' accuracy, not by the data, is decided again on refined refits ------------------
def test_a_tie_set_by_the_refits_accuracy_is_decided_by_the_data_once_the_refits_are_refined():
    """Regression (the finger with a 20 % heavier middle link: mass and armature tied in 5/5 seeds, also after a
    designed trial): the tie bound was 10 % of the best cause's reduction, which grows with the data, so no trial
    could separate two causes that each explain most of the residual. With the refits' measured accuracy in its
    place the likelihood ratio decides; refits not accurate enough still tie."""
    from types import SimpleNamespace

    from vid2sid_ros.calibration.diagnosis.compare import Refit, decide

    ctx = SimpleNamespace(sigma2=1.0)  # unit²
    null = Refit(np.zeros(1), np.zeros(0), np.zeros(3), 1000.0)
    mass, armature = _refitted("mass", "inertia", 400.0), _refitted("armature", "joint", 430.0)  # 30 noise variances apart
    assert decide(ctx, [mass, armature], null)["verdict"] == "indistinguishable"  # 10 % of 600 = 60 > 30
    dec = decide(ctx, [mass, armature], null, accuracy=2.0)
    assert dec["verdict"] == "named" and [m.cause.name for m in dec["set"]] == ["mass"]
    assert dec["tie"] == pytest.approx(6.635, abs=1e-3)  # the chi-square(1) 0.99 quantile × sigma²
    assert decide(ctx, [mass, armature], null, accuracy=40.0)["verdict"] == "indistinguishable"


def test_a_decision_after_refits_were_put_back_ignores_the_significance_they_had():
    """Regression (the URDF arm with a dead-zone and a longer focal length, budget-stopped: the diagnosis raised
    "'NoneType' object has no attribute 'ssr'" and the run reported no warning at a 772 % error): the check of an
    unfinished fit refits causes from afar, decides, and puts the screened-only causes' refits back to None; their
    significance from that decision stayed and the next decision sorted them by a refit they no longer had."""
    from types import SimpleNamespace

    from vid2sid_ros.calibration.diagnosis.compare import Refit, decide

    ctx = SimpleNamespace(sigma2=1.0)  # unit²
    null = Refit(np.zeros(1), np.zeros(0), np.zeros(3), 1000.0)
    focal, deadzone = _refitted("focal", "camera", 300.0), _refitted("deadzone", "drive", 200.0)
    assert decide(ctx, [focal, deadzone], null)["set"][0] is deadzone and deadzone.significant
    deadzone.refit = None  # put back: screened only
    dec = decide(ctx, [focal, deadzone], null)
    assert [m.cause.name for m in dec["set"]] == ["focal"] and dec["verdict"] == "named"
    assert (deadzone.significant, deadzone.gain, deadzone.lr) == (False, 0.0, 0.0)


# -- (f) a point short of the optimum: the free parameters explain the residual, no cause is named -------------
def test_an_exact_model_stopped_before_its_optimum_names_no_cause(tmp_path):
    # the twin is the model that made the data; the diagnosed point is where a short run stopped (damping and
    # stiffness 40 % off). The free parameters alone remove the residual's systematic part: before the check
    # the stiffness/armature/inertia columns correlated with it were named as a model error.
    params = _spec(free=("damping", "stiffness"))
    twin = _twin(tmp_path, params)
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005}
    reals = _real(_twin(tmp_path, params), excs, truth, seed=0, sigma=0.1)
    d = _diagnose(twin, params, excs, reals, {"damping": 0.028, "stiffness": 0.3})
    assert d.verdict == "not_at_optimum" and not d.warnings and d.recommendation is None, d.summary()
    assert d.kinds == ["convergence"] and "the run stopped before converging" in d.summary()
    opt = d.statistics["optimality"]
    assert opt["at_optimum"] is False and opt["free_explain_systematic"] and opt["likelihood_ratio"] > opt["critical_lr"]
    assert d.to_dict()["misspecified"] is False


def test_a_model_error_at_the_optimum_is_still_named_with_the_optimality_check_passed(tmp_path):
    params = _spec(free=("damping",), stiffness=0.5)
    twin = _twin(tmp_path, params)
    excs = _excitations()
    reals = _real(_twin(tmp_path, params), excs, {"damping": 0.02, "stiffness": 0.8, "armature": 0.0005})
    from vid2sid_ros.calibration.diagnosis.compare import free_columns, refit
    ctx = ProbeContext(TrialObjective(twin, excs, reals, params), {"damping": 0.02}, params)
    best = refit(ctx, [], [], free_columns(ctx))  # the free damping's least-squares optimum, as a run ends
    at = {"damping": ctx.values_at(best.u)["damping"]}
    d = _diagnose(twin, params, excs, reals, at)
    assert d.statistics["optimality"]["at_optimum"] is True, d.summary()
    assert d.verdict == "named" and d.warnings[0].evidence["parameter"] == "stiffness", d.summary()


def test_a_free_actuator_gear_leaves_the_command_gain_out_of_the_candidates(tmp_path):
    params = ParameterSet(tuple(_spec(free=("damping",)).specs) + (
        ParameterSpec("gear", "N*m", 0.2, 5.0, 1.0, "motor gear", "actuator_gear[m,0]", "log"),))
    twin = _twin(tmp_path, params)
    excs = _excitations()
    truth = {"damping": 0.02, "stiffness": 0.5, "armature": 0.0005, "gear": 1.0}
    reals = _real(_twin(tmp_path, params), excs, truth)
    ctx = ProbeContext(TrialObjective(twin, excs, reals, params), truth, params)
    names = {c.name for c in candidate_causes(ctx)}
    assert "actuator 'm' gain" not in names and "actuator 'm' bias" in names
    frozen = ParameterSet(tuple(replace(s, frozen=True) if s.name == "gear" else s for s in params.specs))
    ctx = ProbeContext(TrialObjective(twin, excs, reals, frozen), truth, frozen)
    assert "actuator 'm' gain" in {c.name for c in candidate_causes(ctx)}  # frozen: still a candidate


def test_a_point_probed_twice_is_rolled_out_once_and_gives_the_same_residual(tmp_path):
    """A composite's parts are probed at the steps their own screens probed: the residual measured then is
    reused (a copy), no rollout spent; another size, another point, or another cause object is measured."""
    params = _spec(free=("damping",), stiffness=0.5)
    twin = _twin(tmp_path, params)
    excs = _excitations()
    reals = _real(_twin(tmp_path, params), excs, {"damping": 0.02, "stiffness": 0.8, "armature": 0.0005})
    ctx = ProbeContext(TrialObjective(twin, excs, reals, params), {"damping": 0.02}, params)
    cause = next(c for c in candidate_causes(ctx) if c.changes_rollout)
    n0 = ctx.rollouts
    r1 = ctx.residual([cause], [cause.step])
    assert ctx.rollouts == n0 + len(excs)
    r2 = ctx.residual([cause], [cause.step])
    assert ctx.rollouts == n0 + len(excs) and np.array_equal(r1, r2, equal_nan=True) and r1 is not r2
    r2[:] = 0.0  # a caller's copy: the memo keeps the measured residual
    assert np.array_equal(ctx.residual([cause], [cause.step]), r1, equal_nan=True)
    ctx.residual([cause], [2 * cause.step])
    assert ctx.rollouts == n0 + 2 * len(excs)
    u = ctx.u0 + 0.01
    ctx.residual([cause], [cause.step], u)
    assert ctx.rollouts == n0 + 3 * len(excs)
    assert ctx.residual([], [], ctx.u0) is not None and ctx.rollouts == n0 + 3 * len(excs)  # the optimum: no rollout
