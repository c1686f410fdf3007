"""README's "your own robot" path: the lines between the own-robot markers, run exactly as written."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

ROBOT_XML = """
<mujoco model="my_robot">
  <option timestep="0.002"/>
  <worldbody>
    <light pos="0 -1 3" dir="0 0.3 -1"/>
    <geom name="floor" type="plane" size="3 3 0.1" rgba="0.85 0.85 0.85 1"/>
    <body name="arm" pos="0 0 1.5">
      <joint name="swing" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.008" rgba="0.3 0.3 0.3 1" mass="0.01"/>
      <geom name="bob" type="sphere" pos="0 0 -0.5" size="0.05" rgba="0.9 0.05 0.05 1" mass="0.05"/>
      <site name="tip" pos="0 0 -0.5" size="0.01"/>
    </body>
  </worldbody>
</mujoco>
"""


def _readme_lines() -> str:
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- own-robot:begin -->")[1].split("<!-- own-robot:end -->")[0]
    code = re.search(r"```bash\n(.*?)```", block, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10, "the README promises at most 10 lines"
    return code


def _film(tmp: Path, code: str) -> tuple[float, float]:
    """The 'real' clip: the same model at hidden damping and release angle, rendered through the README's camera."""
    import cv2
    import yaml

    from vid2sid_ros.rigs import load_rig

    doc = yaml.safe_load(code.split("<<'EOF'\n")[1].split("\nEOF\n")[0])
    doc["trials"] = [{"name": "t0", "source": {"sim2sim": {}}, "init": {"qpos[swing]": "free"},
                      "excitation": {"kind": "step", "amplitude": 0.0, "duration": 6.0, "rate": 30.0}}]
    rig = load_rig(doc, source=(str(tmp / "film.yaml"), tmp))
    truth = {"damping": 0.02, "t0_qpos_swing": 0.45}
    twin = rig.make_twin()
    twin.set_parameters(truth)
    frames = twin.rollout(rig.excitations["train"][0], render=True).frames
    w = cv2.VideoWriter(str(tmp / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (320, 240))
    for f in frames:
        w.write(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2BGR))
    w.release()
    return truth["damping"], truth["t0_qpos_swing"]


def test_readme_own_robot_lines_run_as_written(tmp_path):
    code = _readme_lines()
    (tmp_path / "robot.xml").write_text(ROBOT_XML)
    damping, angle = _film(tmp_path, code)
    # `make demo` installs the command as .venv/bin/vid2sid, not on PATH: the lines must call it so (a bare
    # `vid2sid` failed with "command not found" after `make demo`); here .venv/bin/vid2sid = this checkout's CLI
    calls = re.findall(r"^\s*(\S*vid2sid)\s", code, re.M)
    assert calls and set(calls) == {".venv/bin/vid2sid"}, calls
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vid2sid").write_text(f"#!/bin/sh\nexec {sys.executable} -m vid2sid_ros.cli \"$@\"\n")
    (bin_dir / "vid2sid").chmod(stat.S_IRWXU)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "runs" / "my_robot"
    assert (run / "report.html").stat().st_size > 10_000
    res = json.loads((run / "result.json").read_text())["values"]
    assert res["damping"] == pytest.approx(damping, rel=0.1)
    assert res[next(k for k in res if k.endswith("_qpos_swing"))] == pytest.approx(angle, abs=0.02)


def test_readme_describes_the_demo_output_in_the_order_it_is_printed():
    """README said the demo "ends by printing the holdout error and the identified length", but warnings, the
    period check, the total time and the report path follow (commands/demo.summary_lines): the text says so."""
    from vid2sid_ros.commands.demo import summary_lines

    text = (REPO / "README.md").read_text()
    para = text.split("`make demo` is the main job")[1].split("\n\n")[0]
    assert "ends by printing the holdout error" not in para
    said = ["holdout error", "residual-diagnosis warning", "identified\nlength", "identifiability warnings",
            "period check", "total time", "ends with the path of\n`runs/demo/report.html`"]
    flat = " ".join(para.split())
    pos = [flat.find(" ".join(w.split())) for w in said]
    assert -1 not in pos and pos == sorted(pos), dict(zip(said, pos))
    s = {"holdout_mae_px": 2.1, "training_mae_px": 1.9, "proposer": "reasoner", "length_m": 1.0651,
         "length_std_m": 0.002, "measured_period_s": 2.07, "twin_period_s": 2.071, "period_finite_amplitude_s": 2.072,
         "amplitude_rad": 0.3, "period_small_angle_s": 2.07, "methods": {"reasoner": {}}, "wall_s": 50.0,
         "report": "runs/demo/report.html"}
    out = summary_lines(s, ["stopped: converged", "warning: Residual diagnosis: probably wrong",
                            "warning: damping is at its lower bound (0 N*m*s/rad)"])
    heads = ["holdout MAE", "warning: Residual", "identified length", "warning: damping", "period:", "total ", "report:"]
    idx = [next(i for i, ln in enumerate(out) if ln.startswith(h)) for h in heads]
    assert idx == sorted(idx) and idx[-1] == len(out) - 1  # the order the README gives
