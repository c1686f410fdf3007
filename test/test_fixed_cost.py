"""The fixed cost of a calibration: no heavy import for the chirp, every phase's wall and CPU time and every
rollout (charged and diagnostic) in result.json."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vid2sid_ros.core.excitation import linear_chirp


@pytest.mark.parametrize("f0, f1, t1, phi", [(0.2, 3.0, 4.0, -90.0), (1.0, 0.5, 2.5, 0.0), (0.0, 7.3, 1.0, 33.0)])
def test_linear_chirp_is_scipys_bit_for_bit(f0, f1, t1, phi):
    from scipy.signal import chirp

    t = np.arange(0, 301) / 75.0
    np.testing.assert_array_equal(linear_chirp(t, f0, t1, f1, phi), chirp(t, f0=f0, t1=t1, f1=f1, method="linear",
                                                                         phi=phi))


def test_building_the_finger_rig_does_not_import_scipy_signal():
    code = ("import sys\nfrom vid2sid_ros.sim.mujoco_finger import make_rig\nrig = make_rig()\n"
            "assert rig.excitations['train'], 'no excitation'\nprint('scipy.signal' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__)
                                                                              .resolve().parents[1])})
    assert out.stdout.strip() == "False", out.stderr


def test_every_rollout_is_in_one_phase_with_its_wall_and_cpu_time(tmp_path):
    import json

    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
    from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
    from vid2sid_ros.calibration.proposers import make_proposer
    from vid2sid_ros.report import run_summary_lines
    from vid2sid_ros.sim.toy import make_rig

    rig = make_rig()
    real = make_sim2sim_trial(rig, {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}, noise="none")
    res = run_calibration(rig, real, make_proposer("reasoner"), CalibrationConfig(iterations=2, rollout_budget=30),
                          tmp_path / "run")
    phases = json.loads((tmp_path / "run" / "result.json").read_text())["phases"]
    assert list(phases) == ["start", "iterations", "final_identifiability", "best_point", "holdout", "diagnosis",
                            "trial_curves", "write"]
    assert sum(p["charged_rollouts"] for p in phases.values()) == res.rollouts > 0
    assert sum(p["diagnostic_rollouts"] for p in phases.values()) == res.diagnostic_rollouts > 0
    assert phases["iterations"]["charged_rollouts"] == res.rollouts  # iteration 0 included
    assert phases["start"]["diagnostic_rollouts"] == res.identifiability.rollouts
    assert phases["final_identifiability"]["diagnostic_rollouts"] == res.final_identifiability.rollouts
    assert all(p["wall_s"] >= 0 and p["cpu_s"] >= 0 for p in phases.values())
    line = next(x for x in run_summary_lines(tmp_path / "run", width=1 << 30) if x.startswith("time: "))
    assert f"for {res.rollouts} charged rollouts, diagnostics {res.diagnostic_rollouts} rollouts" in line


def test_phase_ledger_adds_a_phase_met_twice_and_charges_each_rollout_once():
    from vid2sid_ros.calibration.phases import PhaseLedger

    t = iter([0.0, 1.0, 1.0, 3.0, 3.0, 3.5]).__next__
    c = iter([0.0, 0.5, 0.5, 1.0, 1.0, 1.25]).__next__
    meters = [(0, 0)]
    led = PhaseLedger(lambda: meters[-1], clock=t, cpu=c)
    led.start("a")
    meters.append((4, 1))
    led.start("b")
    meters.append((4, 9))
    led.start("a")
    meters.append((6, 9))
    led.stop()
    led.stop()
    assert led.to_dict() == {"a": {"wall_s": 1.5, "cpu_s": 0.75, "charged_rollouts": 6, "diagnostic_rollouts": 1},
                             "b": {"wall_s": 2.0, "cpu_s": 0.5, "charged_rollouts": 0, "diagnostic_rollouts": 8}}


def test_calibrate_command_adds_the_load_and_report_phases(tmp_path, capsys):
    import json

    from vid2sid_ros.cli import main

    out = tmp_path / "run"
    assert main(["calibrate", "--rig", "toy", "--iterations", "2", "--out", str(out), "--quiet"]) == 0
    res = json.loads((out / "result.json").read_text())
    phases = res["phases"]
    assert list(phases)[0] == "load" and list(phases)[-1] == "report"
    assert sum(p["charged_rollouts"] for p in phases.values()) == res["rollouts"]
    assert sum(p["diagnostic_rollouts"] for p in phases.values()) == res["diagnostic_rollouts"]
    assert phases["load"]["charged_rollouts"] == phases["report"]["charged_rollouts"] == 0
    printed = capsys.readouterr().out.replace("\n    ", " ")  # a line wrapped to the width, read whole
    assert any(line.startswith("time: ") and "longest phase" in line for line in printed.splitlines())


def test_add_phase_leaves_a_file_that_is_not_a_result_alone(tmp_path):
    from vid2sid_ros.commands.phases_file import add_phase

    f = tmp_path / "result.json"
    f.write_text("[1, 2]")
    add_phase(f, "report", {"wall_s": 1.0})
    assert f.read_text() == "[1, 2]"
    f.write_text('{"phases": {"a": {}}}')
    add_phase(f, "report", {"wall_s": 1.0})
    assert __import__("json").loads(f.read_text()) == {"phases": {"a": {}, "report": {"wall_s": 1.0}}}


def test_a_twin_renders_only_the_rows_asked_for_and_they_are_the_full_renders_rows():
    """The report's video shows at most 100 frames per trial: the MuJoCo twins render only those rows
    (was: every step, then thinned: 28 s of CPU on a 3 s trial sampled at 500 Hz)."""
    from vid2sid_ros.core.excitation import Excitation
    from vid2sid_ros.rigs import load_rig
    from vid2sid_ros.sim.base import TwinError

    twin = load_rig("finger").make_twin(width=64, height=48)
    exc = Excitation("s", 30.0, np.linspace(0.1, 0.5, 12)[:, None], ("flexor_motor",))
    full = twin.rollout(exc, render=True)
    part = twin.rollout(exc, render=True, render_steps=[0, 5, 11, 5])
    assert part.frames.shape == (4,) + full.frames.shape[1:]
    np.testing.assert_array_equal(part.frames, full.frames[[0, 5, 11, 5]])
    np.testing.assert_array_equal(part.trajectory.keypoints, full.trajectory.keypoints)
    with pytest.raises(TwinError, match="render_steps: row 12 is outside the rollout's 12 rows"):
        twin.rollout(exc, render=True, render_steps=[12])


def test_the_truncated_gaussian_interval_needs_no_scipy_stats():
    code = ("import sys\nfrom vid2sid_ros.calibration.identifiability import stated_interval\n"
            "from vid2sid_ros.core.parameters import load_parameter_set\n"
            "from vid2sid_ros.sim.mujoco_finger import PARAMETERS_PATH\n"
            "spec = load_parameter_set(PARAMETERS_PATH)['joint_stiffness']\n"
            "print(stated_interval(spec, spec.from_unit(0.0), -0.05, 0.04)[2], 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__)
                                                                              .resolve().parents[1])})
    assert out.stdout.strip() == "one-sided (lower bound) False", out.stderr


@pytest.mark.parametrize("rig_name", ["finger", "examples/rigs/spherical_pendulum/rig.yaml"])
def test_a_preview_render_is_the_same_view_at_the_thumbnail_size(rig_name):
    """render_width renders the report's 200 px thumbnails directly (was: the full image, then shrunk):
    the same view, within a grey level of the shrunk full render on average."""
    import cv2

    from pathlib import Path

    from vid2sid_ros.rigs import load_rig

    root = Path(__file__).resolve().parents[1]
    rig = load_rig(rig_name if rig_name == "finger" else str(root / rig_name))
    twin = rig.make_twin()
    exc = rig.excitations["train"][0]
    rows = [0, exc.num_steps // 2, exc.num_steps - 1]
    full = twin.rollout(exc, render=True, render_steps=rows).frames
    small = twin.rollout(exc, render=True, render_steps=rows, render_width=200).frames
    h = int(round(full.shape[1] * 200 / full.shape[2])) // 2 * 2
    assert small.shape == (3, h, 200, 3)
    shrunk = np.stack([cv2.resize(f, (200, h), interpolation=cv2.INTER_AREA) for f in full])
    assert np.abs(shrunk.astype(int) - small).mean() < 1.0
    assert small.std() > 5  # a picture, not a blank buffer
