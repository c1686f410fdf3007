"""A run's promised artefacts: written atomically, and a missing one is never reported as success."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

import yaml

from vid2sid_ros import cli
from vid2sid_ros.commands.calibrate import EXIT_ARTEFACT_MISSING
from vid2sid_ros.sim.toy import ToyArmTwin


def test_model_export_failure_is_reported_and_exits_3(tmp_path, monkeypatch, capsys):
    def cut_short(self, path):  # the model changed on disk mid-run: half written, then the exporter fails
        with open(path, "w") as f:
            f.write("toy_arm: {stiff")
        raise ValueError("the model file no longer parses (cut short)")

    monkeypatch.setattr(ToyArmTwin, "export_model", cut_short)
    rd = tmp_path / "run"
    rc = cli.main(["calibrate", "--rig", "toy", "--iterations", "2", "--out", str(rd), "--no-report"])
    out, err = capsys.readouterr()
    assert rc == EXIT_ARTEFACT_MISSING == 3
    assert "calibrated_model.yaml" in err and "cut short" in err
    cal = yaml.safe_load((rd / "result.yaml").read_text())["calibration"]
    assert cal["status"] == "artefacts_missing"
    assert cal["artefacts_missing"][0]["file"] == "calibrated_model.yaml"
    assert not (rd / "calibrated_model.yaml").exists()  # neither half a model ...
    assert not [p.name for p in rd.iterdir() if p.name.startswith(".calibrated_model")]  # ... nor its temporary
    assert "  model:" not in out


def _limit_file_size():  # a full disk for files over 2 MB: writes past it fail (EFBIG) instead of killing us
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))


def test_report_that_cannot_be_written_leaves_no_half_page_and_exits_3(tmp_path, ros_env):
    rd = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", "--rig", "toy", "--iterations", "2",
                        "--out", str(rd), "--quiet"], capture_output=True, text=True, env=ros_env,
                       preexec_fn=_limit_file_size, timeout=300)
    assert p.returncode == 3, p.stderr
    assert "report not written" in p.stderr and "report.html" in p.stderr
    assert not (rd / "report.html").exists()  # the toy's report is ~5 MB: never a truncated page
    assert not [x.name for x in rd.iterdir() if x.name.startswith(".report.html")]
    cal = yaml.safe_load((rd / "result.yaml").read_text())["calibration"]
    assert cal["status"] == "artefacts_missing" and cal["artefacts_missing"][0]["file"] == "report.html"
    assert (rd / "calibrated_model.yaml").is_file()  # the rest of the run stands


def test_atomic_output_keeps_the_old_file_when_the_writer_fails(tmp_path):
    import os

    import pytest

    from vid2sid_ros.core.files import atomic_output, atomic_write_text

    p = atomic_write_text(tmp_path / "result.yaml", "old: 1\n")
    assert oct(os.stat(p).st_mode & 0o777) == oct(0o666 & ~_current_umask())
    with pytest.raises(RuntimeError):
        with atomic_output(p) as tmp:
            tmp.write_text("new: half")
            raise RuntimeError("the writer failed")
    assert p.read_text() == "old: 1\n" and [x.name for x in tmp_path.iterdir()] == ["result.yaml"]


def _current_umask() -> int:
    import os

    m = os.umask(0o022)
    os.umask(m)
    return m
