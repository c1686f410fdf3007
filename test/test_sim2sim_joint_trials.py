"""The sim2sim stand-in of a lab-data trial: driven by the recorded commands, measured as the trial is.

A slide-joint spring-mass (1 free parameter: its mass) with one ``joint_csv`` trial whose
CSV holds the commands and the joint position of the true model, written in ``tmp_path``.
"""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import yaml

from vid2sid_ros.benchmark.run import run_benchmark
from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import CalibrationError
from vid2sid_ros.rigs import load_rig
from vid2sid_ros.rigs.trials import build_real_trial

DT = 0.01  # s: one physics step per command row
MODEL = """<mujoco model="spring_mass">
  <option timestep="0.01"><flag contact="disable"/></option>
  <worldbody>
    <body name="ball" pos="0 0 0.1">
      <inertial pos="0 0 0" mass="{mass}" diaginertia="0.001 0.001 0.001"/>
      <joint name="slide" type="slide" axis="1 0 0" stiffness="100" damping="5.0"/>
      <geom type="sphere" size="0.05"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="slide"/></actuator>
</mujoco>
"""
TRUTH = {"mass": 1.0}  # kg


def _simulate(mass: float, u: np.ndarray) -> np.ndarray:
    """Slide positions (T,) m of the model at ``mass``: row k = the state before command k."""
    m = mujoco.MjModel.from_xml_string(MODEL.format(mass=mass))
    d = mujoco.MjData(m)
    q = np.empty(u.size)
    for k in range(u.size):
        q[k] = d.qpos[0]
        d.ctrl[0] = u[k]
        mujoco.mj_step(m, d)
    return q


def _write_rig(folder, *, noise: float | None = 0.002, steps: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """model.xml (mass at its start 2 kg), joints.csv (truth 1 kg) and rig.yaml; returns (commands N, positions m)."""
    t = np.arange(steps) * DT
    u = 5.0 * np.sin(2 * np.pi * 1.5 * t) + 3.0 * np.sin(2 * np.pi * 3.7 * t)
    q = _simulate(TRUTH["mass"], u)
    (folder / "model.xml").write_text(MODEL.format(mass=2.0))
    rows = ["time,slide,cmd_push"] + [f"{a:.6f},{float(b)!r},{float(c)!r}" for a, b, c in zip(t, q, u)]
    (folder / "joints.csv").write_text("\n".join(rows) + "\n")
    src = {"path": "joints.csv", "joints": ["slide"], "units": "m", "commands": {"cmd_push": "push"}}
    if noise is not None:
        src["noise"] = noise
    doc = {"rig": "spring_mass", "model": "model.xml", "max_physics_timestep": DT, "keypoints": {"ball": "ball"},
           "parameters": {"mass": {"unit": "kg", "lower": 0.3, "upper": 3.0, "nominal": 2.0, "scale": "linear",
                                   "target": "body_mass[ball]"}},
           "trials": [{"name": "drive", "source": {"joint_csv": src}, "split": {"train_fraction": 0.7}}],
           "nuisance": {"latency": False}}
    (folder / "rig.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return u, q


def test_the_rig_excitation_of_a_joint_csv_trial_is_its_recorded_commands(tmp_path):
    u, _ = _write_rig(tmp_path)
    rig = load_rig(tmp_path / "rig.yaml")
    train, hold = rig.excitations["train"][0], rig.excitations["holdout"][0]
    assert train.actuator_names == ("push",)
    assert train.rate == pytest.approx(1.0 / DT)
    np.testing.assert_array_equal(hold.values[:, 0], u)  # the whole trial, scored after the training part
    np.testing.assert_array_equal(train.values[:, 0], u[:105])
    real = build_real_trial(load_rig(tmp_path / "rig.yaml"))  # what `vid2sid calibrate` drives its twin with
    np.testing.assert_array_equal(real.train_excitations[0].values, train.values)
    np.testing.assert_array_equal(real.holdout_excitations[0].values, hold.values)


def test_stand_in_at_the_csv_truth_reproduces_the_csv(tmp_path):
    _, q = _write_rig(tmp_path)
    rig = load_rig(tmp_path / "rig.yaml")
    real = make_sim2sim_trial(rig, TRUTH, seed=0, noise="none")
    tr = real.train[0]
    assert (tr.kind, tr.units, tr.names) == ("joints", ("m",), ("slide",))
    assert tr.num_frames == 105
    np.testing.assert_allclose(tr.keypoints[:, 0, 0], q[:105], atol=1e-12, rtol=0)
    assert not real.frames  # nothing rendered for a joint measurement


def test_stand_in_noise_is_the_trials_declared_sigma(tmp_path):
    _write_rig(tmp_path, noise=0.002, steps=2000)
    rig = load_rig(tmp_path / "rig.yaml")
    exact = make_sim2sim_trial(rig, TRUTH, seed=3, noise="none").train[0]
    noisy = make_sim2sim_trial(rig, TRUTH, seed=3, noise="sensor")
    d = (noisy.train[0].keypoints - exact.keypoints).ravel()
    assert np.std(d) == pytest.approx(0.002, rel=0.06)  # 1400 samples: the std's own spread is ~2 %
    assert abs(np.mean(d)) < 0.0003
    assert noisy.train[0].meta["noise"] == 0.002  # weighted by calibrate as the loaded trial would be
    assert noisy.meta["measurement"]["drive_train"] == {"kind": "joints", "units": ["m"], "sigma": [0.002]}
    again = make_sim2sim_trial(rig, TRUTH, seed=3, noise="sensor").train[0]
    np.testing.assert_array_equal(again.keypoints, noisy.train[0].keypoints)  # seeded


def test_undeclared_noise_uses_the_units_default(tmp_path):
    from vid2sid_ros.benchmark.sim2sim import stand_in_measurements

    _write_rig(tmp_path, noise=None)
    rig = load_rig(tmp_path / "rig.yaml")
    like = stand_in_measurements(rig)["drive"]
    assert (like.kind, like.num_frames, like.units) == ("joints", 0, ("m",))
    real = make_sim2sim_trial(rig, TRUTH, seed=0, noise="sensor")
    assert real.meta["measurement"]["drive_train"]["sigma"] == [0.001]  # DEFAULT_NOISE["m"]


def test_camera_noise_is_refused_for_a_rig_that_films_nothing(tmp_path):
    _write_rig(tmp_path)
    with pytest.raises(CalibrationError, match=r"--noise camera: no trial of rig 'spring_mass' measures image "
                                                r"keypoints \(they measure joints\)"):
        run_benchmark(str(tmp_path / "rig.yaml"), ["reasoner"], 1, budget=8, out=tmp_path / "out", noise="camera",
                      progress=False)
    assert not (tmp_path / "out").exists()


def test_benchmark_on_a_joint_csv_rig_runs_end_to_end(tmp_path):
    _write_rig(tmp_path, noise=0.002)
    res = run_benchmark(str(tmp_path / "rig.yaml"), ["reasoner"], 1, budget=8, iterations=4, out=tmp_path / "out",
                        progress=False, nominal_identifiability=False, diagnosis=False)
    assert res["noise"] == "sensor"
    assert ("real side: twin at the truth, trial 'drive' as joint positions (m) + Gaussian noise σ = 0.002 m; "
            "sim side: the twin's joint positions;") in res["protocol"]
    r = res["methods"]["reasoner"]
    assert r["unit"] == "m" and r["holdout_unit"] == "m"
    assert r["rollouts"] <= 8
    assert r["mean_rel_param_error"] < 0.02  # one well-excited mass: found within 2 % on 8 rollouts
    assert r["train_mae"] < 0.004  # ~0.8 sigma at the truth
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["per_seed"][0]["methods"]["reasoner"]["unit"] == "m"


def test_a_bag_joint_trial_is_driven_by_its_commands_read_without_its_camera(tmp_path, monkeypatch):
    """A lab bag with a camera: the trial's commands come from the command topic alone (no frame is
    tracked), and its stand-in measures the named joints (rad) as the bag's /joint_states does."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from helpers.finger_bags import lab_block, rollouts, write_lab_bag

    import vid2sid_ros.io.lab_bag as lab_bag
    from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, stand_in_measurements
    from vid2sid_ros.sim.registry import make_rig

    finger = make_rig("finger")
    truth = draw_ground_truth(finger.parameters, 0)
    excs = finger.excitations["train"][:2]
    trials = rollouts(finger, truth, excs)
    blk = lab_block(write_lab_bag(tmp_path / "lab", trials), names=[e.name for e in excs])
    monkeypatch.setattr(lab_bag, "_track_trial", lambda *a, **k: pytest.fail("the bag's camera was tracked"))
    doc = {"rig": "finger_lab", "model": {"builtin": "finger"},
           "trials": [{"name": "joints", "source": {"bag": {**blk, "trial": excs[1].name, "measurement": "joints",
                                                           "joints": ["mcp", "pip", "dip"]}}}]}
    rig = load_rig(doc, source=("lab_rig.yaml", tmp_path))
    exc = rig.excitations["train"][0]
    assert exc.actuator_names == ("flexor_motor",)
    np.testing.assert_array_equal(exc.values, excs[1].values)
    like = stand_in_measurements(rig)["joints"]
    assert (like.kind, like.names, like.units) == ("joints", ("mcp", "pip", "dip"), ("rad", "rad", "rad"))
    real = make_sim2sim_trial(rig, truth, seed=0, noise="none")
    np.testing.assert_allclose(real.train[0].keypoints[:, :, 0], trials[1][2][:, :3], atol=1e-12)


def test_a_mocap_trial_is_measured_as_marker_positions_with_its_noise(tmp_path):
    """A mocap trial (no recorded commands: its configured excitation drives it) is measured as 3-D
    marker positions in m with the source's declared noise; the protocol says so in m."""
    from vid2sid_ros.benchmark.sim2sim import describe_stand_in

    u, q = _write_rig(tmp_path, steps=600)
    rows = ["time,ball_x,ball_y,ball_z"] + [f"{k * DT:.6f},{1000 * float(x)!r},0.0,100.0" for k, x in enumerate(q)]
    (tmp_path / "take.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "push.csv").write_text("push\n" + "\n".join(repr(float(v)) for v in u) + "\n")
    doc = yaml.safe_load((tmp_path / "rig.yaml").read_text())
    doc["excitations"] = {"push": {"kind": "csv", "path": "push.csv", "rate": 1.0 / DT}}
    doc["trials"] = [{"name": "take", "excitation": "push",
                      "source": {"mocap": {"path": "take.csv", "unit": "mm", "markers": {"ball": "ball"},
                                           "noise": 0.0005}}}]
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    rig = load_rig(tmp_path / "rig.yaml")
    np.testing.assert_array_equal(rig.excitations["train"][0].values[:, 0], u)
    exact = make_sim2sim_trial(rig, TRUTH, seed=2, noise="none").train[0]
    noisy = make_sim2sim_trial(rig, TRUTH, seed=2, noise="sensor").train[0]
    assert (noisy.kind, noisy.unit, noisy.frame, noisy.names) == ("points", "m", "world", ("ball",))
    np.testing.assert_allclose(exact.keypoints[:, 0, 0], q, atol=1e-9)  # the slide moves the ball along x
    assert np.std(noisy.keypoints - exact.keypoints) == pytest.approx(0.0005, rel=0.06)
    real, sim = describe_stand_in(rig, "sensor")
    assert real == ", trial 'take' as mocap marker positions (m) + Gaussian noise σ = 0.0005 m"
    assert sim == "the twin's mocap marker positions"


def test_a_designed_trial_is_measured_like_the_rigs_training_trial(tmp_path):
    """Active learning's stand-in runs a designed excitation of no trial: on a joint-state rig it
    gives joint positions with the training trial's declared noise, not a camera's keypoints."""
    from vid2sid_ros.benchmark.sim2sim import sim2sim_stand_in
    from vid2sid_ros.core.excitation import Excitation

    _write_rig(tmp_path, noise=0.002)
    rig = load_rig(tmp_path / "rig.yaml")
    t = np.arange(120) * DT
    designed = Excitation("designed_1", 1.0 / DT, 4.0 * np.sin(2 * np.pi * 2.0 * t)[:, None], ("push",),
                          meta={"kind": "chirp"})
    tr = sim2sim_stand_in(rig, TRUTH, seed=0, noise="sensor")(designed)
    assert (tr.kind, tr.units, tr.names, tr.num_frames) == ("joints", ("m",), ("slide",), 120)
    assert tr.meta["noise"] == 0.002
    np.testing.assert_allclose(tr.keypoints[:, 0, 0], _simulate(TRUTH["mass"], designed.values[:, 0]), atol=0.012)
