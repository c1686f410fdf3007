"""A FIFO (named pipe) wherever a file is expected is refused in one line saying so, never opened.

Regression: a FIFO given as the parameter spec, a CSV or a camera_info file was refused with
"file not found" (the file is right there: the message sent the user looking for a missing
file), a FIFO video with "not a video file", a FIFO ``result.yaml`` with "no result.yaml".
Every file the rig config and the command line accept is tried with a FIFO; a read of one would
block until a writer came, so each case runs with a bound (a thread join, or a subprocess timeout).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vid2sid_ros.rigs import RigConfigError, build_real_trial, load_rig

REPO = Path(__file__).resolve().parents[1]
FIFO_SAYS = "is a FIFO (named pipe), expected a regular file"

ARM = """<mujoco model="arm">
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3"/>
      <site name="tip" pos="0.33 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="shoulder" gear="1"/></actuator>
</mujoco>
"""
PARAMS = "{damping: {unit: N*m*s/rad, lower: 0.01, upper: 0.2, nominal: 0.05, target: 'dof_damping[shoulder]'}}"
CAMERA = "{width: 96, height: 72, fovy: 40, pose: {position: [0.25, -1.0, 0], look_at: [0.25, 0, 0]}}"
SWING = "{kind: sine, amplitude: 0.6, frequency: 1, duration: 2, rate: 30}"
SOURCE = "{sim2sim: {seed: 1}}"


def _rig(tmp_path: Path, *, model="arm.xml", params=PARAMS, camera=CAMERA, swing=SWING, source=SOURCE) -> Path:
    (tmp_path / "arm.xml").write_text(ARM)
    path = tmp_path / "rig.yaml"
    path.write_text(f"model: {model}\nparameters: {params}\nkeypoints: {{tip: tip}}\ncamera: {camera}\n"
                    f"excitations: {{swing: {swing}}}\n"
                    f"trials: [{{name: run1, source: {source}, excitation: swing}}]\n")
    return path


def _bounded(fn, seconds: float = 30.0):
    """``fn()``'s exception (or None), failing the test if it is still blocked after ``seconds``."""
    box: dict = {}

    def run():
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            box["error"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked opening the FIFO"
    return box.get("error")


#: (config key in the message, rig-config override, FIFO file name)
CONFIG_CASES = [
    ("parameters", {"params": "spec.yaml"}, "spec.yaml"),
    ("model", {"model": "pipe.xml"}, "pipe.xml"),
    ("camera.camera_info", {"camera": "{camera_info: cam.yaml}"}, "cam.yaml"),
    ("excitations.swing", {"swing": "{kind: csv, path: u.csv, rate: 30}"}, "u.csv"),
    ("trials[0].source.joint_csv.path", {"source": "{joint_csv: {path: q.csv, joints: [shoulder], rate: 30}}"},
     "q.csv"),
    ("trials[0].source.video.path", {"source": "{video: clip.mp4}"}, "clip.mp4"),
    ("trials[0].source.mocap.path", {"source": "{mocap: {path: m.csv}}"}, "m.csv"),
]


@pytest.mark.parametrize("key,override,name", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_a_fifo_named_by_the_rig_config_is_refused_as_not_a_regular_file(tmp_path, key, override, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    if name == "u.csv":  # an excitation CSV path is taken as written (relative to the working directory)
        override = {"swing": f"{{kind: csv, path: {fifo}, rate: 30}}"}
    path = _rig(tmp_path, **override)
    err = _bounded(lambda: build_real_trial(load_rig(path)))
    assert isinstance(err, RigConfigError), repr(err)
    msg = str(err)
    assert "\n" not in msg and msg.startswith(f"{path}:{key}: ") and f"{fifo} {FIFO_SAYS}" in msg, msg
    assert "not found" not in msg


def test_library_readers_refuse_a_fifo_in_one_line(tmp_path):
    from vid2sid_ros.core.trial import RealTrial
    from vid2sid_ros.core.yamlio import load_yaml
    from vid2sid_ros.io.joint_csv import load_joint_csv
    from vid2sid_ros.io.mocap import load_mocap
    from vid2sid_ros.io.video import video_info

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for call in (lambda: RealTrial.load(fifo), lambda: load_yaml(fifo), lambda: video_info(fifo),
                 lambda: load_joint_csv(fifo, joints=["q"], rate=30.0), lambda: load_mocap(fifo, markers=["a"])):
        err = _bounded(call)
        assert err is not None and f"{fifo} {FIFO_SAYS}" in str(err) and "not found" not in str(err), repr(err)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_the_command_line_refuses_a_fifo_in_one_line(tmp_path):
    """``calibrate CONFIG``, ``calibrate --real TRIAL.json``, ``track VIDEO``, ``track --rig RIG.yaml`` and
    ``export-randomization RUN`` (its result.yaml): exit 2, one line naming the FIFO, nothing hangs."""
    for n in ("rig.yaml", "trial.json", "clip.mp4"):
        os.mkfifo(tmp_path / n)
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "result.yaml")
    cases = [(["calibrate", str(tmp_path / "rig.yaml"), "--out", str(tmp_path / "o1")], "rig.yaml"),
             (["calibrate", "--rig", "finger", "--real", str(tmp_path / "trial.json"), "--out", str(tmp_path / "o2")],
              "trial.json"),
             (["track", str(tmp_path / "clip.mp4"), "--rig", "finger"], "clip.mp4"),
             (["track", str(tmp_path / "clip.mp4"), "--rig", str(tmp_path / "rig.yaml")], "rig.yaml"),
             (["export-randomization", str(run)], "run/result.yaml")]
    for args, name in cases:
        proc = _cli(args, tmp_path)
        err = proc.stderr.strip()
        assert proc.returncode == 2 and "\n" not in err, (args, proc.returncode, err)
        assert str(tmp_path / name) in err and "is a FIFO (named pipe), expected a regular file" in err, (args, err)
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


@pytest.mark.parametrize("name", ["iterations.jsonl", "result.json"])
def test_a_fifo_artefact_in_the_run_directory_is_refused_before_the_run(tmp_path, name):
    """``calibrate --resume`` into a directory whose iterations.jsonl or result.json is a FIFO hung (the read or
    the write waited for the other end) and its SIGTERM message named the FIFO as where iterations were saved."""
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / name)
    proc = _cli(["calibrate", "--rig", "finger", "--iterations", "4", "--budget", "30", "--out", str(run),
                 "--resume"], tmp_path)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err, (proc.returncode, err)
    assert f"{run / name} {FIFO_SAYS}" in err and "--out" in err, err
    assert sorted(p.name for p in run.iterdir() if p.name != ".vid2sid.lock") == [name]  # nothing written


def test_track_refuses_a_fifo_out_or_overlay_before_tracking(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for args, flag in ((["--out", str(fifo)], "--out"), (["--out", str(tmp_path / "t.json"), "--overlay", str(fifo)],
                                                          "--overlay")):
        proc = _cli(["track", str(tmp_path / "missing.mp4"), "--rig", "pendulum", *args], tmp_path)
        err = proc.stderr.strip()
        assert proc.returncode == 2 and "\n" not in err, (args, proc.returncode, err)
        assert err == f"vid2sid track: cannot write {flag} {fifo}: {fifo} {FIFO_SAYS}", err
    assert not (tmp_path / "t.json").exists()
