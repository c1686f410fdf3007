"""Misspecifications of the camera: a real camera-pose error (the stand-in is filmed from a moved
camera) and a rolling shutter (each keypoint seen when its image row is read); what the diagnosis
names for each; the residual-diagnosis warning printed before the parameters."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.benchmark.misspecification import (MisspecificationError, camera_pose_error, parse_misspecify,
                                                    rolling_shutter_frames, rolling_shutter_sample)
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.core.camera import PinholeCamera, rotation_vector_to_matrix
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.sim.toy import make_rig as make_toy

TOY_TRUTH = {"stiffness": 0.7, "damping": 0.01, "gain": 0.4}
RIGS = Path(__file__).resolve().parents[1] / "examples" / "rigs"


def _short(exc: Excitation, n: int) -> Excitation:
    return Excitation(exc.name, exc.rate, exc.values[:n], exc.actuator_names, exc.meta)


# -- the pose move itself ------------------------------------------------------------------------------------
def test_a_moved_pinhole_camera_sees_the_world_from_the_moved_pose():
    cam = PinholeCamera(320, 240, 400.0, 400.0, 159.5, 119.5, position=(0.0, 0.0, 1.0), pitch=0.3, yaw=-0.2)
    pts = np.array([[2.0, 0.1, 0.2], [1.5, -0.3, 0.5], [2.5, 0.4, -0.1]])
    # 2 cm along the optical z (forward) is 2 cm along the viewing direction in the world
    fwd = cam.moved((0.0, 0.0, 0.02), (0.0, 0.0, 0.0))
    assert np.allclose(np.asarray(fwd.position) - cam.position, 0.02 * cam.rotation[:, 2], atol=1e-12)
    # a roll about the optical axis turns the image about the principal point by the opposite angle
    rolled = cam.moved((0.0, 0.0, 0.0), (0.0, 0.0, 0.01))
    a, b = cam.project(pts) - (159.5, 119.5), rolled.project(pts) - (159.5, 119.5)
    ang = np.arctan2(b[:, 1], b[:, 0]) - np.arctan2(a[:, 1], a[:, 0])
    assert np.allclose(ang, -0.01, atol=1e-9) and np.allclose(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    # a pan of w rad about the optical y shifts a point on the axis by f·tan(w) px to the left
    on_axis = cam.position + 2.0 * cam.rotation[:, 2]
    u = cam.moved((0, 0, 0), (0.0, 0.004, 0.0)).project(on_axis[None])[0]
    assert u[0] == pytest.approx(159.5 - 400.0 * math.tan(0.004), abs=1e-9) and u[1] == pytest.approx(119.5)
    # Rodrigues: a quarter turn about z
    assert np.allclose(rotation_vector_to_matrix((0, 0, math.pi / 2)) @ [1, 0, 0], [0, 1, 0], atol=1e-12)


def test_the_camera_size_is_millimetres_and_milliradians():
    t, w = camera_pose_error(2.0)
    assert np.allclose(t, [0.002, -0.001, 0.002]) and np.allclose(w, [-0.001, 0.002, 0.002])
    assert parse_misspecify("camera")["camera"] == 3.0


# -- the finger: its MuJoCo camera moves (render and projection) ---------------------------------------------
def test_finger_stand_in_is_filmed_from_the_moved_mujoco_camera():
    from vid2sid_ros.perception import rig_tracker
    from vid2sid_ros.sim.registry import make_rig

    rig = make_rig("finger")
    twin = rig.make_twin()
    exc = _short(rig.excitations["train"][1], 20)
    home = twin.rollout(exc, render=True)
    t, w = camera_pose_error(3.0)
    twin.move_camera(t, w)
    moved = twin.rollout(exc, render=True)
    # the projection from the moved camera, computed independently with the core pinhole camera
    pos, rot = twin.data.cam_xpos[twin._cam_id].copy(), twin.data.cam_xmat[twin._cam_id].reshape(3, 3).copy()
    twin.move_camera((0, 0, 0), (0, 0, 0))
    twin.rollout(exc)  # back home: the world pose of the camera at rest
    pos0, rot0 = twin.data.cam_xpos[twin._cam_id], twin.data.cam_xmat[twin._cam_id].reshape(3, 3)
    opt0 = rot0 @ np.diag([1.0, -1.0, -1.0])  # MuJoCo camera axes -> optical (x right, y down, z forward)
    assert np.allclose(pos, pos0 + opt0 @ t, atol=1e-9)
    assert np.allclose(rot @ np.diag([1.0, -1.0, -1.0]), opt0 @ rotation_vector_to_matrix(w), atol=1e-9)
    shift = moved.trajectory.keypoints - home.trajectory.keypoints
    assert 3.0 < np.mean(np.linalg.norm(shift, axis=2)) < 6.0  # about 4 px on the finger at SIZE 3
    assert np.std(shift[..., 0]) > 0.005  # not a rigid image shift: perspective and roll vary with position
    # the rendered frames moved with it: the tracker finds the markers where the moved camera projects them
    tracker, _ = rig_tracker(rig)
    tr = tracker.track(moved.frames, time=moved.trajectory.time).select(moved.trajectory.names)
    assert np.max(np.linalg.norm(tr.keypoints - moved.trajectory.keypoints, axis=2)) < 1.0
    twin.close()


def test_finger_camera_misspecification_leaves_the_calibrating_twin_alone():
    from vid2sid_ros.sim.registry import make_rig

    rig = make_rig("finger")
    twin = rig.make_twin()
    quat = twin.model.cam_quat.copy()
    truth = rig.parameters.nominal()
    clean = make_sim2sim_trial(rig, truth, noise="none", twin=twin)
    real = make_sim2sim_trial(rig, truth, noise="none", twin=twin, misspecify="camera=3")
    assert np.array_equal(twin.model.cam_quat, quat)  # the twin passed in was not moved
    applied = real.meta["misspecification"]["applied"]["camera"]
    assert applied["translation_mm"] == pytest.approx([3.0, -1.5, 3.0])
    assert applied["rotation_mrad"] == pytest.approx([-1.5, 3.0, 3.0])
    d = real.train[0].keypoints - clean.train[0].keypoints
    assert 3.0 < np.nanmean(np.linalg.norm(d, axis=2)) < 6.0


# -- a pinhole user rig (URDF arm of examples/rigs) ----------------------------------------------------------
def test_pinhole_user_rig_camera_moves_for_projection_and_render():
    from vid2sid_ros.perception import make_tracker
    from vid2sid_ros.rigs import load_rig

    rig = load_rig(RIGS / "urdf_arm" / "rig.yaml")
    twin = rig.make_twin()
    exc = _short(rig.excitations["train"][0], 6)
    home_cam = twin.pinhole
    t, w = camera_pose_error(5.0)
    twin.move_camera(t, w)
    res = twin.rollout(exc, render=True)
    want = home_cam.moved(t, w).project(res.state["keypoints_world"])
    assert np.allclose(res.trajectory.keypoints, want, atol=1e-9)
    assert np.min(np.linalg.norm(want - home_cam.project(res.state["keypoints_world"]), axis=2)) > 2.0
    tracked = make_tracker(rig.tracker).track(res.frames, time=res.trajectory.time).select(res.trajectory.names)
    assert tracked.valid.all() and np.max(np.linalg.norm(tracked.keypoints - want, axis=2)) < 1.0
    twin.move_camera((0, 0, 0), (0, 0, 0))
    assert twin.pinhole == home_cam  # a new move replaces the last one
    twin.close()


def test_a_planar_projection_rig_cannot_have_a_camera_pose_error():
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("pendulum")  # the pendulum clip's legacy planar image projection
    with pytest.raises(MisspecificationError, match=r"^--misspecify camera: .*needs a pinhole camera"):
        make_sim2sim_trial(rig, rig.parameters.nominal(), noise="none", misspecify="camera=3")


# -- rolling shutter ---------------------------------------------------------------------------------------
def test_rolling_shutter_sees_each_keypoint_when_its_row_is_read():
    rate, U, T, H = 30.0, 10, 12, 240
    t_fine = (np.arange(T * U) + 1) / (rate * U)
    # keypoint 0 falls at 300 px/s from row 20; keypoint 1 sits still on row 200
    fine = np.zeros((T * U, 2, 2))
    fine[:, 0, 0], fine[:, 0, 1] = 100.0, 20.0 + 300.0 * t_fine
    fine[:, 1] = (50.0, 200.0)
    readout = 0.025
    kp, valid, read_t = rolling_shutter_sample(fine, np.ones((T * U, 2), bool), T, rate, readout, H)
    stamp = (np.arange(T) + 1) / rate
    # the read time solves t = stamp − (H − 1 − v(t)) / (H − 1) · readout with v(t) = 20 + 300 t
    want_t = (stamp - (H - 1 - 20.0) / (H - 1) * readout) / (1.0 - 300.0 * readout / (H - 1))
    ok = want_t > t_fine[0]
    assert np.allclose(read_t[ok, 0], want_t[ok], atol=1e-9) and valid.all()
    assert np.allclose(kp[ok, 0, 1], 20.0 + 300.0 * want_t[ok], atol=1e-6)
    assert np.allclose(kp[:, 1], (50.0, 200.0))  # still: where it is, whenever read
    glob, _, gt = rolling_shutter_sample(fine, np.ones((T * U, 2), bool), T, rate, 0.0, H)
    assert np.allclose(gt, stamp[:, None]) and np.allclose(glob[:, 0, 1], 20.0 + 300.0 * stamp)  # global shutter
    with pytest.raises(MisspecificationError, match="expected 120 rollout rows"):
        rolling_shutter_sample(fine[:-1], np.ones((T * U - 1, 2), bool), T, rate, readout, H)


def test_rolling_shutter_frames_are_composed_row_by_row():
    rate, U, T, H, W = 30.0, 10, 3, 40, 4
    fine = np.zeros((T * U, H, W, 3), np.uint8)
    fine[..., 0] = np.arange(T * U, dtype=np.uint8)[:, None, None]  # each fine frame paints its own index
    out = rolling_shutter_frames(fine, T, rate, 1.0 / rate)  # a readout of one whole frame period
    assert out.shape == (T, H, W, 3)
    k = 2  # last frame: bottom row from fine frame 29 (its stamp), top row one frame period (10 fine rows) earlier
    assert out[k, -1, 0, 0] == 29 and out[k, 0, 0, 0] == 19
    assert np.all(np.diff(out[k, :, 0, 0].astype(int)) >= 0)  # read top to bottom


def test_rolling_shutter_size_is_checked():
    with pytest.raises(MisspecificationError, match=r"rolling_shutter=-0.01: expected a readout time in \[0, 1"):
        parse_misspecify("rolling_shutter=-0.01")
    rig = make_toy()
    with pytest.raises(MisspecificationError, match="cannot take longer than a frame period"):
        make_sim2sim_trial(rig, TOY_TRUTH, noise="none", misspecify="rolling_shutter=0.05")


def _calibrate_toy(misspecify, seed=1):
    rig = make_toy()
    real = make_sim2sim_trial(rig, TOY_TRUTH, seed=seed, noise="keypoint", keypoint_sigma_px=0.2, misspecify=misspecify)
    cfg = CalibrationConfig(iterations=8, rollout_budget=60, seed=seed, identifiability=False,
                            final_identifiability=False)
    return real, run_calibration(rig, real, make_proposer("reasoner"), cfg)


def test_the_diagnosis_names_a_rolling_shutter_and_its_readout_time():
    real, res = _calibrate_toy("rolling_shutter=0.025")
    d = res.diagnosis
    rs = [f for f in d["findings"] if f["kind"] == "rolling_shutter"]
    assert rs and rs[0]["severity"] == "warning", d["text"]
    assert 0.015 < rs[0]["evidence"]["readout_s"] < 0.035  # the 25 ms readout, top to bottom
    assert "rolling-shutter camera" in rs[0]["message"] and "top to bottom" in rs[0]["message"]
    lag = real.meta["misspecification"]["applied"]["rolling_shutter"]["lag_s"]
    assert all(0.0 <= v["min"] <= v["max"] <= 0.025 for v in lag.values())


def test_the_diagnosis_names_the_toy_cameras_pose_error_as_a_camera_error():
    _, res = _calibrate_toy("camera=3")
    assert "camera" in res.diagnosis["kinds"] and res.diagnosis["misspecified"]  # it said 'offset' (a marker)
    assert "rolling_shutter" not in res.diagnosis["kinds"]


# -- the terminal summary: the diagnosis's warning before any parameter ---------------------------------------
def test_calibrate_prints_the_residual_diagnosis_before_the_parameters(tmp_path, capsys):
    from vid2sid_ros.cli import main

    rig = make_toy()
    real = make_sim2sim_trial(rig, TOY_TRUTH, seed=1, noise="keypoint", keypoint_sigma_px=0.2, misspecify="camera=3")
    path = real.save(tmp_path / "real.json")
    out = tmp_path / "run"
    code = main(["calibrate", "--rig", "toy", "--real", str(path), "--iterations", "8", "--budget", "60",
                 "--seed", "1", "--out", str(out), "--no-report", "--quiet"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    diag = [i for i, ln in enumerate(lines) if ln.startswith("warning: Residual diagnosis")]
    params = next(i for i, ln in enumerate(lines) if ln.startswith("identified parameters"))
    named = [i for i, ln in enumerate(lines) if ln.lstrip().startswith(("stiffness =", "damping =", "gain ="))]
    assert diag and named, lines
    assert max(diag) < params < min(named), lines  # every diagnosis warning before the parameter block
    assert "do not read the parameters as physical" in lines[diag[0]]


def test_demo_summary_puts_the_residual_diagnosis_before_the_identified_length():
    from vid2sid_ros.commands.demo import summary_lines

    s = {"holdout_mae_px": 2.1, "training_mae_px": 1.9, "proposer": "reasoner", "length_m": 1.0651,
         "length_std_m": 0.002, "measured_period_s": 2.07, "twin_period_s": 2.071, "period_finite_amplitude_s": 2.072,
         "amplitude_rad": 0.3, "period_small_angle_s": 2.07, "methods": {"reasoner": {}}, "wall_s": 12.0,
         "report": "out/report.html"}
    run = ["stopped: converged after 5 iterations", "training MAE 1.900 px",
           "warning: Residual diagnosis: the model is probably wrong somewhere — do not read the parameters as physical",
           "identified parameters (95 % interval: Gauss–Newton, local):", "  length = 1.0651 m",
           "warning: damping and drag are correlated (ρ = +0.950)"]
    out = summary_lines(s, run)
    assert out[0] == run[0]
    i_diag, i_len = out.index(run[2]), next(i for i, ln in enumerate(out) if ln.startswith("identified length"))
    i_other = out.index(run[5])
    assert i_diag < i_len < i_other and out[-1] == "report: out/report.html"
    assert summary_lines(s, [])[0].startswith("holdout MAE")  # no run summary: still every number


def test_benchmark_prints_the_diagnosis_warnings_before_the_results_table(tmp_path, capsys):
    from vid2sid_ros.cli import main

    code = main(["benchmark", "sim2sim", "--rig", "toy", "--methods", "reasoner", "--misspecify", "camera=3",
                 "--seeds", "1", "--budget", "40", "--iterations", "6", "--noise", "keypoint", "--out",
                 str(tmp_path / "b"), "--no-progress"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    warn = next(i for i, ln in enumerate(lines) if ln.startswith("Residual diagnosis: reasoner warned in 1/1"))
    table = next(i for i, ln in enumerate(lines) if ln.startswith("| method | mean rel. param. error"))
    assert warn < table and "(named: " in lines[warn] and "camera 1/1" in lines[warn] and "not physical" in lines[warn]
    clean = (tmp_path / "b" / "results.md").read_text()
    assert clean.index("Residual diagnosis: reasoner") < clean.index("| method | mean rel. param. error")


def test_benchmark_refuses_a_kind_the_rig_cannot_express_before_writing_anything(tmp_path, capsys):
    """Was: `--misspecify camera` on a planar-projection rig (and a readout longer than a frame) failed in
    the first seed's stand-in, after the benchmark directory was created."""
    from vid2sid_ros.cli import main

    for rig, kind, message in (("pendulum", "camera=3", "--misspecify camera: "),
                               ("toy", "rolling_shutter=0.05", "cannot take longer than a frame period")):
        out = tmp_path / f"b_{rig}"
        code = main(["benchmark", "sim2sim", "--rig", rig, "--methods", "reasoner", "--misspecify", kind,
                     "--seeds", "1", "--budget", "20", "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, err
        assert not out.exists()


def test_benchmark_refuses_a_camera_error_that_leaves_the_stand_in_blind_before_writing_anything(tmp_path, capsys):
    """Was: `--misspecify camera=300` (within the ±300 limit) on the toy arm turned the camera away from the
    arm; the benchmark wrote seed_0/reasoner/run.json, then "the start point cannot be simulated: ... no
    valid keypoint overlaps the real trial"."""
    from vid2sid_ros.cli import main

    out = tmp_path / "b"
    code = main(["benchmark", "sim2sim", "--rig", "toy", "--methods", "reasoner", "--misspecify", "camera=300",
                 "--noise", "keypoint", "--seeds", "1", "--budget", "20", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "no valid keypoint in any of the" in err and "--misspecify camera=300" in err and "smaller size" in err
    assert not out.exists()
    # a small camera error keeps the arm in view: the stand-in is built
    real = make_sim2sim_trial(make_toy(), TOY_TRUTH, noise="keypoint", misspecify="camera=3")
    assert all(t.valid.any() for t in real.train)


def test_a_real_trial_with_nothing_valid_is_refused_before_the_run_directory_is_written(tmp_path):
    """The loop's own check (any source: a bag whose markers are never seen, a blind stand-in): a training
    trajectory with no valid measurement is refused, and the run directory is never created."""
    from vid2sid_ros.calibration.loop import CalibrationError
    from vid2sid_ros.core.trial import RealTrial

    rig = make_toy()
    real = make_sim2sim_trial(rig, TOY_TRUTH, noise="none")
    blind = replace(real.train[1], valid=np.zeros_like(real.train[1].valid))
    lost = RealTrial([real.train[0], blind], real.train_excitations, real.holdout, real.holdout_excitations)
    rd = tmp_path / "run"
    with pytest.raises(CalibrationError, match=r"^real trial train\[1\] \('chirp_0.3-3Hz'\): no valid measurement "
                                               r"in any of its \d+ frames"):
        run_calibration(rig, lost, make_proposer("reasoner"), CalibrationConfig(iterations=2, rollout_budget=10), rd)
    assert not rd.exists()
