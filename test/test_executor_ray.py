"""The ray backend on a private local Ray bound to 127.0.0.1 (skipped where Ray is not installed:
``pip install -r requirements-ray.txt``; ``make setup`` installs it).

One Ray for the whole module (starting it takes seconds); its teardown checks that every Ray process the
module started (head, raylet, actors) is gone after ``ray.shutdown()``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vid2sid_ros.benchmark import sweep  # noqa: E402
from vid2sid_ros.benchmark.run import run_benchmark  # noqa: E402
from vid2sid_ros.calibration.executor import make_executor  # noqa: E402
from vid2sid_ros.sim import toy  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402
from helpers.planar_arm import record_csv, write_rig  # noqa: E402

METHODS = ["reasoner", "random"]
KW = dict(budget=12, iterations=2, noise="keypoint", progress=False)
_REAL_CELL = sweep._run_cell
_REAL_SIMULATE = toy.ToyArmTwin._simulate


def _identity(pid: int) -> tuple[int, int] | None:
    """``(pid, start time in clock ticks since boot)`` of a running process (``/proc/PID/stat`` field 22), None
    when it is gone or a zombie (exited, not yet reaped: gone for our purpose). The start time tells a process
    from a later one that got the same id (ids wrap at ``/proc/sys/kernel/pid_max``, 32768 here: a busy machine
    reuses the id of an actor the module killed within minutes)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (pid, int(fields[19]))


def _alive(ident: tuple[int, int] | None) -> bool:
    """Whether the process ``ident`` (:func:`_identity`) still runs: the same id AND the same start time."""
    return ident is not None and _identity(ident[0]) == ident


@pytest.fixture(scope="module")
def ray_executor():
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import a test module
    ex = make_executor("ray", 2)
    node = ray._private.worker._global_node
    procs = {_identity(p.process.pid) for ps in node.all_processes.values() for p in ps if p.process is not None}
    yield ex
    procs |= {_identity(p) for p in ex.map(_pid, [0, 1], state=None)} | set(_PROCS)
    procs |= {_identity(c) for p in list(procs) if p is not None for c in _children(p[0])}  # agents, helpers
    procs.discard(None)
    ex.close()
    ray.shutdown()
    # Ray's dashboard and runtime-env agents notice the raylet's end by themselves and report it first
    deadline = time.monotonic() + 120.0
    while any(_alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in procs if _alive(p)], "Ray processes left behind after ray.shutdown()"


#: the actors' processes seen by the tests, :func:`_identity` each (an actor killed by a test included)
_PROCS: list[tuple[int, int] | None] = []


def _children(pid: int) -> set[int]:
    """Process ids whose parent is ``pid`` (``/proc``)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return out


def _pid(_state, _item) -> int:
    return os.getpid()


def _cells(res):
    return {(s["seed"], m): {k: v for k, v in r.items() if k != "wall_s"}
            for s in res["per_seed"] for m, r in s["methods"].items()}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return run_benchmark(make_rig(), METHODS, 2, out=tmp_path_factory.mktemp("serial"), **KW)


def test_local_ray_listens_on_loopback_only_and_sends_no_usage_stats(ray_executor):
    from ray._private.usage import usage_lib

    assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert not usage_lib.usage_stats_enabled()
    assert ray_executor.describe()["ray_address"] is None  # a private Ray, stopped with this process
    pids = ray_executor.map(_pid, [0, 1], state=None)
    _PROCS.extend(_identity(p) for p in pids)
    # the actors do the run's work: at this process's priority, not Ray's default niceness of 15
    assert {os.getpriority(os.PRIO_PROCESS, p) for p in pids} == {os.getpriority(os.PRIO_PROCESS, 0)}


def _fail_fast_or_finish_slowly(marker: str, item: int) -> int:
    if item == 0:
        raise ValueError("bad configuration")
    time.sleep(1.0)
    (Path(marker) / f"finished_{item}").write_text("x")
    return item


def test_a_task_that_raises_is_reraised_after_the_tasks_in_flight_finished(ray_executor, tmp_path):
    with pytest.raises(ValueError, match="bad configuration"):
        ray_executor.map(_fail_fast_or_finish_slowly, [0, 1, 2, 3], state=str(tmp_path))
    assert (tmp_path / "finished_1").exists()  # in flight beside the failing task: finished, not abandoned
    assert not (tmp_path / "finished_3").exists()  # nothing new submitted after the failure


def test_sweep_on_ray_gives_exactly_the_serial_cells(ray_executor, serial, tmp_path):
    on_ray = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ray_executor, **KW)
    assert _cells(on_ray) == _cells(serial)
    assert on_ray["executor"]["backend"] == "ray" and on_ray["failed_cells"] == []


def _die_once(marker: str, item: int) -> int:
    mark = Path(marker) / f"ray_died_{item}"
    if item == 1 and not mark.exists():
        mark.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 10


def test_ray_worker_killed_mid_task_is_restarted_and_the_task_retried(ray_executor, tmp_path):
    before = ray_executor.retries
    assert ray_executor.map(_die_once, [0, 1, 2, 3], state=str(tmp_path)) == [0, 10, 20, 30]
    assert (tmp_path / "ray_died_1").exists()
    assert ray_executor.retries == before + 1


def _killed_mid_rollout(st, item):
    """Cell (1, random): its worker is killed (SIGKILL) inside the 6th rollout, half-way through stepping,
    the first time only (a marker file in the sweep's folder); every other cell runs as usual."""
    mark = Path(st.out_dir) / "killed_mid_rollout"
    if item[:2] != (1, "random") or mark.exists():
        return _REAL_CELL(st, item)
    count = [0]

    def simulate(self, u, rate):
        count[0] += 1
        if count[0] == 6 and not mark.exists():
            _REAL_SIMULATE(self, u[: len(u) // 2], rate)
            mark.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)
        return _REAL_SIMULATE(self, u, rate)

    toy.ToyArmTwin._simulate = simulate
    try:
        return _REAL_CELL(st, item)
    finally:
        toy.ToyArmTwin._simulate = _REAL_SIMULATE


def test_worker_killed_mid_rollout_is_retried_and_the_sweep_gives_the_serial_cells(ray_executor, serial, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setattr(sweep, "_run_cell", _killed_mid_rollout)
    before = ray_executor.retries
    res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ray_executor, **KW)
    assert (tmp_path / "killed_mid_rollout").exists()  # the kill happened
    assert res["failed_cells"] == [] and res["executor"]["retries"] == before + 1
    assert _cells(res) == _cells(serial)


def test_interrupted_ray_sweep_resumes_without_redoing_finished_cells(ray_executor, serial, tmp_path, monkeypatch):
    seen = []

    def stop_after_two(rec):
        seen.append((rec["seed"], rec["method"]))
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(make_rig(), METHODS, 2, out=tmp_path, on_result=stop_after_two, executor=ray_executor, **KW)
    assert len(ray_executor._actors) == ray_executor.workers  # the actors stopped mid-task are replaced
    done = {tuple(p.parent.relative_to(tmp_path).parts) for p in tmp_path.glob("seed_*/*/cell.json")}
    assert len(done) == 2 and done == {(f"seed_{s}", m) for s, m in seen}
    ran = []
    real_map = ray_executor.map

    def spying_map(fn, items, **kw):  # the cells handed to the executor
        if fn is sweep._run_cell:
            ran.extend((it[0], it[1]) for it in items)
        return real_map(fn, items, **kw)

    monkeypatch.setattr(ray_executor, "map", spying_map)
    res = run_benchmark(make_rig(), METHODS, 2, out=tmp_path, executor=ray_executor, **KW)
    todo = {(f"seed_{s}", m) for s in (0, 1) for m in METHODS} - done
    assert {(f"seed_{s}", m) for s, m in ran} == todo and len(ran) == len(todo)  # finished cells loaded, not rerun
    assert _cells(res) == _cells(serial)


def _run_files(run: Path) -> tuple[list, dict]:
    """``(iterations.jsonl rows, result.json)`` of a run directory without what differs between runs: timing,
    the run's own paths and the executor's description."""
    import json

    rows = [json.loads(x) for x in (run / "iterations.jsonl").read_text().splitlines() if x.strip()]
    res = json.loads((run / "result.json").read_text())
    for r in rows + res["history"]:
        r.pop("wall_s", None)
    for k in ("wall_s", "phases", "files", "executor"):
        res.pop(k, None)
    return rows, res


def test_a_rig_config_calibration_on_ray_gives_the_serial_run(ray_executor, tmp_path, capsys):
    """A rig config's twin (a MuJoCo model file) on two Ray actors. Was: every such calibration stopped at the
    first batch, ``TypeError: Could not serialize ... cannot pickle 'mujoco._specs.MjSpec' object``."""
    import json

    from vid2sid_ros.cli import main

    record_csv(tmp_path / "t0.csv")
    # the residual diagnosis is left out: its probes run one after another in the calling process, never on Ray
    rig = write_rig(tmp_path, calibration={"iterations": 2, "rollout_budget": 16, "seed": 0, "diagnosis": False})
    args = ["calibrate", str(rig), "--no-report", "-q", "--out"]
    assert main([*args, str(tmp_path / "serial")]) == 0, capsys.readouterr().err
    assert main([*args, str(tmp_path / "ray"), "--executor", "ray", "--workers", "2"]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "ray" / "result.json").read_text())["executor"]["backend"] == "ray"
    rows, res = _run_files(tmp_path / "ray")
    ref_rows, ref_res = _run_files(tmp_path / "serial")
    assert len(rows) == 2 and rows == ref_rows
    assert res["values"] == ref_res["values"] and res["rollouts"] == ref_res["rollouts"] > 0
    assert res == ref_res
    assert (tmp_path / "ray" / "calibrated_model.xml").read_text() == \
        (tmp_path / "serial" / "calibrated_model.xml").read_text()


def test_a_head_that_answers_passes_the_connection_check(ray_executor):
    """The check before joining a Ray at ``--ray-address HOST:PORT`` (test_executor.py: one that does not answer)
    lets a running head through: this module's own Ray, at its GCS address."""
    from vid2sid_ros.calibration.executor import _check_ray_head

    gcs = ray.get_runtime_context().gcs_address
    assert gcs.startswith("127.0.0.1:")
    _check_ray_head(gcs, gcs)  # no ExecutorError
