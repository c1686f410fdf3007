"""Unit tests of the core data types: core/rig.py, core/trial.py, core/yamlio.py, core/lockstep.py.

Fast and synthetic (no rendering, no ROS graph, no calibration run): they are the tests of the
``core_data`` group of bench/mutation.py, so each checks a right value or a right error, derived
by hand in the comments. Stamps in the lockstep tests are binary-exact fractions (0.25, 0.125...)
so that ties and the ``p / 2`` boundary are exact.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.lockstep import FrameRecord, LockstepError, LockstepStream, assign_steps
from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec
from vid2sid_ros.core.rig import Rig, TrialSpec, UnknownRigError
from vid2sid_ros.core.trajectory import Trajectory
from vid2sid_ros.core.trial import ObservationError, RealTrial, jsonable
from vid2sid_ros.core.yamlio import StrictSafeLoader, YAMLInputError, load_yaml, loads_yaml


# -- helpers ----------------------------------------------------------------------------------------
def _traj(names=("a", "b"), T=3, trial_id="tr0", kind="image", offset=0.0) -> Trajectory:
    K = len(names)
    D = {"image": 2, "points": 3, "joints": 1}[kind]
    kp = offset + np.arange(T * K * D, dtype=float).reshape(T, K, D)
    return Trajectory(np.arange(T) / 30.0, kp, np.ones((T, K), bool), tuple(names), "real", trial_id, kind=kind)


def _exc(name="e0", T=3, A=1, rate=30.0) -> Excitation:
    return Excitation(name, rate, np.arange(T * A, dtype=float).reshape(T, A) * 0.5,
                      tuple(f"u{i}" for i in range(A)))


def _rig(**kw) -> Rig:
    params = ParameterSet((ParameterSpec("k", "N/m", 0.1, 1.0, 0.5),))
    return Rig(name=kw.pop("name", "toyrig"), description="d", parameters=params, excitations={"train": []},
               make_twin=lambda **_: None, **kw)


# -- rig.py ------------------------------------------------------------------------------------------
def test_core_data_unknown_rig_error_str_is_the_bare_message():
    err = UnknownRigError("unknown rig 'x'; valid: finger, tentacle")
    assert str(err) == "unknown rig 'x'; valid: finger, tentacle"  # KeyError would print it quoted
    assert isinstance(err, KeyError)


def test_core_data_trial_spec_kind_and_defaults():
    t = TrialSpec("t1", {"video": {"path": "a.mp4"}})
    assert t.kind == "video"
    assert TrialSpec("t2", {"sim2sim": {}}).kind == "sim2sim"
    assert (t.excitation, t.init, t.free_init, t.frames, t.time_offset, t.split, t.where) == \
        (None, {}, {}, (0, None), 0.0, "train", "")
    u = TrialSpec("t3", {"video": {}})
    u.init["qpos[j]"] = 1.0
    assert t.init == {} and t.free_init is not u.free_init  # defaults are not shared between trials


def test_core_data_rig_where_prefers_config_source_then_file_then_name():
    assert _rig(config={"_source": "/cfg/rig.yaml"}, source=Path("/other.yaml")).where == "/cfg/rig.yaml"
    assert _rig(config={"_source": ""}, source=Path("/other.yaml")).where == "/other.yaml"
    assert _rig(source=Path("/other.yaml")).where == "/other.yaml"
    assert _rig().where == "toyrig"
    assert _rig(config=None).where == "toyrig"  # a rig built in code may leave config None


def test_core_data_rig_defaults_and_trial_lookup():
    r = _rig()
    assert (r.tracker, r.config, r.trials, r.source, r.keypoints, r.camera, r.nuisance, r.calibration,
            r.proposer, r.named_excitations) == ({}, {}, [], None, (), {}, {}, {}, {}, {})
    a, b = TrialSpec("a", {"video": {}}), TrialSpec("b", {"sim2sim": {}})
    r = _rig(trials=[a, b])
    assert r.trial("b") is b and r.trial("a") is a
    with pytest.raises(KeyError, match=r"rig 'toyrig' has no trial 'c'; trials: a, b"):
        r.trial("c")


# -- trial.py: RealTrial ------------------------------------------------------------------------------
def test_core_data_real_trial_accepts_sequences_and_stores_lists():
    t, e = _traj(), _exc()
    rt = RealTrial((t,), (e,), (), ())
    assert rt.train == [t] and rt.train_excitations == [e] and rt.holdout == [] and rt.holdout_excitations == []
    assert (rt.frames, rt.source, rt.truth, rt.meta) == ({}, "", None, {})


@pytest.mark.parametrize("args, message", [
    (([], []), "real trial: 'train' must hold at least one trajectory"),
    (([_traj()], []), "real trial: 1 train trajectories but 0 train excitations"),
    (([_traj()], [_exc()], [_traj()], []), "real trial: 1 holdout trajectories but 0 holdout excitations"),
    (([_traj()], [_exc()], [], [_exc()]), "real trial: 0 holdout trajectories but 1 holdout excitations"),
    (([{"time": []}], [_exc()]), "real trial: train[0] is a dict, expected Trajectory"),
    (([_traj()], [_exc()], [_traj()], ["e"]), "real trial: holdout_excitations[0] is a str, expected Excitation"),
    (([_traj(), _traj()], [_exc(), np.zeros(3)]), "real trial: train_excitations[1] is a ndarray, expected Excitation"),
])
def test_core_data_real_trial_validation_errors(args, message):
    with pytest.raises(ObservationError) as info:
        RealTrial(*args)
    assert str(info.value) == message


def test_core_data_real_trial_keypoint_names_per_kind():
    img, other = _traj(("a", "b")), _traj(("a", "c"))
    with pytest.raises(ObservationError, match=r"disagree on keypoint names: \[\('a', 'b'\), \('a', 'c'\)\]"):
        RealTrial([img], [_exc()], [other], [_exc()])
    joints = _traj(("j1",), kind="joints")
    # a joint-state trial next to a video one names joints, not keypoints: allowed, and not the keypoints
    rt = RealTrial([joints, img], [_exc(), _exc()])
    assert rt.keypoint_names == ("a", "b")
    assert RealTrial([joints], [_exc()]).keypoint_names == ("j1",)
    pts = _traj(("p",), kind="points")
    assert RealTrial([joints, pts, img], [_exc()] * 3).keypoint_names == ("p",)


def test_core_data_real_trial_first_frames():
    video = np.zeros((3, 4, 5, 3), np.uint8)
    rt = RealTrial([_traj(trial_id="tr0"), _traj(trial_id="tr1")], [_exc(), _exc()],
                   frames={"tr1": video[:1], "tr0": video})
    assert rt.first_frames() is video
    assert RealTrial([_traj(trial_id="tr0")], [_exc()], frames={"other": video}).first_frames() is None
    assert RealTrial([_traj()], [_exc()]).first_frames() is None


def _trial() -> RealTrial:
    return RealTrial([_traj(trial_id="tr0"), _traj(trial_id="tr1", offset=0.25)],
                     [_exc("e0"), _exc("e1", T=3, A=2, rate=10.0)],
                     [_traj(trial_id="ho", offset=1.5)], [_exc("h", rate=15.0)],
                     source="sim2sim toy seed 3", truth={"k": 0.25},
                     meta={"noise": np.float64(0.5), "path": Path("/x/y.json"), "bad": float("nan"),
                           "pair": (np.int64(2), np.bool_(True))})


def test_core_data_real_trial_to_dict_layout():
    rt = _trial()
    d = rt.to_dict()
    assert list(d) == ["source", "truth", "meta", "train", "holdout"]
    assert d["source"] == "sim2sim toy seed 3" and d["truth"] == {"k": 0.25}
    assert d["meta"] == {"noise": 0.5, "path": "/x/y.json", "bad": None, "pair": [2, True]}
    assert len(d["train"]) == 2 and len(d["holdout"]) == 1
    assert d["train"][1]["excitation"] == {"name": "e1", "rate": 10.0, "actuator_names": ["u0", "u1"],
                                           "values": [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]}
    assert d["holdout"][0]["excitation"]["name"] == "h" and d["holdout"][0]["excitation"]["rate"] == 15.0
    assert d["train"][1]["trajectory"] == rt.train[1].to_dict()
    assert d["holdout"][0]["trajectory"]["trial_id"] == "ho"
    json.dumps(d, allow_nan=False)  # strict JSON: no NaN, no numpy types


def test_core_data_real_trial_save_load_round_trip(tmp_path):
    rt = _trial()
    path = rt.save(tmp_path / "new" / "dir" / "trial.json")  # parents are created
    assert path == tmp_path / "new" / "dir" / "trial.json" and isinstance(path, Path)
    assert json.loads(path.read_text()) == rt.to_dict()
    rt.save(str(path))  # overwrite, str path: the directory exists already
    back = RealTrial.load(path)
    assert back.source == rt.source and back.truth == {"k": 0.25}
    assert back.meta == {"noise": 0.5, "path": "/x/y.json", "bad": None, "pair": [2, True]}
    for got, want in zip(back.train + back.holdout, rt.train + rt.holdout):
        assert got.names == want.names and got.trial_id == want.trial_id
        np.testing.assert_array_equal(got.keypoints, want.keypoints)
        np.testing.assert_array_equal(got.time, want.time)
    for got, want in zip(back.train_excitations + back.holdout_excitations,
                         rt.train_excitations + rt.holdout_excitations):
        assert (got.name, got.rate, got.actuator_names) == (want.name, want.rate, want.actuator_names)
        np.testing.assert_array_equal(got.values, want.values)
    assert back.to_dict() == rt.to_dict()


def _entry(name="e", rate=30.0, **exc_extra) -> dict:
    return {"excitation": {"name": name, "rate": rate, "values": [[0.0], [1.0], [2.0]], **exc_extra},
            "trajectory": _traj().to_dict()}


def test_core_data_from_dict_defaults():
    rt = RealTrial.from_dict({"train": [_entry(name=7, rate="12.5")]}, source="f.json")
    e = rt.train_excitations[0]
    assert (e.name, e.rate, e.actuator_names) == ("7", 12.5, ("u0",))  # name str, rate float, one actuator
    assert rt.holdout == [] and rt.holdout_excitations == []
    assert rt.source == "f.json" and rt.truth is None and rt.meta == {}
    rt = RealTrial.from_dict({"train": [_entry(actuator_names=["m"])], "meta": None, "source": 5,
                              "truth": {"k": 1, 2: "0.5"}})
    assert rt.train_excitations[0].actuator_names == ("m",)
    assert rt.meta == {} and rt.source == "5"
    assert rt.truth == {"k": 1.0, "2": 0.5} and all(type(v) is float for v in rt.truth.values())
    # a trial file that also carries a trajectory's keys at the top level is still a trial
    rt = RealTrial.from_dict({"train": [_entry()], "keypoints": [], "time": []})
    assert len(rt.train) == 1


@pytest.mark.parametrize("data, message", [
    ([1, 2], "f.json: expected a JSON object with 'train' and 'holdout' lists"),
    ({"keypoints": [], "time": [], "names": []},
     "f.json: a single trajectory, not a real trial: it lacks the excitation it pairs with; "
     "write it with `vid2sid track VIDEO --rig RIG --excitation NAME --out FILE`"),
    ({"keypoints": []}, "f.json: field 'train' must be a list of {excitation, trajectory}"),
    ({"time": []}, "f.json: field 'train' must be a list of {excitation, trajectory}"),
    ({"train": {}}, "f.json: field 'train' must be a list of {excitation, trajectory}"),
    ({"train": [_entry()], "holdout": None}, "f.json: field 'holdout' must be a list of {excitation, trajectory}"),
    ({"train": [_entry(), 3]}, "f.json: train[1]: expected a mapping with 'excitation' and 'trajectory'"),
    ({"train": [{"excitation": {}}]}, "f.json: train[0]: expected a mapping with 'excitation' and 'trajectory'"),
    ({"train": [{"trajectory": {}}]}, "f.json: train[0]: expected a mapping with 'excitation' and 'trajectory'"),
    ({"train": [_entry()], "holdout": [{"excitation": {"name": "h", "values": [1.0]}, "trajectory": {}}]},
     "f.json: holdout[0]: KeyError: 'rate'"),
    ({"train": [_entry(rate="fast")]}, "f.json: train[0]: ValueError: could not convert string to float: 'fast'"),
    ({"train": [_entry(rate=-1.0)]}, "f.json: train[0]: ExcitationError: excitation 'e': rate must be > 0 Hz, got -1.0"),
    ({"train": [{**_entry(), "trajectory": {"time": []}}]},
     "f.json: train[0]: TrajectoryError: trajectory: missing field(s) ['keypoints', 'valid', 'names']"),
    ({"train": [_entry()], "truth": [0.1]}, "f.json: field 'truth' must be a mapping of parameter values"),
    ({"train": [_entry()], "truth": {"k": "soft"}},
     "f.json: field 'truth' must map parameter names to numbers (could not convert string to float: 'soft')"),
    ({"train": []}, "f.json: 'train' must hold at least one trajectory"),
    ({"train": [_entry()], "holdout": [{"excitation": {"name": "h", "rate": 1, "values": [[1.0]] * 3},
                                         "trajectory": _traj(("x", "y")).to_dict()}]},
     "f.json: trajectories disagree on keypoint names: [('a', 'b'), ('x', 'y')]"),
])
def test_core_data_from_dict_errors_name_source_and_entry(data, message):
    with pytest.raises(ObservationError) as info:
        RealTrial.from_dict(data, source="f.json")
    assert str(info.value) == message


def test_core_data_from_dict_default_source_name():
    with pytest.raises(ObservationError, match=r"^<dict>: expected a JSON object"):
        RealTrial.from_dict("nope")


def test_core_data_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="real trial file not found: .*missing.json"):
        RealTrial.load(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError, match="real trial .* is a directory, expected a regular file"):
        RealTrial.load(tmp_path)  # a directory is not a trial file (and is not missing either)
    bad = tmp_path / "bin.json"
    bad.write_bytes(b'{"train": [\xff]}')
    with pytest.raises(ObservationError) as info:
        RealTrial.load(bad)
    assert str(info.value) == f"{bad}: not a UTF-8 JSON file (invalid start byte at byte 11)"
    broken = tmp_path / "broken.json"
    broken.write_text('{"train": [', encoding="utf-8")
    with pytest.raises(ObservationError, match=r"broken.json: not valid JSON: Expecting value: line 1 column 12"):
        RealTrial.load(broken)
    empty = tmp_path / "empty.json"
    empty.write_text('{"train": []}', encoding="utf-8")
    with pytest.raises(ObservationError) as info:
        RealTrial.load(empty)
    assert str(info.value) == f"{empty}: 'train' must hold at least one trajectory"  # names the file


def test_core_data_load_reads_utf8_names(tmp_path):
    rt = RealTrial([_traj(("pointe_ä", "b"))], [_exc("élan")], source="prüfstand")
    path = tmp_path / "u.json"
    path.write_bytes(json.dumps(rt.to_dict(), ensure_ascii=False).encode("utf-8"))
    back = RealTrial.load(path)
    assert back.train[0].names == ("pointe_ä", "b") and back.train_excitations[0].name == "élan"
    assert back.source == "prüfstand"


# -- trial.py: jsonable -------------------------------------------------------------------------------
def test_core_data_jsonable_converts_numpy_paths_tuples_and_non_finite():
    out = jsonable({1: np.float32(0.5), "a": (1, np.int32(2)), "arr": np.array([[1.5, np.nan], [np.inf, 2.0]]),
                    "flags": np.array([True, False]), "b": np.bool_(False), "p": Path("/a/b"),
                    "nested": {"x": [np.float64(-np.inf), float("nan"), 3.25]}, "s": "text", "none": None, "i": 4})
    assert out == {"1": 0.5, "a": [1, 2], "arr": [[1.5, None], [None, 2.0]], "flags": [True, False], "b": False,
                   "p": "/a/b", "nested": {"x": [None, None, 3.25]}, "s": "text", "none": None, "i": 4}
    assert type(out["a"][1]) is int and type(out["1"]) is float and type(out["b"]) is bool
    assert type(jsonable(np.int64(7))) is int and jsonable(np.int64(7)) == 7
    assert type(jsonable(np.bool_(True))) is bool and jsonable(np.bool_(True)) is True
    assert jsonable(np.float64(2.5)) == 2.5 and type(jsonable(np.float64(2.5))) is float
    assert jsonable(float("inf")) is None and jsonable(math.nan) is None
    assert jsonable(Path("rel/x.json")) == "rel/x.json"
    json.dumps(out, allow_nan=False)


# -- yamlio.py ----------------------------------------------------------------------------------------
def test_core_data_loads_yaml_reads_safe_yaml():
    assert loads_yaml("a: 1\nb: [x, 2.5]\nc: {d: null}\n") == {"a": 1, "b": ["x", 2.5], "c": {"d": None}}
    assert loads_yaml("") is None
    assert loads_yaml("- 1\n- 1\n") == [1, 1]  # a repeated list item is no repeated key
    assert loads_yaml("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}  # same key, other mappings
    assert issubclass(StrictSafeLoader, yaml_safe_loader())
    with pytest.raises(YAMLInputError, match=r"^<string>:1:1: not valid YAML: could not determine a constructor"):
        loads_yaml("!!python/object:os.system x\n")  # safe types only


def yaml_safe_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.mark.parametrize("text, message", [
    ("a: 1\nb: 2\na: 3\n", "cfg.yaml:3:1: duplicate key 'a' (first given at line 1); give each key once"),
    ("top:\n  x: 1\n  y: 2\n  x: 3\n", "cfg.yaml:4:3: duplicate key 'x' (first given at line 2); give each key once"),
    ("l:\n  - {k: 1, k: 2}\n", "cfg.yaml:2:12: duplicate key 'k' (first given at line 2); give each key once"),
    ("1: a\n2: b\n1.0: c\n", "cfg.yaml:3:1: duplicate key 1.0 (first given at line 1); give each key once"),
    ("b: &b {k: 1}\nd:\n  <<: *b\n  k: 2\n  k: 3\n",
     "cfg.yaml:5:3: duplicate key 'k' (first given at line 4); give each key once"),
])
def test_core_data_duplicate_keys_refused_with_file_and_lines(text, message):
    with pytest.raises(YAMLInputError) as info:
        loads_yaml(text, source="cfg.yaml")
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_core_data_anchors_and_aliases_keep_their_meaning():
    d = loads_yaml("base: &b {k: 1}\nuse: *b\nself: &s {me: *s, list: [1, *s]}\n")
    assert d["use"] is d["base"] == {"k": 1}  # an alias is the same object, as with yaml.safe_load
    assert d["self"]["me"] is d["self"] and d["self"]["list"][1] is d["self"]  # a recursive mapping


def test_core_data_merge_keys_may_be_overridden():
    text = "base: &b {k: 1, j: 2}\nextra: &e {m: 3}\nd:\n  <<: *b\n  <<: *e\n  k: 5\n"
    assert loads_yaml(text) == {"base": {"k": 1, "j": 2}, "extra": {"m": 3}, "d": {"k": 5, "j": 2, "m": 3}}


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2\n", "cfg.yaml:2:1: not valid YAML: while parsing a flow sequence did not find expected ',' or ']'"),
    ("a: b: c\n", "cfg.yaml:1:5: not valid YAML: mapping values are not allowed in this context"),
    ("a: *nope\n", "cfg.yaml:1:4: not valid YAML: found undefined alias"),
    ("? [1, 2]\n: x\n", "cfg.yaml:1:3: not valid YAML: while constructing a mapping found unhashable key"),
    ('a: "\x01"\n', "cfg.yaml: not valid YAML: unacceptable character #x0001: control characters are not allowed"),
])
def test_core_data_yaml_errors_are_one_line_with_position(text, message):
    with pytest.raises(YAMLInputError) as info:
        loads_yaml(text, source="cfg.yaml")
    assert str(info.value) == message and "\n" not in str(info.value)


def test_core_data_load_yaml_files(tmp_path):
    good = tmp_path / "rig.yaml"
    good.write_text("name: fingér\nk: 0.5\n", encoding="utf-8")
    assert load_yaml(good) == {"name": "fingér", "k": 0.5}
    assert load_yaml(str(good)) == {"name": "fingér", "k": 0.5}
    dup = tmp_path / "dup.yaml"
    dup.write_text("k: 1\nk: 2\n", encoding="utf-8")
    with pytest.raises(YAMLInputError) as info:
        load_yaml(dup)
    assert str(info.value) == f"{dup}:2:1: duplicate key 'k' (first given at line 1); give each key once"
    with pytest.raises(IsADirectoryError, match=r"is a directory, expected a YAML file"):
        load_yaml(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"^YAML file not found: .*nope.yaml$"):
        load_yaml(tmp_path / "nope.yaml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: fingér\n".encode("latin-1"))
    with pytest.raises(YAMLInputError) as info:
        load_yaml(latin)
    assert str(info.value) == f"{latin}: not a UTF-8 text YAML file (invalid continuation byte at byte 10)"


# -- lockstep.py: assign_steps ------------------------------------------------------------------------
@pytest.mark.parametrize("period", [0.0, -0.25, float("nan"), float("inf")])
def test_core_data_assign_steps_refuses_bad_period(period):
    with pytest.raises(LockstepError, match="command period must be a positive number of seconds"):
        assign_steps([0.25], [0.0], period)


def test_core_data_assign_steps_empty_inputs():
    out = assign_steps([0.25, 0.5], [], 0.25)
    assert out.tolist() == [-1, -1] and out.dtype.kind == "i"
    assert assign_steps([], [0.0, 0.25], 0.25).shape == (0,)


def test_core_data_assign_steps_single_command_window():
    # one command at t=1, p=0.25: target 1.25, window [1.125, 1.375] (p/2 each side, inclusive)
    frames = [1.25, 1.125, 1.375, 1.0, 1.5, 1.124, 1.376]
    assert assign_steps(frames, [1.0], 0.25).tolist() == [0, 0, 0, -1, -1, -1, -1]


def test_core_data_assign_steps_widens_float32_command_stamps_before_adding_the_period():
    # float32(100.0) is exact; t + p must be 100.1 in float64, not float32's 100.0999985, or the
    # inclusive window [t + p/2, t + 3p/2] loses its upper edge
    cmds = np.array([100.0], dtype=np.float32)
    assert assign_steps([100.05, 100.15, 100.1501], cmds, 0.1).tolist() == [0, 0, -1]
    assert assign_steps([100.05, 100.15, 100.1501], [100.0], 0.1).tolist() == [0, 0, -1]


def test_core_data_assign_steps_ties_boundaries_and_order():
    p = 0.25
    cmds = [0.0, 0.25, 0.5]  # targets 0.25, 0.5, 0.75
    # 0.375 is half-way between targets 0 and 1: the earlier step; 0.875 = last target + p/2 (kept);
    # 0.125 = first target - p/2 (kept); 0.8751 and 0.1249 are outside
    frames = [0.375, 0.625, 0.875, 0.125, 0.8751, 0.1249, 0.5, 0.74]
    assert assign_steps(frames, cmds, p).tolist() == [0, 1, 2, 0, -1, -1, 1, 2]
    # commands given out of order: the step is the command's index, not its rank
    assert assign_steps([0.25, 0.5, 0.75], [0.5, 0.0, 0.25], p).tolist() == [1, 2, 0]
    # two commands at one stamp: the first one wins
    assert assign_steps([0.25, 0.3], [0.0, 0.0], p).tolist() == [0, 0]
    assert assign_steps([0.25, 0.75], [0.5, 0.0, 0.0], p).tolist() == [1, 0]


def test_core_data_assign_steps_shared_stamps_are_broken_by_step_order_alone():
    """Steps 0, 3, 4, 5, 8, 10 share one stamp (a stalled clock, commands re-sent out of order): the
    frame goes to one of them by step order and the neighbouring targets only, so a caller that
    passes just the commands whose target is within one period of the frame plus the nearest one on
    each side, in step order (as the tracker's indexed stream does), gets the same step."""
    p = 0.25
    cmds = np.array([0.5, 0.0, 0.25, 0.5, 0.5, 0.5, 1.75, 2.0, 0.5, 2.25, 0.5, 3.0])
    frames = np.array([0.75, 0.7, 0.8, 0.85, 0.5, 0.25, 2.0, 2.55])
    full = assign_steps(frames, cmds, p)
    assert full[0] == 0 and full[1] == 0  # at or before the shared target: the first of the tied steps
    assert full[4:].tolist() == [2, 1, 6, 9]  # each other frame: its one nearest target (t_k + p)
    assert full[2] in (0, 3, 4, 5, 8, 10) and full[3] == full[2]
    by_target = sorted(range(len(cmds)), key=lambda k: (cmds[k] + p, k))
    for f, k in zip(frames, full):
        inside = [i for i, s in enumerate(by_target) if abs(cmds[s] + p - f) <= p]
        lo, hi = max(inside[0] - 1, 0), min(inside[-1] + 2, len(cmds))
        near = sorted(by_target[lo:hi])  # step order
        k_near = int(assign_steps([f], cmds[near], p)[0])
        assert k == (near[k_near] if k_near >= 0 else -1), f


def test_core_data_assign_steps_irregular_schedule_matches_brute_force():
    rng = np.random.default_rng(3)
    p = 0.05
    cmds = 2.0 + np.arange(40) * p + rng.uniform(-0.2, 0.2, 40) * p
    frames = rng.uniform(1.9, 4.2, 300)
    got = assign_steps(frames, cmds, p)
    target = cmds + p
    for f, k in zip(frames, got):  # brute force: nearest target (earliest on a tie) if within p/2
        d = np.abs(f - target)
        j = int(np.argmin(d))
        assert k == (j if d[j] <= p / 2 else -1)


# -- lockstep.py: LockstepStream ----------------------------------------------------------------------
@pytest.mark.parametrize("period", [0.0, -1.0, float("nan"), float("inf")])
def test_core_data_stream_refuses_bad_period(period):
    with pytest.raises(LockstepError, match=r"trial 'tr': command period must be > 0 s"):
        LockstepStream("tr", "real", ("a",), period)


def test_core_data_stream_step_of_known_and_in_flight_commands():
    s = LockstepStream("tr", "real", ["a"], 0.25)
    assert s.keypoint_names == ("a",)
    assert s.step_of(1.0) == -1  # no command yet
    assert s.num_steps == 0
    s.add_command(1, 1.25)  # step 1 at 1.25 (target 1.5); step 3 at 1.75 (target 2.0)
    s.add_command(np.int64(3), np.float64(1.75))
    assert s.commands == {1: 1.25, 3: 1.75} and all(type(k) is int for k in s.commands)
    assert s.num_steps == 4
    assert s.step_of(1.5) == 1 and s.step_of(2.0) == 3  # the step number, not its index
    assert s.step_of(1.375) == 1 and s.step_of(2.125) == 3
    # beyond the last known command: extrapolated t_3 + (k - 3) p, so a frame at 2.25 is step 4, 2.75 step 6
    assert s.step_of(2.25) == 4 and s.step_of(2.75) == 6 and s.step_of(2.3) == 4
    # before the known commands (and not within p/2 of one): unmatched, never a step < the last known
    assert s.step_of(1.0) == -1 and s.step_of(0.5) == -1


def test_core_data_stream_add_frame_checks_shapes_and_returns_step():
    s = LockstepStream("tr", "sim", ("a", "b"), 0.25)
    s.add_command(0, 1.0)
    assert s.add_frame(1.25, [[1, 2], [3, 4]], [1, 0]) == 0
    assert s.add_frame(1.5, np.zeros((2, 2)), [True, True], received=1.6) == 1  # command 1 in flight
    fr = s.frames[0]
    assert isinstance(fr, FrameRecord) and fr.stamp == 1.25 and fr.received is None
    assert fr.keypoints.dtype == float and fr.valid.dtype == bool and fr.valid.tolist() == [True, False]
    assert s.frames[1].received == 1.6
    with pytest.raises(LockstepError, match=r"sim frame of trial 'tr': expected keypoints \(K=2, 2\) and valid "
                                            r"\(2,\), got \(1, 2\) and \(2,\)"):
        s.add_frame(1.75, [[0, 0]], [True, True])
    with pytest.raises(LockstepError, match=r"got \(2, 2\) and \(3,\)"):
        s.add_frame(1.75, [[0, 0], [1, 1]], [True, True, True])
    with pytest.raises(LockstepError, match=r"got \(2, 3\) and \(2,\)"):
        s.add_frame(1.75, np.zeros((2, 3)), [True, True])
    assert len(s.frames) == 2  # refused frames are not stored


def _stream(n_cmds=4, p=0.25, t0=10.0, **kw) -> LockstepStream:
    s = LockstepStream("tr", "real", ("a",), p, **kw)
    for k in range(n_cmds):
        s.add_command(k, t0 + k * p)
    return s


def test_core_data_stream_trajectory_rows_meta_and_pairing():
    s = _stream()  # targets 10.25, 10.5, 10.75, 11.0
    s.add_frame(11.5, [[9, 9]], [True])  # after the trial, received first: unmatched
    s.add_frame(10.25, [[1, 1]], [True])
    s.add_frame(10.75, [[3, 3]], [False])
    s.add_frame(9.0, [[9, 9]], [True])  # before the trial: unmatched
    s.add_frame(12.0, [[9, 9]], [True])  # after it: unmatched
    s.add_frame(10.875, [[9, 9]], [False])  # half-way to the next step (p/2 after target 2): step 2
    traj = s.trajectory()
    assert traj.num_frames == 4 and traj.names == ("a",) and traj.source == "real" and traj.trial_id == "tr"
    np.testing.assert_allclose(traj.time, [0.25, 0.5, 0.75, 1.0])
    assert traj.steps.tolist() == [0, 1, 2, 3]
    assert traj.valid[:, 0].tolist() == [True, False, False, False]
    assert traj.keypoints[0, 0].tolist() == [1.0, 1.0] and np.isnan(traj.keypoints[1:]).all()
    assert dict(traj.meta) == {"dropped_frames": 2, "late_frames": 0, "duplicate_frames": 1, "unmatched_frames": 3,
                               "period": 0.25}


def test_core_data_stream_duplicates_keep_the_nearer_then_the_first():
    s = _stream(2)  # targets 10.25, 10.5
    s.add_frame(10.1875, [[1, 1]], [True])  # step 0, 1/16 early
    s.add_frame(10.3125, [[2, 2]], [True])  # step 0, 1/16 late: a tie, the first is kept
    s.add_frame(10.25 + 0.1, [[3, 3]], [True])  # step 0 again, farther
    s.add_frame(10.4, [[4, 4]], [True])  # step 1, 0.1 early
    s.add_frame(10.55, [[5, 5]], [True])  # step 1, 0.05 late: nearer, replaces it
    s.add_frame(10.6, [[6, 6]], [True])  # step 1, farther: dropped as a duplicate
    s.add_frame(10.48, [[7, 7]], [True])  # step 1, 0.02 early: nearest, replaces it
    traj = s.trajectory()
    assert traj.keypoints[:, 0, 0].tolist() == [1.0, 7.0]
    assert traj.meta["duplicate_frames"] == 5 and traj.meta["dropped_frames"] == 0


def test_core_data_stream_late_frames_and_delay_statistics():
    s = _stream(4)  # targets 10.25, 10.5, 10.75, 11.0
    s.add_frame(10.25, [[0, 0]], [True], received=10.25 + 0.25)  # exactly one period: not late
    s.add_frame(10.5, [[0, 0]], [True], received=10.5 + 0.5)  # late
    s.add_frame(10.75, [[0, 0]], [True], received=10.75 + 0.125)
    s.add_frame(11.0, [[0, 0]], [True], received=11.0 + 0.375)  # late
    traj = s.trajectory()
    assert traj.meta["late_frames"] == 2
    d = sorted([0.25, 0.5, 0.125, 0.375])  # percentiles: linear interpolation at rank q (T - 1)
    assert traj.meta["delay_p50_s"] == pytest.approx(d[1] + 0.5 * (d[2] - d[1]))
    assert traj.meta["delay_p95_s"] == pytest.approx(d[2] + 0.85 * (d[3] - d[2]))
    assert traj.meta["delay_max_s"] == pytest.approx(0.5)
    strict = _stream(3, late_tolerance_s=0)
    for k in range(3):
        strict.add_frame(10.25 + 0.25 * k, [[0, 0]], [True], received=10.25 + 0.25 * k + 0.125 * (k - 1))
    assert strict.trajectory().meta["late_frames"] == 1  # delays -0.125, 0, 0.125 against 0 s
    offline = _stream(2)
    offline.add_frame(10.25, [[0, 0]], [True])  # no receive time: never late, no delay statistics
    meta = offline.trajectory().meta
    assert meta["late_frames"] == 0 and not any(k.startswith("delay") for k in meta)


def test_core_data_stream_targets_follow_the_command_stamps():
    s = LockstepStream("tr", "real", ("a",), 0.25)
    s.add_command(0, 10.0)
    s.add_command(1, 10.4)  # sent 0.15 s late: its frame is due at 10.65, not on the 10.5 grid
    s.add_command(2, 10.5)
    s.add_frame(10.65, [[1, 1]], [True], received=10.7)
    s.add_frame(10.75, [[2, 2]], [True], received=10.75)
    traj = s.trajectory()
    assert traj.valid[:, 0].tolist() == [False, True, True]
    assert traj.meta["delay_max_s"] == pytest.approx(0.05) and traj.meta["unmatched_frames"] == 0


def test_core_data_stream_num_steps_override_and_missing_commands():
    s = LockstepStream("tr", "sim", ("a",), 0.25)
    s.add_command(1, 10.25)  # step 0's command never arrived: its stamp is 10.25 - p = 10.0
    s.add_command(3, 10.75)  # step 2's is 10.5 (extrapolated from the first known)
    s.add_command(5, 11.5)  # beyond num_steps=4: ignored
    s.add_frame(10.25, [[0, 0]], [True])  # step 0
    s.add_frame(10.75, [[2, 2]], [True])  # step 2 (extrapolated target)
    s.add_frame(11.0, [[3, 3]], [True])  # step 3
    s.add_frame(11.75, [[5, 5]], [True])  # step 5's frame: not a step of a 4-step trial
    traj = s.trajectory(4)
    assert traj.num_frames == 4 and traj.valid[:, 0].tolist() == [True, False, True, True]
    assert traj.keypoints[:, 0, 0].tolist()[2:] == [2.0, 3.0]
    assert traj.meta["dropped_frames"] == 1 and traj.meta["unmatched_frames"] == 1
    assert s.trajectory().num_frames == 6  # default: steps 0..max command seen
    assert s.trajectory(np.int64(2)).num_frames == 2


def test_core_data_stream_trajectory_without_usable_commands():
    s = LockstepStream("tr", "real", ("a", "b"), 0.25)
    s.add_frame(1.0, np.zeros((2, 2)), [True, True])
    s.add_frame(1.25, np.zeros((2, 2)), [True, True])
    empty = s.trajectory()  # no command at all: no rows, every frame unmatched
    assert empty.num_frames == 0 and empty.keypoints.shape == (0, 2, 2)
    assert empty.meta["unmatched_frames"] == 2 and empty.meta["dropped_frames"] == 0
    s.add_frame(0.25, np.zeros((2, 2)), [True, True])  # where step 0 of a clock starting at 0 would be
    s.add_command(7, 1.0)  # only commands at or past the requested length: no grid for steps 0..T-1
    for T in (3, 7):
        traj = s.trajectory(T)
        assert traj.num_frames == T and not traj.valid.any()
        assert traj.meta["dropped_frames"] == T and traj.meta["unmatched_frames"] == 3
