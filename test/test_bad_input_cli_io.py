"""Adversarial input: `vid2sid track` outputs and `vid2sid benchmark sim2sim` settings.

Each case was a traceback before; now one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "77")
os.environ.setdefault("MUJOCO_GL", "egl")

from vid2sid_ros.cli import main  # noqa: E402
from vid2sid_ros.io.video import write_video  # noqa: E402

TOY = "toy"


@pytest.fixture()
def black_video(tmp_path):
    p = tmp_path / "black.mp4"
    write_video(p, np.zeros((4, 48, 64, 3), np.uint8), 30.0)
    return p


def test_track_output_paths_that_cannot_be_written(tmp_path, capsys, black_video):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    cases = [(["--out", str(tmp_path)], f"--out {tmp_path}: it is a directory, expected a file path"),
             (["--out", str(tmp_path / "t.json"), "--overlay", str(tmp_path)],
              f"--overlay {tmp_path}: it is a directory, expected a file path"),
             # was "afile: File exists" (issue 12 item 14)
             (["--out", str(blocker / "sub" / "t.json")],
              f"--out {blocker / 'sub' / 't.json'}: {blocker} is a file, not a directory"),
             (["--out", str(tmp_path / "t.json"), "--overlay", str(blocker / "o.mp4")],
              f"--overlay {blocker / 'o.mp4'}: {blocker} is a file, not a directory")]
    if os.path.exists("/dev/full"):  # was "None: No space left on device"
        cases.append((["--out", "/dev/full"], "--out /dev/full: No space left on device"))
    for extra, msg in cases:  # were: IsADirectoryError / VideoError / FileExistsError tracebacks
        rc = main(["track", str(black_video), "--rig", "finger", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
        assert f"vid2sid track: cannot write {msg}" in err, err
        assert not (tmp_path / "t.json").exists()  # was: --out written before --overlay was refused


def test_track_all_black_video_is_all_invalid_not_a_crash(tmp_path, capsys, black_video):
    rc = main(["track", str(black_video), "--rig", "finger", "--out", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    d = json.loads((tmp_path / "t.json").read_text())
    assert rc == 1 and "keypoints found: proximal 0%, middle 0%, tip 0%" in err
    assert np.array(d["valid"]).shape == (4, 3) and not np.array(d["valid"]).any()


def test_benchmark_budget_below_one_evaluation_fails_fast(tmp_path, capsys):
    rc = main(["benchmark", "sim2sim", "--rig", TOY, "--methods", "random", "--seeds", "1", "--budget", "1",
               "--no-progress", "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    # was: a CalibrationError traceback after the stand-in trials had been built
    assert rc == 2 and "Traceback" not in err
    assert "rollout budget 1 cannot pay for one evaluation of rig 'toy' (2 training excitations = 2 rollouts)" in err


def test_benchmark_reusing_out_with_other_settings(tmp_path, capsys):
    argv = ["benchmark", "sim2sim", "--rig", TOY, "--methods", "random,random", "--seeds", "1", "--iterations", "1",
            "--no-progress", "--out", str(tmp_path / "b")]
    assert main([*argv, "--budget", "6"]) == 0
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    assert list(res["per_seed"][0]["methods"]) == ["random"]  # duplicate method ran once
    capsys.readouterr()
    rc = main([*argv, "--budget", "8"])  # was: CalibrationError traceback
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "'rollout_budget' differs from the interrupted run (6 vs 8)" in err and "choose another --out" in err


def test_benchmark_gemini_without_key_is_one_line(tmp_path, capsys, monkeypatch):
    for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(v, raising=False)
    rc = main(["benchmark", "sim2sim", "--rig", TOY, "--methods", "gemini", "--seeds", "1", "--no-progress",
               "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "gemini: no API key: set GEMINI_API_KEY" in err  # was: traceback
