"""The multistart's points are independent: they go out as one batch on the calibration's executor and give
exactly the one-at-a-time loop's table, rollouts and best point on every backend."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers.planar_arm import record_csv, write_rig  # noqa: E402
from vid2sid_ros.benchmark.sim2sim import draw_ground_truth, make_sim2sim_trial  # noqa: E402
from vid2sid_ros.calibration import batch  # noqa: E402
from vid2sid_ros.calibration.executor import make_executor  # noqa: E402
from vid2sid_ros.calibration.objective import TrialObjective  # noqa: E402
from vid2sid_ros.calibration.start import StartConfig, generic_start, multistart  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402

POINTS = 5


def _one_at_a_time(twin, real, params, seed):
    """The reference: the multistart's candidates evaluated one after another on a fresh objective."""
    obj = TrialObjective(twin, real.train_excitations, real.train, params)
    _, _, _, table = multistart(twin, real, params, points=POINTS, seed=seed, executor=None)
    out = []
    for values, _ in table:
        ev, _ = obj.evaluate(values)
        out.append((values, math.inf if ev.failed else float(ev.error_px), ev.rollouts))
    return out


def _planar_arm(tmp_path):
    from vid2sid_ros.rigs import build_real_trial, load_rig

    record_csv(tmp_path / "t0.csv")
    rig = load_rig(write_rig(tmp_path))
    return rig, build_real_trial(rig)


def _toy():
    rig = make_rig()
    return rig, make_sim2sim_trial(rig, draw_ground_truth(rig.parameters, 2), seed=2, noise="keypoint")


@pytest.mark.parametrize("which", ["toy", "planar_arm"])
@pytest.mark.parametrize("backend", ["serial", "threads", "pool"])
def test_the_multistart_on_an_executor_is_the_one_at_a_time_table(which, backend, tmp_path, monkeypatch):
    rig, real = _toy() if which == "toy" else _planar_arm(tmp_path)
    params = rig.parameters
    twin = rig.make_twin()
    reference = _one_at_a_time(rig.make_twin(), real, params, seed=4)
    sizes: list[int] = []
    real_batch = batch.evaluate_batch
    monkeypatch.setattr(batch, "evaluate_batch", lambda obj, pts, ex=None, **k: sizes.append(len(pts))
                        or real_batch(obj, pts, ex, **k))
    with make_executor(backend, 2) as ex:
        best, err, spent, table = multistart(twin, real, params, points=POINTS, seed=4, executor=ex)
    assert sizes == [POINTS + 1]  # every candidate in one batch
    assert [v for v, _ in table] == [v for v, _, _ in reference]
    assert [e for _, e in table] == [e for _, e, _ in reference]  # the same to the bit
    assert spent == sum(r for _, _, r in reference) == (POINTS + 1) * len(real.train)
    i = int(np.argmin([e for _, e, _ in reference]))
    assert best == reference[i][0] and err == reference[i][1]


def test_generic_start_hands_its_executor_to_the_multistart(tmp_path):
    rig, real = _planar_arm(tmp_path)
    with make_executor("threads", 2) as ex:
        threaded = generic_start(rig.make_twin(), real, rig.parameters, StartConfig("multistart", POINTS), seed=1,
                                 executor=ex)
    serial = generic_start(rig.make_twin(), real, rig.parameters, StartConfig("multistart", POINTS), seed=1)
    assert threaded.parameters.nominal() == serial.parameters.nominal()
    assert (threaded.rollouts, threaded.error, threaded.notes) == (serial.rollouts, serial.error, serial.notes)


def test_calibrate_accounts_the_multistart_as_a_phase_with_its_charged_rollouts(tmp_path, capsys):
    """Was: the multistart's rollouts (charged to the budget given) were in no phase of result.json, and its
    line printed the training errors without their unit."""
    import json

    from vid2sid_ros.cli import main

    record_csv(tmp_path / "t0.csv")
    cfg = write_rig(tmp_path, calibration={"iterations": 2, "rollout_budget": 40, "seed": 0,
                                           "start": {"kind": "multistart", "points": POINTS}})
    rc = main(["calibrate", str(cfg), "--no-report", "--executor", "threads", "--workers", "2",
               "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    line = next(x for x in out.splitlines() if x.startswith("start: multistart"))
    assert f"{POINTS + 1} rollouts; best training error 0." in line and line.count(" rad") == 2, line
    res = json.loads((tmp_path / "run" / "result.json").read_text())
    phases = res["phases"]
    assert phases["multistart"]["charged_rollouts"] == POINTS + 1  # one training trial
    assert phases["multistart"]["diagnostic_rollouts"] == 0 and phases["load"]["charged_rollouts"] == 0
    charged = sum(p["charged_rollouts"] for p in phases.values())
    assert charged == res["rollouts"] + POINTS + 1 <= 40
    # the time line gives each phase its own charged rollouts (was: all of them beside the iterations' time)
    out = " ".join(out.split())  # the terminal wraps the line
    assert f"iterations {phases['iterations']['wall_s']:.1f} s for {res['rollouts']} charged rollouts, " in out
    assert f"multistart {phases['multistart']['wall_s']:.1f} s for {POINTS + 1} charged rollouts, diag" in out


def _history_lines(run):
    import json

    rows = [json.loads(x) for x in (run / "iterations.jsonl").read_text().splitlines() if x.strip()]
    for r in rows:
        r.pop("wall_s", None)
    return rows


def test_a_resume_keeps_the_recorded_multistart_instead_of_rolling_it_out_again(tmp_path, capsys, monkeypatch):
    """Was: every --resume (and the command to go on) rolled the whole multistart out again before continuing."""
    from vid2sid_ros.calibration import start
    from vid2sid_ros.cli import main

    record_csv(tmp_path / "t0.csv")
    cfg = write_rig(tmp_path, calibration={"iterations": 1, "rollout_budget": 80, "seed": 0,
                                           "stop_when_converged": False,  # ends "iterations done": it goes on
                                           "start": {"kind": "multistart", "points": POINTS}})
    run, whole = tmp_path / "run", tmp_path / "whole"
    assert main(["calibrate", str(cfg), "--no-report", "--out", str(run)]) == 0
    rec = __import__("json").loads((run / "start_stage.json").read_text())
    assert rec["rollouts"] == POINTS + 1 and rec["points"] == POINTS and rec["train_trials"] == ["log_train"]
    calls: list[int] = []
    real_multistart = start.multistart
    monkeypatch.setattr(start, "multistart", lambda *a, **k: calls.append(1) or real_multistart(*a, **k))
    capsys.readouterr()
    assert main(["calibrate", str(cfg), "--no-report", "--iterations", "3", "--out", str(run), "--resume"]) == 0
    out = capsys.readouterr().out
    assert calls == [] and f"kept from the run being resumed ({POINTS + 1} rollouts" in out, out
    # the same run as one that never stopped: the same start, the same budget, the same iterations
    assert main(["calibrate", str(cfg), "--no-report", "--iterations", "3", "--out", str(whole)]) == 0
    assert calls == [1]
    assert _history_lines(run) == _history_lines(whole)
    # a record that does not fit this start (torn, or another number of points) is not trusted: rolled out again
    (run / "start_stage.json").write_text("{torn")
    assert main(["calibrate", str(cfg), "--no-report", "--iterations", "4", "--out", str(run), "--resume"]) == 0
    assert calls == [1, 1]


def test_the_multistarts_library_messages_go_to_run_log_not_the_terminal(tmp_path):
    """Was: MuJoCo's warnings from the multistart's diverging points were printed on the terminal (9 lines, also
    with -q), while those of the iterations went to run.log."""
    import copy
    import os
    import subprocess

    from helpers.planar_arm import PARAMETERS

    record_csv(tmp_path / "t0.csv")
    params = copy.deepcopy(PARAMETERS)
    params["sh_gain"]["upper"] = 1e9  # Sobol points of a huge gain: the twin blows up there
    cfg = write_rig(tmp_path, parameters=params, calibration={
        "iterations": 1, "rollout_budget": 40, "seed": 0, "start": {"kind": "multistart", "points": POINTS}})
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(cfg), "-q", "--no-report",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    said = [x for x in (done.stdout + done.stderr).splitlines() if "Nan, Inf or huge value" in x]
    assert len(said) == 1 and "all in" in said[0] and "run.log" in said[0], said  # the summary's one line
    assert "MuJoCo: Nan, Inf or huge value" in (tmp_path / "run" / "run.log").read_text()
    assert not list(tmp_path.glob("vid2sid_run_*.log"))  # the temporary logs were moved, none left behind


def test_the_first_resumed_iteration_says_what_moved_from_where_the_run_stopped(tmp_path, capsys):
    """Was: its line said "no parameter moved" (it compared the iteration's values with themselves) although
    every value had changed."""
    from vid2sid_ros.cli import main

    record_csv(tmp_path / "t0.csv")
    cfg = write_rig(tmp_path, calibration={"iterations": 1, "rollout_budget": 40, "seed": 0,
                                           "stop_when_converged": False}, proposer="nelder-mead")
    run = tmp_path / "run"
    assert main(["calibrate", str(cfg), "--no-report", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["calibrate", str(cfg), "--no-report", "--iterations", "2", "--out", str(run), "--resume"]) == 0
    resumed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("iter  2/2")]
    first, second = _history_lines(run)[:2]
    assert first["extra"]["current_after"] != second["extra"]["current_after"]  # the iteration did move them
    assert len(resumed) == 1 and "no parameter moved" not in resumed[0] and "→" in resumed[0], resumed


def test_the_printed_resume_command_keeps_the_executor(tmp_path, capsys):
    """Was: the command printed to continue a run dropped --executor and --workers (the resume ran serially)."""
    from vid2sid_ros.cli import main

    record_csv(tmp_path / "t0.csv")
    cfg = write_rig(tmp_path, calibration={"iterations": 1, "rollout_budget": 40, "seed": 0,
                                           "stop_when_converged": False}, proposer="nelder-mead")
    assert main(["calibrate", str(cfg), "--no-report", "--executor", "threads", "--workers", "2",
                 "--out", str(tmp_path / "run")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--executor threads --workers 2 --out" in out and "--resume" in out, out
