"""Every output names the unit of its errors: ``result.json`` / ``result.yaml`` store
``training_mae`` / ``holdout_mae`` with ``unit`` / ``holdout_unit`` (px for image keypoints, m
for mocap points, shown in mm, rad for joint angles), never a ``*_px`` key for a trial that is
not measured in pixels; an older run directory with ``*_px`` keys is still read.

One hinged arm is calibrated three times, on the same motion measured three ways: a filmed
stand-in (sim2sim through the camera, px), a mocap CSV of the tip in millimetres, and a
joint-state CSV of the hinge angle in radians. Each rig has a training and a holdout trial.
"""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from vid2sid_ros.cli import main

ARM = """<mujoco model="arm">
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm" pos="0 0 0.3">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.012" mass="0.2" rgba="0.8 0.2 0.2 1"/>
      <site name="tip_site" pos="0 0 -0.25" size="0.01"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="hinge" gear="1"/></actuator>
</mujoco>
"""
RATE, T = 50.0, 60
DAMPING = {"damping": {"unit": "N*m*s/rad", "lower": 0.005, "upper": 0.1, "nominal": 0.04, "scale": "log",
                       "target": "dof_damping[hinge]", "meaning": "hinge damping"}}


def _swing(q0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Free swing from ``q0`` rad at the true damping: times (T,), hinge angle (T,) rad, tip (T, 3) m."""
    m = mujoco.MjModel.from_xml_string(ARM)
    d = mujoco.MjData(m)
    d.qpos[0] = q0
    mujoco.mj_forward(m, d)
    sub = int(round(1.0 / RATE / m.opt.timestep))
    q, tip = [], []
    for _ in range(T):
        q.append(float(d.qpos[0]))
        tip.append(d.site_xpos[0].copy())
        mujoco.mj_step(m, d, sub)
    return np.arange(T) / RATE, np.array(q), np.array(tip)


def _rig(tmp: Path, trials: list) -> Path:
    (tmp / "arm.xml").write_text(ARM)
    doc = {"rig": "arm", "model": "arm.xml", "keypoints": {"tip": "tip_site"},
           "markers": [{"name": "tip", "site": "tip_site", "rgba": [1, 0, 0, 1], "radius": 0.015}],
           "camera": {"width": 160, "height": 120, "fx": 150.0, "pose": {"position": [0, -1, 0.2],
                                                                         "look_at": [0, 0, 0.2]}},
           "parameters": DAMPING, "trials": trials,
           "calibration": {"iterations": 1, "rollout_budget": 6, "identifiability": False,
                           "final_identifiability": False}}
    p = tmp / "rig.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _trials(kind: str, tmp: Path) -> list:
    out = []
    for name, q0, split in (("swing", 0.6, "train"), ("small", -0.4, "holdout")):
        t, q, tip = _swing(q0)
        init = {"qpos[hinge]": q0}
        if kind == "px":
            src = {"sim2sim": {"noise": "none", "truth": {"damping": 0.02}}}
        elif kind == "mm":
            rows = ["time,tip_x,tip_y,tip_z"] + [f"{a:.4f},{x * 1e3:.4f},{y * 1e3:.4f},{z * 1e3:.4f}"
                                                  for a, (x, y, z) in zip(t, tip)]
            (tmp / f"{name}.csv").write_text("\n".join(rows) + "\n")
            src = {"mocap": {"path": f"{name}.csv", "unit": "mm"}}
        else:
            rows = ["time,hinge"] + [f"{a:.4f},{float(b)!r}" for a, b in zip(t, q)]
            (tmp / f"{name}.csv").write_text("\n".join(rows) + "\n")
            src = {"joint_csv": {"path": f"{name}.csv", "joints": ["hinge"], "rate": RATE}}
        out.append({"name": name, "source": src, "excitation": {"kind": "sine", "amplitude": 0.0, "frequency": 1.0,
                                                                "duration": T / RATE, "rate": RATE},
                    "init": init, "split": split})
    return out


@pytest.mark.parametrize("kind, unit, shown", [("px", "px", "px"), ("mm", "m", "mm"), ("rad", "rad", "rad")])
def test_result_files_name_the_unit_of_every_error(kind, unit, shown, tmp_path, capsys):
    cfg = _rig(tmp_path, _trials(kind, tmp_path))
    assert main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--no-report"]) == 0
    text = capsys.readouterr().out
    res = json.loads((tmp_path / "run" / "result.json").read_text())
    assert res["unit"] == unit and res["holdout_unit"] == unit
    for key in ("training_mae", "initial_mae", "holdout_mae"):
        assert isinstance(res[key], float) and np.isfinite(res[key]), (key, res.get(key))
    assert set(res["per_keypoint_mae"]) == ({"hinge"} if kind == "rad" else {"tip"})
    assert not [k for k in res if k.endswith("_px")], sorted(res)
    cal = yaml.safe_load((tmp_path / "run" / "result.yaml").read_text())["calibration"]
    assert cal["measurement_unit"] == unit and cal["holdout_unit"] == unit
    assert cal["training_mae"] == pytest.approx(res["training_mae"]) and cal["holdout_mae"] == res["holdout_mae"]
    assert not [k for k in cal if k.endswith("_px")], sorted(cal)
    summary = text[text.index("\nstopped:"):]
    line = next(ln for ln in summary.splitlines() if "training MAE" in ln)
    assert f" {shown} " in line + " " and "holdout MAE" in line, line
    if kind != "px":
        assert " px" not in line, line


def test_an_older_run_with_px_keys_is_still_read(tmp_path, capsys):
    """A run directory written before the keys were renamed (``error_px``, ``holdout_mae_px``...)
    still gives its summary and report."""
    from vid2sid_ros.report.run import load_run
    from vid2sid_ros.report.terminal import run_summary_lines

    cfg = _rig(tmp_path, _trials("rad", tmp_path))
    assert main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--no-report"]) == 0
    capsys.readouterr()
    path = tmp_path / "run" / "result.json"
    res = json.loads(path.read_text())
    old = {({"training_mae": "error_px", "initial_mae": "initial_error_px", "holdout_mae": "holdout_mae_px",
             "per_keypoint_mae": "per_keypoint_px"}.get(k, k)): v for k, v in res.items()}
    path.write_text(json.dumps(old))
    run = load_run(tmp_path / "run")
    assert run.result["holdout_mae"] == res["holdout_mae"] and run.result["training_mae"] == res["training_mae"]
    text = "\n".join(run_summary_lines(run))
    assert "holdout MAE" in text and "rad" in text and "no holdout trial" not in text
    # --resume of that ended run is recognised as finished: it runs no iteration, changes nothing
    lines = (tmp_path / "run" / "iterations.jsonl").read_text()
    assert main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--no-report", "--resume"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "run" / "iterations.jsonl").read_text() == lines
    assert "is finished" in out and "nothing was changed" in out


def test_run_json_names_the_unit_of_the_iteration_records(tmp_path, capsys):
    cfg = _rig(tmp_path, _trials("mm", tmp_path))
    assert main(["calibrate", str(cfg), "--out", str(tmp_path / "run"), "--no-report"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["unit"] == "m"
