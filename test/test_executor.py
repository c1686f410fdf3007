"""The rollout executor: the same results on every backend, a dead worker retried once, then a failure."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial
from vid2sid_ros.calibration.batch import ObjectiveState, evaluate_batch
from vid2sid_ros.calibration.executor import (RAY_INSTALL_HINT, ExecutorError, TaskFailure, make_executor)
from vid2sid_ros.calibration.identifiability import check_identifiability
from vid2sid_ros.calibration.objective import TrialObjective
from vid2sid_ros.rigs import load_rig

ROOT = Path(__file__).resolve().parents[1]


def _objective(rig_name: str) -> TrialObjective:
    rig = load_rig(rig_name)
    truth = draw_ground_truth(rig.parameters, 3)
    real = make_sim2sim_trial(rig, truth, seed=3, noise="keypoint")
    return TrialObjective(rig.make_twin(), real.train_excitations[:1], real.train[:1], rig.parameters)


@pytest.fixture(scope="module", params=["finger", str(ROOT / "examples/rigs/spherical_pendulum/rig.yaml")],
                ids=["finger", "spherical_pendulum"])
def objective(request) -> TrialObjective:
    return _objective(request.param)


@pytest.mark.parametrize("backend", ["threads", "pool"])
def test_identifiability_jacobian_is_the_serial_one(objective, backend):
    point = objective.parameters.nominal()
    serial = check_identifiability(objective, point, warn=False)
    with make_executor(backend, 2) as ex:
        other = check_identifiability(objective, point, warn=False, executor=ex)
    assert other.singular_values == serial.singular_values
    assert other.sensitivity_px == serial.sensitivity_px
    assert other.interval == serial.interval
    assert other.rollouts > 0


def test_batch_on_a_pool_equals_serial_and_keeps_its_workers(objective):
    params = objective.parameters
    pts = [params.from_unit_vector(np.full(len(params.free_names), u), params.nominal()) for u in (0.3, 0.5, 0.7)]
    ref = [objective.evaluate(p)[0] for p in pts]
    state = ObjectiveState(objective)
    with make_executor("pool", 2) as ex:
        got = evaluate_batch(objective, pts, ex, state=state)
        pool = ex._procs
        again = evaluate_batch(objective, pts[:1], ex, state=state)
        assert ex._procs is pool  # the same state: the same workers, twins built once
    for a, b in zip(ref, got + again[:0]):
        assert a.error_px == b.error_px
        np.testing.assert_array_equal(a.sim[0].keypoints, b.sim[0].keypoints)
    assert again[0].error_px == ref[0].error_px


# -- worker death ----------------------------------------------------------------------------------------
def _die_once(marker_dir: str, item: int) -> int:
    """Kill this worker the first time ``item`` 3 runs (a marker file says it already died once)."""
    mark = Path(marker_dir) / f"died_{item}"
    if item == 3 and not mark.exists():
        mark.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return item * item


def _always_die(_state: object, item: int) -> int:
    if item == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return item + 100


def test_pool_worker_killed_mid_task_is_retried_once_and_the_run_completes(tmp_path):
    with make_executor("pool", 2) as ex:
        done = []
        out = ex.map(_die_once, list(range(6)), state=str(tmp_path), on_done=lambda i, r: done.append(i))
        assert out == [i * i for i in range(6)]
        assert sorted(done) == list(range(6))
        assert ex.retries >= 1
        assert (tmp_path / "died_3").exists()


def test_pool_worker_that_dies_twice_is_a_failure_and_the_others_finish():
    with make_executor("pool", 2) as ex:
        out = ex.map(_always_die, [0, 1, 2, 3, 4])
    assert [o for i, o in enumerate(out) if i != 2] == [100, 101, 103, 104]
    assert isinstance(out[2], TaskFailure) and out[2].item == 2 and "died twice" in out[2].message


def _raise(_state: object, item: int) -> int:
    if item == 1:
        raise KeyError("task 1 is bad")
    return item


@pytest.mark.parametrize("backend", ["serial", "threads", "pool"])
def test_an_exception_in_a_task_is_raised_like_a_serial_loop(backend):
    with make_executor(backend, 2) as ex, pytest.raises(KeyError, match="task 1 is bad"):
        ex.map(_raise, [0, 1, 2])


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ExecutorError, match="expected one of serial, threads, pool, ray, got 'gpu'"):
        make_executor("gpu")
    with pytest.raises(ExecutorError, match="--workers: expected a whole number >= 1, got 0"):
        make_executor("pool", 0)
    with pytest.raises(ExecutorError, match="--ray-address is for --executor ray"):
        make_executor("pool", 2, ray_address="auto")


def test_ray_missing_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ExecutorError) as err:
        make_executor("ray", 2)
    assert str(err.value) == RAY_INSTALL_HINT and "pip install -r requirements-ray.txt" in str(err.value)


@pytest.fixture
def closed_port():
    """A TCP port on 127.0.0.1 that refuses connections: bound (so nothing else takes it), never listening."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.fixture
def ray_env(monkeypatch):
    """Ray's lookup as on a machine with no Ray (no RAY_ADDRESS); what ``_start_ray`` changes is put back after."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    monkeypatch.setattr(ray, "init", lambda **kw: pytest.fail(f"ray.init reached: {kw}"))  # would hang
    return ray


def test_a_ray_head_that_does_not_answer_is_a_one_line_error_at_once(ray_env, closed_port):
    """Was: ray.init retried the head's GCS for many minutes ("Failed to connect to GCS at address ...")."""
    import time

    t0 = time.monotonic()
    with pytest.raises(ExecutorError) as err:
        make_executor("ray", 2, ray_address=f"127.0.0.1:{closed_port}")
    assert time.monotonic() - t0 < 3.0
    text = str(err.value)
    assert len(text.splitlines()) == 1
    assert text.startswith(f"--ray-address 127.0.0.1:{closed_port}: no Ray head answers at 127.0.0.1:{closed_port} "
                           "(connection refused); expected the GCS port of a Ray head started with "
                           "'ray start --head --port PORT'"), text
    assert not ray_env.is_initialized()


def test_a_ray_head_that_accepts_nothing_in_time_is_named_with_the_wait(ray_env, closed_port, monkeypatch):
    import socket

    from vid2sid_ros.calibration import executor

    def silent(address, timeout):
        assert address == ("127.0.0.1", closed_port) and timeout == executor.RAY_CONNECT_TIMEOUT_S == 5.0
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    with pytest.raises(ExecutorError, match=rf"no Ray head answers at 127.0.0.1:{closed_port} \(no answer within "
                                            r"5 s\)"):
        make_executor("ray", 2, ray_address=f"127.0.0.1:{closed_port}")


def test_ray_address_auto_without_a_running_ray_or_with_a_stale_record_is_a_one_line_error(ray_env, closed_port,
                                                                                         tmp_path, monkeypatch):
    """``auto`` reads the address of the Ray last started here (RAY_TMPDIR/ray/ray_current_cluster); one whose
    head is gone (killed without ``ray stop``) hung like any other address that does not answer."""
    from ray._private import services

    monkeypatch.setattr(services, "find_gcs_addresses", lambda: set())  # not another user's Ray on this machine
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(ExecutorError) as err:
        make_executor("ray", 2, ray_address="auto")
    assert str(err.value) == ("--ray-address auto: no Ray is running on this machine; start a head with 'ray start "
                              "--head --port 6379' first, or leave --ray-address out for a private local Ray")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{closed_port}")
    with pytest.raises(ExecutorError, match=rf"^--ray-address auto: no Ray head answers at 127.0.0.1:{closed_port}, "
                                            r"the Ray most recently started on this machine \(connection refused\)"):
        make_executor("ray", 2, ray_address="auto")
    (tmp_path / "ray" / "ray_current_cluster").unlink()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port}")  # auto takes it, as Ray does
    with pytest.raises(ExecutorError, match=rf"^--ray-address auto: no Ray head answers at 127.0.0.1:{closed_port} "
                                            r"\(set by RAY_ADDRESS\) \(connection refused\)"):
        make_executor("ray", 2, ray_address="auto")


def test_a_ray_address_without_a_port_is_a_one_line_error(ray_env):
    with pytest.raises(ExecutorError) as err:
        make_executor("ray", 2, ray_address="127.0.0.1")
    assert str(err.value) == ("--ray-address: expected auto or HOST:PORT (the GCS port of a Ray head, e.g. "
                              "127.0.0.1:6379), got '127.0.0.1'")


def test_calibrate_with_a_ray_head_that_does_not_answer_exits_2_in_one_line_and_writes_nothing(ray_env, closed_port,
                                                                                              tmp_path, capsys):
    from vid2sid_ros.cli import main

    out = tmp_path / "run"
    assert main(["calibrate", "--rig", "toy", "--executor", "ray", "--ray-address", f"127.0.0.1:{closed_port}",
                 "--no-report", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"vid2sid calibrate: --ray-address 127.0.0.1:{closed_port}: no Ray head answers at "), err
    assert len(err.splitlines()) == 1 and not out.exists()


# -- a whole calibration ----------------------------------------------------------------------------------
def _calibrate(rig_name: str, executor):
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer

    rig = load_rig(rig_name)
    real = make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, 1), seed=1, noise="keypoint")
    cfg = CalibrationConfig(iterations=2, rollout_budget=None, seed=1, diagnosis=False, tracker_bias=False)
    return run_calibration(rig, real, make_proposer("reasoner"), cfg, None, executor=executor)


def _record(r) -> dict:
    d = dict(vars(r))
    d.pop("wall_s", None)
    return d


def test_calibration_on_threads_and_pool_gives_the_serial_iterations():
    """The finger, whole (the user rig's Jacobians are compared above: its 8-parameter calibration is slow)."""
    rig_name = "finger"
    ref = _calibrate(rig_name, None)
    for backend in ("threads", "pool"):
        with make_executor(backend, 2) as ex:
            got = _calibrate(rig_name, ex)
        assert [_record(r) for r in got.history] == [_record(r) for r in ref.history], backend
        assert got.values == ref.values and got.rollouts == ref.rollouts
        assert got.diagnostic_rollouts == ref.diagnostic_rollouts
        assert got.final_identifiability.interval == ref.final_identifiability.interval


def test_commands_refuse_bad_executor_settings_in_one_line(tmp_path, capsys):
    from vid2sid_ros.cli import main

    assert main(["calibrate", "--rig", "toy", "--executor", "pool", "--workers", "0", "--out",
                 str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "vid2sid calibrate: --workers: expected a whole number >= 1, got 0"
    assert not (tmp_path / "c").exists()
    assert main(["benchmark", "sim2sim", "--rig", "toy", "--executor", "threads", "--seeds", "1", "--methods",
                 "random", "--out", str(tmp_path / "b"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vid2sid benchmark: --executor threads runs one calibration's finite differences")
    assert len(err.splitlines()) == 1


def test_benchmark_command_on_a_pool_writes_every_cell(tmp_path, capsys):
    from vid2sid_ros.cli import main

    out = tmp_path / "b"
    assert main(["benchmark", "sim2sim", "--rig", "toy", "--executor", "pool", "--workers", "2", "--seeds", "2",
                 "--methods", "random", "--budget", "8", "--iterations", "2", "--noise", "keypoint",
                 "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.parent.parent.name for p in out.glob("seed_*/random/cell.json")) == ["seed_0", "seed_1"]
    import json

    assert json.loads((out / "results.json").read_text())["executor"]["backend"] == "pool"


def test_a_worker_never_serves_a_point_from_its_own_cache(objective):
    """The calling objective decides what is cached: a worker's copy rolls out every point it is sent."""
    params = objective.parameters
    pts = [params.from_unit_vector(np.full(len(params.free_names), u), params.nominal()) for u in (0.2, 0.6)]
    with make_executor("threads", 2) as ex:
        state = ObjectiveState(objective)
        for _ in range(2):
            objective.clear_cache()
            evs = evaluate_batch(objective, pts, ex, state=state)
            assert [e.rollouts for e in evs] == [objective.cost] * 2
        again = evaluate_batch(objective, pts, ex, state=state)  # now in the calling objective's cache
        assert [e.rollouts for e in again] == [0, 0]


@pytest.mark.filterwarnings("ignore::vid2sid_ros.calibration.identifiability.IdentifiabilityWarning")
def test_a_user_rig_calibration_on_threads_gives_the_serial_iterations():
    """A rig config's URDF arm (UserModelTwin: its MjSpec is copied per thread), whole."""
    name = str(ROOT / "examples/rigs/urdf_arm/rig.yaml")
    ref = _calibrate(name, None)
    with make_executor("threads", 2) as ex:
        got = _calibrate(name, ex)
    assert [_record(r) for r in got.history] == [_record(r) for r in ref.history]
    assert got.values == ref.values and (got.rollouts, got.diagnostic_rollouts) == (ref.rollouts,
                                                                                   ref.diagnostic_rollouts)


# -- threads on a MuJoCo twin: one batched mujoco.rollout call ------------------------------------------
def _same_rollout(a, b) -> None:
    assert (a.diverged, a.message) == (b.diverged, b.message)
    for k in a.state:
        np.testing.assert_array_equal(a.state[k], b.state[k], err_msg=k)
    np.testing.assert_array_equal(a.trajectory.keypoints, b.trajectory.keypoints)
    np.testing.assert_array_equal(a.trajectory.valid, b.trajectory.valid)
    np.testing.assert_array_equal(a.trajectory.time, b.trajectory.time)
    assert a.trajectory.meta == b.trajectory.meta


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mujoco_rollout_batch_reproduces_each_rollout_to_the_bit_and_a_blow_up_as_the_twin_reports_it():
    """Finger: qpos, tendon force, markers, keypoints identical (0.0 difference; markers and forces read from
    sensors the batch model adds), the diverging point (negative damping: MuJoCo's bad-qpos warning) re-run
    by the twin's loop with its own message."""
    rig = load_rig("finger")
    twin = rig.make_twin()
    nominal = rig.parameters.nominal()
    pts = [dict(nominal, joint_stiffness=0.25), dict(nominal, joint_damping=-0.5), dict(nominal, actuator_gain=14.0)]
    for exc in rig.excitations["train"]:
        ref = []
        for p in pts:
            twin.set_parameters(p)
            ref.append(twin.rollout(exc))
        got = twin.rollout_batch(exc, pts, nthread=2)
        assert [r.diverged for r in ref] == [False, True, False]
        for a, b in zip(ref, got):
            _same_rollout(a, b)
        assert twin.get_parameters() == pts[-1]  # left at the last point, as the serial loop leaves it
    # the markers and tendon forces came from sensors stepped in mujoco.rollout's threads, not a Python read-back
    assert twin._batch_job(exc, pts[0], {}).model.nsensordata == 3 * len(twin.keypoint_names) + twin.model.nu


def test_user_rig_rollout_batch_reproduces_each_rollout_with_its_time_offset_and_camera():
    """A rig config (spherical pendulum: initial state, time-offset pre-roll, pinhole camera nuisances)."""
    rig = load_rig(str(ROOT / "examples/rigs/spherical_pendulum/rig.yaml"))
    twin = rig.make_twin()
    params = rig.parameters
    pts = [params.from_unit_vector(np.full(len(params.free_names), u), params.nominal()) for u in (0.25, 0.5, 0.75)]
    exc = rig.excitations["train"][0]
    ref = []
    for p in pts:
        twin.set_parameters(p)
        ref.append(twin.rollout(exc))
    for a, b in zip(ref, twin.rollout_batch(exc, pts, nthread=2)):
        _same_rollout(a, b)


def test_a_rig_config_twin_pickles_and_its_copy_rolls_out_the_same_to_the_bit():
    """Ray ships the twin to its actors pickled. Was: ``cannot pickle 'mujoco._specs.MjSpec' object`` for every
    rig config (and a renderer's OpenGL context failed too). The copy builds its MjSpec again from the model file
    (markers and camera added) and steps the same batch sensor model."""
    import pickle

    rig = load_rig(str(ROOT / "examples/rigs/spherical_pendulum/rig.yaml"))
    twin = rig.make_twin(width=64, height=48)
    twin.reset()
    twin.step([0.0] * len(twin.actuator_names), 1 / 30)
    twin.render()  # the twin now holds an offscreen renderer
    other = pickle.loads(pickle.dumps(twin))
    assert other._built.spec is None and other._renderer is None and twin._renderer is not None
    params = rig.parameters
    pts = [params.from_unit_vector(np.full(len(params.free_names), u), params.nominal()) for u in (0.25, 0.75)]
    exc = rig.excitations["train"][0]
    for a, b in zip(twin.rollout_batch(exc, pts), other.rollout_batch(exc, pts)):
        _same_rollout(a, b)
    assert type(other._built.spec).__name__ == "MjSpec"  # built again, once, for the batch sensor model
    sensors = other._batch_sensor_model[0].nsensordata
    assert sensors == twin._batch_sensor_model[0].nsensordata == twin.model.nsensordata + 3 * len(twin.keypoint_names)
    twin.close()
    other.close()


def test_threads_on_a_mujoco_twin_batch_through_mujoco_rollout_with_the_serial_evaluations():
    """No Python thread and no twin copy: the points go through the twin's rollout_many; every
    Evaluation (rollouts charged, a diverged point's failure and count included) equals serial's."""
    objective = _objective("finger")
    nominal = objective.parameters.nominal()
    pts = [dict(nominal, joint_stiffness=0.25), dict(nominal, joint_damping=-0.5), dict(nominal, actuator_gain=14.0),
           dict(nominal, joint_stiffness=0.25)]  # a repeat: served from the cache, charged nothing
    objective.clear_cache()
    ref = [objective.evaluate(p)[0] for p in pts]
    objective.clear_cache()
    calls = []
    twin = objective.twin
    real_many = twin.rollout_many
    twin.rollout_many = lambda pairs, nthread: calls.append(len(pairs)) or real_many(pairs, nthread=nthread)
    try:
        with make_executor("threads", 2) as ex:
            got = evaluate_batch(objective, pts, ex)
            assert ex._threads is None  # no Python thread pool was started
    finally:
        del twin.rollout_many
    assert calls == [3 * objective.cost]  # the three distinct points on every excitation, in one call
    assert [(e.error_px, e.failed, e.rollouts, e.message) for e in got] == \
        [(e.error_px, e.failed, e.rollouts, e.message) for e in ref]
    assert got[1].failed and got[3].rollouts == 0
    for a, b in zip(ref, got):
        for s, t in zip(a.sim, b.sim):
            np.testing.assert_array_equal(s.keypoints, t.keypoints)


def test_a_long_trial_is_batched_a_few_points_at_a_time_with_the_same_results(monkeypatch):
    """The states mujoco.rollout returns are bounded (MAX_BATCH_BYTES): more points than fit go in chunks."""
    import mujoco

    from vid2sid_ros.sim import mujoco_batch

    rig = load_rig("finger")
    twin = rig.make_twin()
    exc = rig.excitations["train"][0]
    nominal = rig.parameters.nominal()
    pts = [dict(nominal, joint_stiffness=s) for s in (0.22, 0.3, 0.38)]
    job = twin._batch_job(exc, pts[0], {})  # its model (the read-back sensors added) and its steps
    steps = job.control.shape[0] + job.extra + 1  # its physics steps and the sentinel step after them
    per_point = steps * (mujoco.mj_stateSize(job.model, mujoco_batch.FULL_STATE) + job.model.nsensordata) * 8
    monkeypatch.setattr(mujoco_batch, "MAX_BATCH_BYTES", 2 * per_point)
    assert mujoco_batch.points_per_batch(job.model, steps) == 2
    calls = []
    real = mujoco_batch.batched_states
    monkeypatch.setattr(mujoco_batch, "batched_states", lambda models, *a, **k: calls.append(len(models))
                        or real(models, *a, **k))
    got = twin.rollout_batch(exc, pts, nthread=2)
    assert calls == [2, 1]  # the third point alone, in a batch of its own
    for p, b in zip(pts, got):
        twin.set_parameters(p)
        _same_rollout(twin.rollout(exc), b)


# -- a whole reasoner iteration on a user MJCF rig: threads give the serial results ------------------------
_ARM_XML = """<mujoco model="two_link_arm">
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 1.0">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom name="upper_geom" type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
      <site name="elbow_site" pos="0.3 0 0"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.03"/>
        <geom name="lower_geom" type="capsule" fromto="0 0 0 0.25 0 0" size="0.015" mass="0.3"/>
        <site name="tip" pos="0.25 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder_motor" joint="shoulder" gear="2.0" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""

_ARM_RIG = """rig: two_link_arm
description: a two-link arm in a vertical plane, a motor at the shoulder, filmed from the front
model: arm.xml
parameters:
  shoulder_damping: {unit: N*m*s/rad, lower: 0.02, upper: 0.2, nominal: 0.05, scale: log,
                     target: "dof_damping[shoulder]"}
  elbow_damping: {unit: N*m*s/rad, lower: 0.01, upper: 0.1, nominal: 0.03, scale: log, target: "dof_damping[elbow]"}
  shoulder_gain: {unit: N*m, lower: 1.0, upper: 4.0, nominal: 2.0, target: "actuator_gear[shoulder_motor,0]"}
keypoints: {elbow: elbow_site, tip: tip}
camera:
  width: 320
  height: 240
  fovy: 50
  pose: {position: [0.3, -1.6, 1.0], look_at: [0.3, 0.0, 1.0]}
excitations:
  push: {kind: step, amplitude: 0.4, t_step: 0.2, t_release: 1.0, duration: 1.5, rate: 30}
  sweep: {kind: chirp, amplitude: 0.3, f0: 0.5, f1: 2.0, duration: 2.5, rate: 30}
trials:
  - {name: push, source: {sim2sim: {seed: 0}}, excitation: push, split: train}
  - {name: sweep, source: {sim2sim: {seed: 0}}, excitation: sweep, split: train}
calibration: {iterations: 5, rollout_budget: 40, seed: 0}
proposer: reasoner
"""


@pytest.fixture(scope="module")
def arm_rig(tmp_path_factory):
    """A user MJCF rig built here: two links, three free parameters, two trials of different lengths (45 and
    75 frames: a batch of both pads the shorter)."""
    d = tmp_path_factory.mktemp("arm")
    (d / "arm.xml").write_text(_ARM_XML)
    (d / "rig.yaml").write_text(_ARM_RIG)
    return load_rig(str(d / "rig.yaml"))


def test_rollout_many_mixes_trials_of_different_lengths_and_reproduces_each_rollout(arm_rig):
    twin = arm_rig.make_twin()
    params = arm_rig.parameters
    excs = arm_rig.excitations["train"]
    assert len({e.num_steps for e in excs}) == 2  # the padding is exercised
    pts = [params.from_unit_vector(np.full(len(params.free_names), u), params.nominal()) for u in (0.3, 0.7)]
    pairs = [(e, p) for p in pts for e in excs]
    ref = []
    for e, p in pairs:
        twin.set_parameters(p)
        ref.append(twin.rollout(e))
    got = twin.rollout_many(pairs, nthread=2)
    assert len(got) == len(pairs)
    for a, b in zip(ref, got):
        _same_rollout(a, b)
    assert twin.get_parameters() == ref[-1].trajectory.meta["parameters"]  # left at the last pair's values
    # the keypoints came from a framepos sensor per keypoint stepped in mujoco.rollout's threads
    assert twin._batch_job(excs[0], pts[0], {}).model.nsensordata == 3 * len(twin.keypoint_names)


def _reasoner_iteration(objective: TrialObjective, executor) -> tuple:
    """The first reasoner iteration from the nominal point, its evaluations through evaluate_batch as the
    calibration loop's callbacks make them: (proposal values, rationale, every evaluation)."""
    from vid2sid_ros.calibration.proposers.proposer import ProposalContext
    from vid2sid_ros.calibration.proposers.reasoner import Reasoner

    objective.clear_cache()
    state = ObjectiveState(objective)
    seen = []

    def evaluate_many(points):
        evs = evaluate_batch(objective, points, executor, state=state)
        seen.extend(evs)
        return evs

    start = objective.parameters.nominal()
    ctx = ProposalContext(parameters=objective.parameters, current=dict(start),
                          current_eval=evaluate_many([start])[0], real=objective.real,
                          evaluate=lambda v: evaluate_many([v])[0], evaluate_many=evaluate_many,
                          rollouts_remaining=38, iterations_remaining=3, excitations=tuple(objective.excitations))
    proposal = Reasoner().propose(ctx)
    return proposal.values, proposal.rationale, seen


def test_a_whole_reasoner_iteration_on_threads_is_the_serial_one_on_a_user_arm(arm_rig):
    """FD columns, steps (a single point's two trials side by side on threads), signatures: the same proposal,
    rationale and evaluations (errors, rollouts charged, keypoints to the bit)."""
    truth = draw_ground_truth(arm_rig.parameters, 5)
    real = make_sim2sim_trial(arm_rig, truth, seed=5, noise="keypoint")
    objective = TrialObjective(arm_rig.make_twin(), real.train_excitations, real.train, arm_rig.parameters)
    assert objective.cost == 2 and len(objective.parameters.free_names) == 3
    ref_values, ref_text, ref_evs = _reasoner_iteration(objective, None)
    calls = []
    twin = objective.twin
    real_many = twin.rollout_many
    twin.rollout_many = lambda pairs, nthread: calls.append(len(pairs)) or real_many(pairs, nthread=nthread)
    try:
        with make_executor("threads", 2) as ex:
            values, text, evs = _reasoner_iteration(objective, ex)
            assert ex._threads is None  # every batch went through mujoco.rollout, no Python thread pool
    finally:
        del twin.rollout_many
    # the start's and each step's two trials side by side; a re-measurement of the sensitivities (slow steps) is
    # again one batch of every finite-difference point
    assert calls[:2] == [2, 6] and set(calls[2:]) <= {2, 6} and 2 in calls[2:]
    assert values == ref_values and text == ref_text
    assert len(evs) == len(ref_evs) > 1 + 3  # the start, the three columns, at least one step
    assert [(e.values, e.error_px, e.failed, e.rollouts) for e in evs] == \
        [(e.values, e.error_px, e.failed, e.rollouts) for e in ref_evs]
    for a, b in zip(ref_evs, evs):
        for s, t in zip(a.sim, b.sim):
            np.testing.assert_array_equal(s.keypoints, t.keypoints)
    assert values != {k: v for k, v in objective.parameters.nominal().items() if k in values}  # it moved


def test_without_an_address_ray_is_private_even_when_ray_address_names_a_cluster(ray_env, monkeypatch):
    """Was: with RAY_ADDRESS set (a lab's shell), `--executor ray` without --ray-address joined that cluster
    instead of starting the private Ray on 127.0.0.1 the docs promise (ray.init(address=None) reads RAY_ADDRESS)."""
    seen = {}

    class Started(Exception):
        pass

    def init(**kw):
        seen.update(kw)
        raise Started

    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")  # never contacted: ray.init is a stub here
    monkeypatch.setattr(ray_env, "init", init)
    with pytest.raises(Started):
        make_executor("ray", 2)
    assert seen["address"] == "local" and seen["_node_ip_address"] == "127.0.0.1"
