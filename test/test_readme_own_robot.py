"""README's five-minute path for a robot with a motor and a logged command: the lines between the
own-robot markers (write the rig config, track and check the overlay, calibrate), run exactly as
written on a clip filmed from the same model at hidden parameters; and the README's shape."""

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

ARM_XML = """
<mujoco model="my_arm">
  <option timestep="0.002"/>
  <worldbody>
    <light pos="0 -1 3" dir="0 0.3 -1"/>
    <geom name="floor" type="plane" size="3 3 0.1" rgba="0.85 0.85 0.85 1"/>
    <body name="link" pos="0 0 1.3">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.4" size="0.012" rgba="0.3 0.3 0.3 1" mass="0.05"/>
      <geom name="bob" type="sphere" pos="0 0 -0.4" size="0.04" rgba="0.9 0.05 0.05 1" mass="0.1"/>
      <site name="tip" pos="0 0 -0.4" size="0.01"/>
    </body>
  </worldbody>
</mujoco>
"""

#: the hidden values the clip is filmed at
TRUTH = {"motor_gain": 0.2, "damping": 0.02}


def _readme_lines() -> str:
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- own-robot:begin -->")[1].split("<!-- own-robot:end -->")[0]
    return re.search(r"```bash\n(.*?)```", block, re.S).group(1)


def _config(code: str) -> dict:
    import yaml

    return yaml.safe_load(code.split("<<'EOF'\n")[1].split("\nEOF\n")[0])


def _logged_command(path: Path) -> None:
    """A logged motor command: a chirp 0.2 -> 1.5 Hz over 8 s at 30 Hz (time column + one column per motor)."""
    t = np.arange(0.0, 8.0, 1.0 / 30.0)
    u = np.sin(2 * np.pi * (0.2 * t + (1.5 - 0.2) * t ** 2 / (2 * 8.0)))
    path.write_text("time,motor\n" + "".join(f"{a:.6f},{b:.6f}\n" for a, b in zip(t, u)))


def _film(tmp: Path, code: str) -> None:
    """The 'real' clip: the README's rig at the hidden values, commanded by the log, rendered through its camera."""
    import cv2

    from vid2sid_ros.rigs import load_rig

    doc = _config(code)
    doc["trials"] = [{"name": "t0", "source": {"sim2sim": {}}, "excitation": "logged"}]
    rig = load_rig(doc, source=(str(tmp / "film.yaml"), tmp))
    twin = rig.make_twin()
    twin.set_parameters(TRUTH)
    frames = twin.rollout(rig.excitations["train"][0], render=True).frames
    w = cv2.VideoWriter(str(tmp / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (320, 240))
    for f in frames:
        w.write(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2BGR))
    w.release()


def test_readme_own_robot_lines_run_as_written(tmp_path):
    code = _readme_lines()
    (tmp_path / "arm.xml").write_text(ARM_XML)
    _logged_command(tmp_path / "commands.csv")
    _film(tmp_path, code)
    # `make demo` installs the command as .venv/bin/vid2sid, not on PATH: the lines must call it so (a bare
    # `vid2sid` fails with "command not found" after `make demo`); here .venv/bin/vid2sid = this checkout's CLI
    calls = re.findall(r"^\s*(\S*vid2sid) (\w+)", code, re.M)
    assert [c[1] for c in calls] == ["track", "calibrate"] and {c[0] for c in calls} == {".venv/bin/vid2sid"}
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vid2sid").write_text(f"#!/bin/sh\nexec {sys.executable} -m vid2sid_ros.cli \"$@\"\n")
    (bin_dir / "vid2sid").chmod(stat.S_IRWXU)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # step 1: the overlay to check, and the found fraction the README tells the reader to look at
    assert (tmp_path / "tracked.mp4").stat().st_size > 10_000
    assert "keypoints found: tip 100%" in r.stderr
    # steps 2 and 3: the report, the values the README states (within 1 % of the hidden ones)
    run = tmp_path / "runs" / "my_arm"
    assert (run / "report.html").stat().st_size > 10_000
    res = json.loads((run / "result.json").read_text())
    for name, value in TRUTH.items():
        assert res["values"][name] == pytest.approx(value, rel=0.01), name
    stop = next(ln for ln in r.stdout.splitlines() if ln.startswith("stopped:"))
    assert r.stdout.count("\niter ") <= 11 and stop.startswith("stopped: converged"), stop


def test_the_calibrate_help_example_is_the_readme_config(capsys):
    """`calibrate --help` shows the config the README runs, so the help's example is a tested one."""
    import yaml

    from vid2sid_ros.cli import main

    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    example = capsys.readouterr().out.split("For example::", 1)[1].split("The run directory")[0]
    assert yaml.safe_load(re.sub(r"^    ", "", example.strip("\n"), flags=re.M)) == _config(_readme_lines())


def test_readme_is_short_and_fits_the_page():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert [n for n, ln in enumerate(lines, 1) if len(ln) > 100] == []
    assert "make test" in "\n".join(lines)  # CI (.ci/run) runs the README's test command
    for link in re.findall(r"\]\(([^)#]+)", "\n".join(lines)):  # every link and picture exists
        assert (REPO / link).exists(), link
    # the picture is the browser test's screenshot of a report (test/test_report_browser.py tags it)
    from helpers.browser import README_PICTURE_SOURCE, png_text

    pics = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", "\n".join(lines))
    assert pics == ["docs/images/report.png"], pics
    pic = REPO / pics[0]
    assert pic.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pic.stat().st_size < 300_000
    assert png_text(pic).get("Source") == README_PICTURE_SOURCE
    import cv2

    img = cv2.imread(str(pic))
    assert img is not None and img.shape[1] == 1100 and img.std() > 10  # the screenshot's width, not blank
    assert "readme-picture:" in (REPO / "Makefile").read_text()


def test_readme_describes_the_demo_output_in_the_order_it_is_printed():
    """The README's demo paragraph names what the demo prints in the order commands/demo.summary_lines
    prints it (holdout error, warnings, length, ..., the report path last)."""
    from vid2sid_ros.commands.demo import summary_lines

    text = (REPO / "README.md").read_text()
    para = text.split("`make demo` runs offline")[1].split("\n\n")[0]
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
