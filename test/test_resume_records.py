"""The loop's resume machinery at library level, fast: run directory checks, iterations.jsonl
reading and validation, record (de)serialisation. One 3-iteration toy run is made per module
and copied per test; each test damages the copy the way a crash, an editor or another run
would, and checks the exact refusal (file, line, what) or the exact recovery.
(The CLI-level checks are in test_run_dir_safety.py; this file is what bench/mutation.py
runs the resume mutants against.)
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial
from vid2sid_ros.calibration.loop import (CalibrationConfig, CalibrationError, check_run_dir, load_history,
                                          record_from_dict, record_to_dict, run_calibration)
from vid2sid_ros.calibration.proposers.proposer import Proposal
from vid2sid_ros.core.parameters import ParameterSet
from vid2sid_ros.sim.toy import make_rig

CFG = CalibrationConfig(iterations=3, rollout_budget=None, seed=0, identifiability=False, final_identifiability=False)


class _Stepper:
    """Moves the stiffness by a fixed step each iteration and keeps a memory (a proposer state)."""

    name = "reasoner"  # the name a resume signature is checked against

    def propose(self, ctx):
        k = ctx.current["stiffness"] + 0.05
        return Proposal(values={"stiffness": k}, rationale=f"stiffness -> {k:.2f} N·m/rad", confidence=0.5,
                        state={"iteration": ctx.iteration, "stiffness": k})


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    rig = make_rig()
    real = make_sim2sim_trial(rig, {"stiffness": 0.62, "damping": 0.035, "gain": 0.21}, seed=1, noise="keypoint")
    rd = tmp_path_factory.mktemp("run") / "run"
    res = run_calibration(rig, real, _Stepper(), CFG, rd)
    assert len(res.history) == 4
    return rig, real, rd, res


@pytest.fixture
def run(base, tmp_path):
    rig, real, rd, res = base
    out = tmp_path / "run"
    shutil.copytree(rd, out)
    return rig, real, out, res


def _lines(rd: Path) -> list[str]:
    return (rd / "iterations.jsonl").read_text().splitlines(keepends=True)


def _write(rd: Path, lines: list[str]) -> None:
    (rd / "iterations.jsonl").write_text("".join(lines))


def _spec(rd: Path) -> ParameterSet:
    """The spec the run was made with (the loop adds the measurement nuisances to the rig's)."""
    return ParameterSet.from_dict({"parameters": json.loads((rd / "run.json").read_text())["signature"]["parameters"]})


def _check(rig, real, rd, **kw):
    cfg = replace(CFG, resume=True, **kw)
    spec = _spec(rd) if rd is not None and (rd / "run.json").is_file() else rig.parameters
    return check_run_dir(rd, proposer_name="reasoner", config=cfg, parameters=spec, real=real)


def _edit(line: str, **changes) -> str:
    d = json.loads(line)
    for k, v in changes.items():
        if "." in k:
            a, b = k.split(".")
            d[a][b] = v
        else:
            d[k] = v
    # 1e999 is a JSON number that overflows to inf (not the NaN/Infinity constants refused while parsing)
    return json.dumps(d).replace("Infinity", "1e999") + "\n"


def test_history_round_trips_with_proposer_states(run):
    rig, real, rd, res = run
    hist = load_history(rd)
    assert [r.iteration for r in hist] == [0, 1, 2, 3]
    assert [r.values for r in hist] == [r.values for r in res.history]
    assert [r.error_px for r in hist] == [r.error_px for r in res.history]
    assert [r.rollouts_used for r in hist] == [r.rollouts_used for r in res.history]
    states = [r.extra.get("proposer_state") for r in hist[1:]]
    assert [s["iteration"] for s in states] == [1, 2, 3]  # re-attached from proposer_state/iter_NNNN.json
    assert all("proposer_state" not in json.loads(x)["extra"] for x in _lines(rd))  # kept out of the jsonl
    pre = _check(rig, real, rd)
    assert [r.iteration for r in pre.records] == [1, 2, 3] and pre.initial.iteration == 0
    assert pre.good == (rd / "iterations.jsonl").stat().st_size


def test_torn_last_line_is_dropped_not_refused(run):
    rig, real, rd, _ = run
    lines = _lines(rd)
    good = sum(len(x.encode()) for x in lines[:2])
    _write(rd, lines[:2] + [lines[2][: len(lines[2]) // 2]])  # killed while writing iteration 3
    assert [r.iteration for r in load_history(rd)] == [0, 1, 2]
    pre = _check(rig, real, rd)
    assert [r.iteration for r in pre.records] == [1, 2] and pre.good == good
    _write(rd, lines[:2] + ["{not json\n"])  # torn with a newline: still the last line
    assert _check(rig, real, rd).good == good


@pytest.mark.parametrize("damage, message", [
    ("corrupt_middle", "line 2 is corrupt (not JSON) but later lines follow"),
    ("duplicate", "line 3: iteration 2 where 3 was expected (a duplicate of an earlier iteration)"),
    ("gap", "line 2: iteration 3 where 2 was expected (iterations are missing)"),
    ("nan_error", "line 2: non-finite number NaN"),
    ("inf_value", "line 1: non-finite number(s) in values.stiffness"),
    ("negative_rollouts", "line 2: rollouts_used -2 is negative"),
    ("rollouts_total", "line 3: rollouts_total 999 but the iterations so far used"),
    ("minus_inf_error", "line 1: non-finite number(s) in error_px"),
    ("malformed", "line 2: malformed iteration record (KeyError"),
])
def test_damaged_sequences_are_refused_naming_the_line(run, damage, message):
    rig, real, rd, _ = run
    a, b, c = _lines(rd)
    damaged = {
        "corrupt_middle": [a, "{oops\n", c],
        "duplicate": [a, b, b],
        "gap": [a, c],
        "nan_error": [a, b.replace('"error_px": ', '"error_px": NaN, "x": ', 1), c],
        "inf_value": [_edit(a, **{"values.stiffness": 1e999}), b, c],
        "negative_rollouts": [a, _edit(b, rollouts_used=-2), c],
        "rollouts_total": [a, b, _edit(c, **{"extra.rollouts_total": 999})],
        "minus_inf_error": [_edit(a, error_px=-1e999), b, c],
        "malformed": [a, json.dumps({k: v for k, v in json.loads(b).items() if k != "values"}) + "\n", c],
    }[damage]
    _write(rd, damaged)
    before = (rd / "iterations.jsonl").read_bytes()
    for call in (lambda: load_history(rd), lambda: _check(rig, real, rd)):
        with pytest.raises(CalibrationError) as err:
            call()
        assert str(rd / "iterations.jsonl") in str(err.value) and message in str(err.value), str(err.value)
    assert (rd / "iterations.jsonl").read_bytes() == before  # nothing changed


def test_proposer_state_missing_for_a_middle_line_refuses_for_the_last_line_drops(run):
    rig, real, rd, _ = run
    a, b, c = _lines(rd)
    (rd / json.loads(c)["extra"]["proposer_state_file"]).unlink()
    assert [r.iteration for r in _check(rig, real, rd).records] == [1, 2]  # the last iteration was torn
    (rd / json.loads(b)["extra"]["proposer_state_file"]).unlink()
    _write(rd, [a, b, c])
    with pytest.raises(CalibrationError, match=r"line 2: proposer state .*iter_0002\.json is missing or corrupt"):
        _check(rig, real, rd)


def test_run_directory_refusals(run, tmp_path):
    rig, real, rd, _ = run
    with pytest.raises(CalibrationError, match="already holds a calibration run"):
        check_run_dir(rd, proposer_name="reasoner", config=CFG, parameters=rig.parameters, real=real)
    with pytest.raises(CalibrationError, match="resume needs a run directory"):
        _check(rig, real, None)
    assert check_run_dir(None, proposer_name="reasoner", config=CFG, parameters=rig.parameters, real=real) is None
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(CalibrationError, match="is a file, expected a run directory"):
        _check(rig, real, afile)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CalibrationError, match="no calibration run there"):
        _check(rig, real, empty)
    assert check_run_dir(empty, proposer_name="reasoner", config=CFG, parameters=rig.parameters, real=real) is None
    with pytest.raises(CalibrationError, match=r"'seed' differs from the interrupted run \(0 vs 1\)"):
        _check(rig, real, rd, seed=1)
    with pytest.raises(CalibrationError, match="'rollout_budget' differs"):
        _check(rig, real, rd, rollout_budget=50)
    with pytest.raises(CalibrationError, match=r"'proposer' differs .*'reasoner' vs 'cmaes'"):
        check_run_dir(rd, proposer_name="cmaes", config=replace(CFG, resume=True), parameters=_spec(rd), real=real)
    d = _spec(rd).to_dict()
    d["parameters"] = [{**p, "lower": 0.2} if p["name"] == "stiffness" else p for p in d["parameters"]]
    narrower = ParameterSet.from_dict(d)
    with pytest.raises(CalibrationError, match=r"'parameters' differs .*stiffness\.lower: 0\.1 vs 0\.2"):
        check_run_dir(rd, proposer_name="reasoner", config=replace(CFG, resume=True), parameters=narrower, real=real)
    (rd / "run.json").unlink()
    with pytest.raises(CalibrationError, match="run.json is missing but iterations.jsonl and proposer_state/"):
        check_run_dir(rd, proposer_name="reasoner", config=CFG, parameters=rig.parameters, real=real)


def test_corrupt_run_json_is_named(run):
    rig, real, rd, _ = run
    spec = _spec(rd)
    (rd / "run.json").write_text("{half")
    with pytest.raises(CalibrationError, match=r"run\.json: corrupt run file \(JSONDecodeError"):
        check_run_dir(rd, proposer_name="reasoner", config=replace(CFG, resume=True), parameters=spec, real=real)
    (rd / "run.json").write_text(json.dumps({"signature": {}}))
    with pytest.raises(CalibrationError, match=r"run\.json: not a calibration run file \(expected a JSON object with "
                                               r"'initial'\)"):
        load_history(rd)
    (rd / "run.json").unlink()
    with pytest.raises(FileNotFoundError, match="run.json missing"):
        load_history(rd)


def test_records_serialise_non_finite_errors_as_null_and_back(run):
    _, _, _, res = run
    rec = replace(res.history[1], error_px=math.inf, per_keypoint_px={"tip": math.nan}, confidence=0.25)
    d = record_to_dict(rec)
    assert d["error_px"] is None and d["per_keypoint_px"] == {"tip": None} and d["confidence"] == 0.25
    back = record_from_dict(json.loads(json.dumps(d)))
    assert back.error_px == math.inf and math.isnan(back.per_keypoint_px["tip"]) and back.values == rec.values
    assert back.iteration == rec.iteration and back.rollouts_used == rec.rollouts_used and back.notes == rec.notes
    with_state = replace(rec, extra={**rec.extra, "proposer_state": {"k": 1}})
    assert "proposer_state" in record_to_dict(with_state)["extra"]
    assert "proposer_state" not in record_to_dict(with_state, with_state=False)["extra"]
    d2 = {k: v for k, v in d.items() if k not in ("confidence", "rollouts_used", "notes", "extra", "wall_s")}
    minimal = record_from_dict(d2)
    assert (minimal.confidence, minimal.rollouts_used, minimal.notes, minimal.extra, minimal.wall_s) == (0.0, 0, [], {},
                                                                                                         0.0)
    with pytest.raises(CalibrationError, match=r"^here: malformed iteration record \(KeyError"):
        record_from_dict({"iteration": 1}, source="here")


def test_the_rollout_count_of_run_json_is_the_base_of_rollouts_total(run):
    """``run.json``'s ``initial_rollouts`` (iteration 0 plus any start-up checks) is what the
    per-line ``rollouts_total`` is checked against; without it (or not an integer), iteration 0's
    own count is."""
    rig, real, rd, _ = run
    meta = json.loads((rd / "run.json").read_text())
    base = meta["initial_rollouts"]
    assert base == meta["initial"]["rollouts_used"]  # no start-up check in this run: the two agree
    for value, ok in [(base + 5, False), (None, True), (True, True), (float(base), True)]:
        m = {k: v for k, v in meta.items() if k != "initial_rollouts"}
        if value is not None:
            m["initial_rollouts"] = value
        (rd / "run.json").write_text(json.dumps(m))
        if ok:
            assert [r.iteration for r in load_history(rd)] == [0, 1, 2, 3]
            assert [r.iteration for r in _check(rig, real, rd).records] == [1, 2, 3]
        else:
            for call in (lambda: load_history(rd), lambda: _check(rig, real, rd)):
                with pytest.raises(CalibrationError, match=r"line 1: rollouts_total \d+ but the iterations so far used"):
                    call()
    m = {**meta, "initial_rollouts": base}
    m["initial"] = {k: v for k, v in meta["initial"].items() if k != "values"}
    (rd / "run.json").write_text(json.dumps(m))
    for call in (lambda: load_history(rd), lambda: _check(rig, real, rd)):
        with pytest.raises(CalibrationError, match=rf"^{re.escape(str(rd / 'run.json'))}: malformed iteration record"):
            call()
    (rd / "run.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "signature"}))
    with pytest.raises(CalibrationError, match=r"'proposer' differs from the interrupted run \(None vs 'reasoner'\)"):
        check_run_dir(rd, proposer_name="reasoner", config=replace(CFG, resume=True), parameters=rig.parameters,
                      real=real)  # a run.json without its signature is not resumed blindly


def test_free_iterations_infinite_fields_and_the_two_tuple_reader(run):
    from vid2sid_ros.calibration.loop import _read_jsonl

    rig, real, rd, _ = run
    recs, good = _read_jsonl(rd)  # without with_lines: (records, byte length of the good prefix)
    assert [r.iteration for r in recs] == [1, 2, 3] and good == (rd / "iterations.jsonl").stat().st_size
    fresh = rd.parent / "fresh"
    fresh.mkdir()
    assert _read_jsonl(fresh) == ([], 0) and _read_jsonl(fresh, with_lines=True) == ([], 0, [])  # no file yet
    lines = _lines(rd)
    base = json.loads((rd / "run.json").read_text())["initial_rollouts"]
    # iterations that cost no rollout (a measurement-nuisance step served from the rollout cache) are valid
    _write(rd, [_edit(x, rollouts_used=0, **{"extra.rollouts_total": base}) for x in lines])
    assert [r.rollouts_used for r in load_history(rd)[1:]] == [0, 0, 0]
    for field in ("confidence", "wall_s"):
        _write(rd, [_edit(lines[0], **{field: 1e999}), *lines[1:]])
        with pytest.raises(CalibrationError, match=rf"line 1: non-finite number\(s\) in {field} "):
            load_history(rd)


def test_records_round_trip_every_field_and_name_the_default_source(run):
    _, _, _, res = run
    rec = replace(res.history[1], per_keypoint_px={"tip": 1.5, "mid": math.nan}, notes=["clipped stiffness"],
                  rationale="stiffness up", proposer="reasoner", confidence=0.75, wall_s=1.25)
    back = record_from_dict(json.loads(json.dumps(record_to_dict(rec))))
    assert (back.proposer, back.rationale, back.notes) == ("reasoner", "stiffness up", ["clipped stiffness"])
    assert (back.confidence, back.wall_s) == (0.75, 1.25)
    bare = record_from_dict({"iteration": 2, "proposer": "x", "values": {"k": 1.0}})
    assert (bare.rationale, bare.confidence, bare.error_px, bare.per_keypoint_px) == ("", 0.0, math.inf, {})
    assert back.per_keypoint_px["tip"] == 1.5 and math.isnan(back.per_keypoint_px["mid"])
    with pytest.raises(CalibrationError, match=r"^<record>: malformed iteration record \(KeyError"):
        record_from_dict({"iteration": 1})


def test_a_leading_blank_line_is_skipped_and_two_damaged_lines_are_refused(run):
    rig, real, rd, _ = run
    a, b, c = _lines(rd)
    _write(rd, ["\n", a, b, c])
    assert [r.iteration for r in load_history(rd)] == [0, 1, 2, 3]
    _write(rd, ["\n", a, "{oops\n", c])
    with pytest.raises(CalibrationError, match="line 3 is corrupt"):  # lines counted from the file's first
        load_history(rd)
    _write(rd, [a, b, "{oops\n", "x"])  # a corrupt line, then a one-byte fragment: not one torn last line
    with pytest.raises(CalibrationError, match="line 3 is corrupt"):
        load_history(rd)


def test_a_budget_below_one_evaluation_is_refused_before_anything_else(run, tmp_path):
    rig, real, rd, _ = run
    n = len(real.train_excitations)
    kw = dict(proposer_name="reasoner", parameters=rig.parameters, real=real)
    with pytest.raises(CalibrationError, match=rf"rollout budget {n - 1} cannot pay for one evaluation \({n} rollouts\)"):
        check_run_dir(tmp_path / "new", config=replace(CFG, rollout_budget=n - 1), **kw)
    assert check_run_dir(tmp_path / "new", config=replace(CFG, rollout_budget=n), **kw) is None  # exactly one: fine
    # resuming is not refused for it (the interrupted run was checked when it started)
    with pytest.raises(CalibrationError, match="'rollout_budget' differs"):
        check_run_dir(rd, config=replace(CFG, resume=True, rollout_budget=n - 1), proposer_name="reasoner",
                      parameters=_spec(rd), real=real)


def test_resume_check_adds_the_run_s_measurement_nuisances_and_an_empty_jsonl_is_no_run(tmp_path):
    """A recorded trial (no truth: marker offsets on by default) fitted with latency switched off:
    the resume check, given the rig's physics spec, must add the nuisances exactly as the run did."""
    rig = make_rig()
    sim = make_sim2sim_trial(rig, {"stiffness": 0.62, "damping": 0.035, "gain": 0.21}, seed=1, noise="keypoint")
    real = replace(sim, truth=None)
    cfg = replace(CFG, iterations=1, nuisance={"latency": False})
    rd = tmp_path / "run"
    run_calibration(rig, real, _Stepper(), cfg, rd)
    names = [p["name"] for p in json.loads((rd / "run.json").read_text())["signature"]["parameters"]]
    assert any("offset" in n for n in names) and not any("latency" in n for n in names)
    pre = check_run_dir(rd, proposer_name="reasoner", config=replace(cfg, resume=True), parameters=rig.parameters,
                        real=real)
    assert [r.iteration for r in pre.records] == [1]
    pre = check_run_dir(rd, proposer_name="reasoner", config=replace(cfg, resume=True), parameters=rig.parameters,
                        real=None)  # no trial to compare: the signature is not checked, the records are read
    assert [r.iteration for r in pre.records] == [1]
    (rd / "run.json").unlink()
    shutil.rmtree(rd / "proposer_state", ignore_errors=True)
    (rd / "iterations.jsonl").write_text("")  # an empty file holds no iteration: a fresh run may start
    assert check_run_dir(rd, proposer_name="reasoner", config=cfg, parameters=rig.parameters, real=real) is None
    (rd / "iterations.jsonl").write_text("\n")  # one byte: something was written, refuse
    with pytest.raises(CalibrationError, match="run.json is missing but iterations.jsonl"):
        check_run_dir(rd, proposer_name="reasoner", config=cfg, parameters=rig.parameters, real=real)
