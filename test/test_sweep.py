"""Benchmark sweeps on the executor: the serial results on a pool, each finished cell kept, an interrupted
sweep resumed without redoing cells, a cell whose worker is killed retried once (toy rig, seconds)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from vid2sid_ros.benchmark import sweep
from vid2sid_ros.benchmark.run import run_benchmark
from vid2sid_ros.calibration.executor import make_executor
from vid2sid_ros.calibration.loop import CalibrationError
from vid2sid_ros.sim.toy import make_rig

METHODS = ["reasoner", "random"]
KW = dict(budget=12, iterations=2, noise="keypoint", progress=False)
#: what may differ between two runs of the same cell: timings
TIMING = {"wall_s"}
_REAL_CELL = sweep._run_cell


def _cells(res):
    return {(s["seed"], m): {k: v for k, v in r.items() if k not in TIMING}
            for s in res["per_seed"] for m, r in s["methods"].items()}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return run_benchmark(make_rig(), METHODS, 2, out=tmp_path_factory.mktemp("serial"), **KW)


def test_pool_sweep_gives_the_serial_cells(serial, tmp_path):
    with make_executor("pool", 2) as ex:
        res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ex, **KW)
    assert _cells(res) == _cells(serial)
    assert res["executor"] == {"backend": "pool", "workers": 2, "retries": 0}
    for seed in (0, 1):
        for m in METHODS:
            cell = json.loads((tmp_path / f"seed_{seed}" / m / sweep.CELL_FILE).read_text())
            assert cell["values"] == serial["per_seed"][seed]["methods"][m]["values"]


def test_interrupted_sweep_resumes_without_redoing_finished_cells(serial, tmp_path, monkeypatch):
    seen = []

    def stop_after_two(rec):
        seen.append((rec["seed"], rec["method"]))
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(make_rig(), METHODS, 2, out=tmp_path, on_result=stop_after_two, **KW)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("seed_*/*/cell.json")) == [
        "seed_0/random/cell.json", "seed_0/reasoner/cell.json"]  # seed 0 done
    ran = []

    def counting(st, item):
        ran.append((item[0], item[1]))
        return _REAL_CELL(st, item)

    monkeypatch.setattr(sweep, "_run_cell", counting)
    res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, **KW)
    assert ran == [(1, "reasoner"), (1, "random")]  # seed 0's cells were loaded, not run again
    assert _cells(res) == _cells(serial)
    assert json.loads((tmp_path / "results.json").read_text())["methods"].keys() == set(METHODS)


def _killed_once(st, item):
    """Kill this worker the first time cell (1, random) runs."""
    mark = Path(st.out_dir) / "killed_once"
    if item[:2] == (1, "random") and not mark.exists():
        mark.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return _REAL_CELL(st, item)


def _killed_always(st, item):
    if item[:2] == (0, "reasoner"):
        os.kill(os.getpid(), signal.SIGKILL)
    return _REAL_CELL(st, item)


def test_worker_killed_mid_cell_is_retried_and_the_sweep_completes(serial, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "_run_cell", _killed_once)
    with make_executor("pool", 2) as ex:
        res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ex, **KW)
        assert ex.retries >= 1
    assert (tmp_path / "killed_once").exists()
    assert _cells(res) == _cells(serial) and res["failed_cells"] == []


def test_cell_whose_worker_dies_twice_is_failed_and_the_others_finish(serial, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "_run_cell", _killed_always)
    with make_executor("pool", 2) as ex:
        res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ex, **KW)
    assert [(f["seed"], f["method"]) for f in res["failed_cells"]] == [(0, "reasoner")]
    assert "died twice" in res["failed_cells"][0]["message"]
    assert not (tmp_path / "seed_0" / "reasoner" / sweep.CELL_FILE).exists()  # a later run tries it again
    good = {k: v for k, v in _cells(res).items() if k != (0, "reasoner")}
    assert good == {k: v for k, v in _cells(serial).items() if k != (0, "reasoner")}
    assert res["methods"]["reasoner"]["seeds"] == 1


def test_threads_refused_for_a_sweep(tmp_path):
    with make_executor("threads", 2) as ex, pytest.raises(CalibrationError, match="use pool or ray"):
        run_benchmark(make_rig(), METHODS, 1, out=tmp_path, executor=ex, **KW)
