"""Measurements carry their unit: image px, 3-D points in m, joint coordinates (rad or m).

Trajectory kinds round-trip through JSON, never compare across kinds, the twin is
measured like the sensor (sim.measurement), trials of mixed units are weighted by
their noise level, and nothing prints px for metres.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vid2sid_ros.calibration.objective import NOISE_UNIT, TrialObjective, measurement_unit, residual_vector  # noqa: E402
from vid2sid_ros.calibration.proposers.signatures import measure_signatures  # noqa: E402
from vid2sid_ros.core.trajectory import (Trajectory, TrajectoryError, align, format_error, mae,  # noqa: E402
                                         noise_levels)
from vid2sid_ros.core.trial import RealTrial  # noqa: E402
from vid2sid_ros.sim.base import TwinError  # noqa: E402
from vid2sid_ros.sim.measurement import measure  # noqa: E402

from helpers.soft_rod import POSES, TRUTH, make_twin, release_excitation  # noqa: E402


def _points(T=4, K=2, offset=0.0, frame="world"):
    kp = np.arange(T * K * 3, dtype=float).reshape(T, K, 3) * 0.01 + offset
    return Trajectory(np.arange(T) / 100.0, kp, np.ones((T, K), bool), ("a", "b"), "real", "t", kind="points",
                      frame=frame)


def test_kinds_validate_shape_and_unit():
    with pytest.raises(TrajectoryError, match=r"\(T, K, 3\) for kind 'points'"):
        Trajectory(np.zeros(3), np.zeros((3, 1, 2)), np.ones((3, 1), bool), ("a",), kind="points")
    with pytest.raises(TrajectoryError, match="unit 'mm' is not a unit of kind 'points'; expected m"):
        Trajectory(np.zeros(3), np.zeros((3, 1, 3)), np.ones((3, 1), bool), ("a",), kind="points", unit="mm")
    with pytest.raises(TrajectoryError, match="unknown trajectory kind 'depth'"):
        Trajectory(np.zeros(3), np.zeros((3, 1, 3)), np.ones((3, 1), bool), ("a",), kind="depth")
    j = Trajectory(np.zeros(3), np.zeros((3, 2)), np.ones((3, 2), bool), ("elbow", "slider"), kind="joints",
                   unit=("rad", "m"))
    assert j.keypoints.shape == (3, 2, 1) and j.units == ("rad", "m") and j.unit_label == "rad|m"
    assert j.select(["slider"]).units == ("m",)
    img = Trajectory(np.zeros(2), np.zeros((2, 1, 2)), np.ones((2, 1), bool), ("a",))
    assert (img.kind, img.unit, img.frame) == ("image", "px", "image")


def test_json_round_trip_keeps_kind_unit_frame_and_image_files_unchanged():
    p = _points(frame="world")
    d = json.loads(json.dumps(p.to_dict()))
    back = Trajectory.from_dict(d)
    assert (back.kind, back.unit, back.frame) == ("points", "m", "world")
    np.testing.assert_array_equal(back.keypoints, p.keypoints)
    j = Trajectory(np.zeros(2), np.array([[0.1, 0.2], [0.3, np.nan]]), np.ones((2, 2), bool), ("q1", "q2"),
                   kind="joints", unit=("rad", "m"))
    jb = Trajectory.from_dict(json.loads(json.dumps(j.to_dict())))
    assert jb.units == ("rad", "m") and not jb.valid[1, 1]
    img = Trajectory(np.zeros(2), np.ones((2, 1, 2)), np.ones((2, 1), bool), ("a",))
    assert set(img.to_dict()) == {"names", "source", "trial_id", "time", "steps", "keypoints", "valid"}


def test_never_compares_across_kinds_or_frames():
    with pytest.raises(TrajectoryError, match="cannot compare a points trajectory"):
        align(_points(), Trajectory(np.zeros(4), np.zeros((4, 2, 2)), np.ones((4, 2), bool), ("a", "b")))
    with pytest.raises(TrajectoryError, match="frame 'mocap'"):
        align(_points(), _points(frame="mocap"))
    assert mae(_points(), _points(offset=0.003)) == pytest.approx(0.003 * math.sqrt(3))


def test_format_error_prints_metres_in_mm():
    assert format_error(0.0012345, "m") == "1.234 mm"
    assert format_error(2.17, "px") == "2.170 px"
    assert format_error(0.01, "rad") == "0.0100 rad"


def test_twin_measured_like_the_sensor(tmp_path):
    twin = make_twin(tmp_path)
    twin.set_parameters(TRUTH)
    res = twin.rollout(release_excitation("t0", POSES[0], hold_s=0.1, free_s=0.1))
    like = _points(T=1).select(["a"])
    with pytest.raises(TwinError, match=r"marker\(s\) \['a'\] are not keypoints of the twin \(disk1, disk2, disk3\)"):
        measure(twin, res, like)
    real = Trajectory(res.trajectory.time, np.zeros((20, 1, 3)), np.ones((20, 1), bool), ("disk3",), kind="points")
    sim = measure(twin, res, real)
    np.testing.assert_array_equal(sim.keypoints[:, 0], res.state["keypoints_world"][:, 2])
    assert (sim.kind, sim.unit, sim.frame) == ("points", "m", "world")
    jreal = Trajectory(res.trajectory.time, np.zeros((20, 2)), np.ones((20, 2), bool), ("j5x", "j0y"),
                       kind="joints", unit="rad")
    js = measure(twin, res, jreal)
    qadr = [twin.model.joint("j5x").qposadr[0], twin.model.joint("j0y").qposadr[0]]
    np.testing.assert_array_equal(js.keypoints[..., 0], res.state["qpos"][:, qadr])
    with pytest.raises(TwinError, match=r"joint\(s\) \['elbow'\] are not hinge/slide joints"):
        measure(twin, res, jreal._with(names=("elbow", "j0y")))
    with pytest.raises(TwinError, match="transform it into the twin's 'world' frame"):
        measure(twin, res, real._with(frame="optitrack"))


def _real_pair(twin, exc):
    """A 3-D points trial and a joint-state trial of the same rollout, offset by known errors."""
    res = twin.rollout(exc)
    pts = res.state["keypoints_world"][:, [2]] + np.array([0.002, 0.0, 0.0])   # 2 mm off
    q = res.state["qpos"][:, [0]] + 0.01                                         # 0.01 rad off
    steps = res.trajectory.steps
    p = Trajectory(res.trajectory.time, pts, np.ones(pts.shape[:2], bool), ("disk3",), "real", exc.name, steps,
                   kind="points")
    j = Trajectory(res.trajectory.time, q, np.ones(q.shape, bool), ("j0x",), "real", exc.name, steps,
                   kind="joints", unit="rad")
    return p, j


def test_mixed_modalities_weighted_by_noise(tmp_path):
    twin = make_twin(tmp_path)
    twin.set_parameters(TRUTH)
    exc = release_excitation("t0", POSES[0], hold_s=0.2, free_s=0.2)
    p, j = _real_pair(twin, exc)
    single = TrialObjective(twin, [exc], [p])
    ev, _ = single.evaluate(TRUTH)
    assert single.unit == "m" and ev.error_px == pytest.approx(0.002)
    both = TrialObjective(twin, [exc, exc], [p, j])
    assert both.unit == NOISE_UNIT == measurement_unit([p, j])
    ev, _ = both.evaluate(TRUTH)
    # 2 mm / 1 mm noise and 0.01 rad / 0.005 rad noise: both 2 sigma
    assert ev.error_px == pytest.approx(2.0)
    heavier = TrialObjective(twin, [exc, exc], [p, j], noise={"m": 0.0005})
    ev2, _ = heavier.evaluate(TRUTH)
    assert ev2.error_px == pytest.approx((4.0 + 2.0) / 2)
    r = residual_vector(ev2.sim, [p, j], noise={"m": 0.0005})
    assert np.nanmax(np.abs(r)) == pytest.approx(4.0)
    with pytest.raises(TrajectoryError, match="noise level of unit 'm' must be a number > 0"):
        noise_levels(p, {"m": -1})


def test_real_trial_file_carries_units(tmp_path):
    twin = make_twin(tmp_path)
    exc = release_excitation("t0", POSES[1], hold_s=0.1, free_s=0.1)
    p, j = _real_pair(twin, exc)
    RealTrial([p, j], [exc, exc], source="units").save(tmp_path / "rt.json")
    back = RealTrial.load(tmp_path / "rt.json")
    assert [t.kind for t in back.train] == ["points", "joints"] and back.train[1].unit == "rad"


def test_signatures_in_the_trajectory_unit(tmp_path):
    twin = make_twin(tmp_path)
    twin.set_parameters(TRUTH)
    exc = release_excitation("t0", POSES[0])
    p, _ = _real_pair(twin, exc)
    sig = {s.name: s for s in measure_signatures(p, exc)}
    assert sig["peak_amplitude"].unit == "m" and 0.01 < sig["peak_amplitude"].value < 0.2
    assert sig["dominant_frequency"].unit == "Hz" and math.isfinite(sig["dominant_frequency"].value)
    assert math.isfinite(sig["decay_rate"].value)  # the 0.5 px noise floor would have hidden a motion in m


def test_vlm_prompt_speaks_the_measurement_unit(tmp_path):
    from vid2sid_ros.calibration.proposers.proposer import ProposalContext
    from vid2sid_ros.calibration.proposers.vlm.prompt import build_prompt, trajectory_plot_png

    twin = make_twin(tmp_path)
    twin.set_parameters(TRUTH)
    exc = release_excitation("t0", POSES[0], free_s=0.3)
    p, _ = _real_pair(twin, exc)
    obj = TrialObjective(twin, [exc], [p])
    ev, _ = obj.evaluate(TRUTH)
    ctx = ProposalContext(parameters=twin.parameters, current=dict(TRUTH), current_eval=ev, real=[p])
    text = build_prompt(ctx).render_text()
    assert "overall trajectory MAE: 2 mm" in text            # 0.002 m shown in mm
    assert "3-D marker positions (mm" in text and "| mean offset sim-real x mm | y mm | z mm |" in text
    assert " px" not in text.split("Reply format")[0].replace("(px; x = column", "")
    assert trajectory_plot_png(p, ev.sim[0])[:4] == b"\x89PNG"


def test_calibration_config_noise_weights_the_modalities(tmp_path):
    from vid2sid_ros.calibration.loop import CalibrationConfig, CalibrationError, run_calibration

    twin = make_twin(tmp_path)
    twin.set_parameters(TRUTH)
    exc = release_excitation("t0", POSES[0], free_s=0.3)
    p, j = _real_pair(twin, exc)
    real = RealTrial([p, j], [exc, exc], source="units")
    off = {"latency": False, "marker_offsets": False}
    cfg = dict(iterations=0, identifiability=False, final_identifiability=False, nuisance=off, start=dict(TRUTH))
    res = run_calibration(twin, real, _Idle(), CalibrationConfig(**cfg, noise={"m": 0.0005}))
    assert res.unit == "sigma" and res.error_px == pytest.approx(3.0)  # (2 mm / 0.5 mm + 0.01 rad / 0.005 rad) / 2
    with pytest.raises(CalibrationError, match="config 'noise' must map units"):
        CalibrationConfig(noise={"m": 0})


class _Idle:
    name = "idle"

    def propose(self, ctx):  # never called with 0 iterations
        raise AssertionError("no proposal expected")
