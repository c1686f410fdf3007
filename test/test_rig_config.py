"""The rig config: one loader, one schema, the reference page, trials, and configs that are data not code."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.rigs import (BUILTIN_RIGS, CodeRefusedError, RigConfigError, UnknownRigError, build_real_trial,
                              load_rig)
from vid2sid_ros.rigs.schema import all_keys, reference_markdown

REPO = Path(__file__).resolve().parents[1]

SLIDER_XML = """
<mujoco model="slider">
  <option timestep="0.002" integrator="RK4" gravity="0 0 0"/>
  <worldbody>
    <site name="origin" pos="0 0 0" size="0.01"/>
    <body name="cart">
      <joint name="slide" type="slide" axis="1 0 0" stiffness="10" damping="0.05"/>
      <geom type="sphere" size="0.02" mass="0.5" rgba="0 0.6 0 1"/>
      <site name="marker" size="0.01"/>
    </body>
  </worldbody>
</mujoco>
"""

SLIDER_RIG = """
rig: slider
description: A cart on a spring-loaded rail; keypoint 'cart' is its marker.
model: slider.xml
parameters:
  stiffness: {unit: N/m, lower: 1, upper: 100, nominal: 20, target: "jnt_stiffness[slide]"}
  scale: {unit: px/m, lower: 100, upper: 2000, nominal: 1000, kind: nuisance, target: camera.px_per_m, frozen: true}
keypoints: {cart: marker}
projection: {anchor: origin, width: 320, height: 240, origin_x: 160, origin_y: 120}
max_physics_timestep: 0.002
excitations:
  still: {kind: step, amplitude: 0.0, duration: 1.0, rate: 50}
trials:
  - {name: a, source: {sim2sim: {truth: {stiffness: 40}, noise: none}}, excitation: still, init: {"qpos[slide]": 0.1}}
  - {name: b, source: {sim2sim: {truth: {stiffness: 40}, noise: none}}, excitation: still, init: {"qpos[slide]": free},
     init_bounds: {"qpos[slide]": [-0.2, 0.2]}}
  - {name: c, source: {sim2sim: {truth: {stiffness: 40}, noise: none}}, excitation: still,
     init: {"qpos[slide]": -0.05}, split: holdout}
"""


@pytest.fixture()
def slider(tmp_path):
    (tmp_path / "slider.xml").write_text(SLIDER_XML)
    (tmp_path / "rig.yaml").write_text(SLIDER_RIG)
    return tmp_path / "rig.yaml"


def _variant(path: Path, old: str, new: str, name: str = "bad.yaml") -> Path:
    text = path.read_text()
    assert old in text, old
    out = path.parent / name
    out.write_text(text.replace(old, new))
    return out


# -- the reference page -----------------------------------------------------------------------
def test_reference_page_lists_every_key_and_is_current():
    page = (REPO / "docs" / "rig_config.md").read_text()
    table = page.split("<!-- keys -->\n")[1].split("<!-- /keys -->")[0]
    assert table == reference_markdown(), "docs/rig_config.md is stale: regenerate with `python -m vid2sid_ros.rigs`"
    for k in all_keys():
        # a source option beside its kind key is documented as the option inside the kind's block
        assert f"| `{k.alias_of or k.path}` |" in table
        assert k.doc.strip(), k.path  # every key has a meaning


def test_every_builtin_rig_is_a_config_in_the_same_format():
    from vid2sid_ros.sim.registry import make_rig

    for name, path in BUILTIN_RIGS.items():
        rig = load_rig(name)
        assert rig.name == name and rig.source == path and rig.excitations["train"]
        assert load_rig(path).parameters.names == rig.parameters.names
    # the built-in twins' rigs are unchanged by the config route (same spec, excitations, tracker)
    for name in ("finger", "toy"):
        a, b = load_rig(name), make_rig(name)
        assert a.parameters == b.parameters and a.tracker == b.tracker and a.description == b.description
        assert {k: [(e.name, e.values.tolist()) for e in v] for k, v in a.excitations.items()} == \
            {k: [(e.name, e.values.tolist()) for e in v] for k, v in b.excitations.items()}
    with pytest.raises(UnknownRigError, match=r"unknown rig 'fingr' \(did you mean finger\?\)"):
        load_rig("fingr")


def test_legacy_calibrate_config_extends_the_builtin_rig():
    rig = load_rig(REPO / "config" / "calibrate_finger.yaml")
    assert rig.name == "finger" and rig.config["real"] == {"sim2sim": {"seed": 0, "noise": "camera"}}
    assert rig.calibration["rollout_budget"] == 40 and rig.proposer["proposer"] == "reasoner"


# -- trials -------------------------------------------------------------------------------------
def test_trials_have_their_own_initial_state_and_free_init_is_a_per_trial_nuisance(slider):
    rig = load_rig(slider)
    assert [t.name for t in rig.trials] == ["a", "b", "c"]
    assert [e.name for e in rig.excitations["train"]] == ["a", "b"] and rig.excitations["holdout"][0].name == "c"
    p = rig.parameters["b_qpos_slide"]
    assert p.kind == "nuisance" and (p.lower, p.upper) == (-0.2, 0.2) and p.target == "init.qpos[slide]@b"
    assert "b_qpos_slide" in rig.parameters.free_names
    twin = rig.make_twin()
    twin.set_parameters({"b_qpos_slide": -0.15})
    x0 = {e.name: twin.rollout(e).trajectory.keypoints[0, 0, 0] for e in rig.excitations["train"]
          + rig.excitations["holdout"]}
    # 1000 px/m about the origin at column 160: each trial starts where ITS init says
    assert x0 == pytest.approx({"a": 260.0, "b": 10.0, "c": 110.0})
    real = build_real_trial(rig)
    assert real.truth["stiffness"] == 40 and [t.trial_id for t in real.train] == ["a", "b"]
    assert [t.trial_id for t in real.holdout] == ["c"]
    # the stand-in for trial b starts at the free coordinate's nominal (0: inside the bounds)
    assert real.train[1].keypoints[0, 0, 0] == pytest.approx(160.0)
    # physics is shared: the stiffness shows as the same period in every trial
    k = real.train[0].keypoints[:, 0, 0] - 160
    crossings = np.flatnonzero(np.diff(np.sign(k)) != 0)
    assert (crossings[1] - crossings[0]) / 50.0 == pytest.approx(math.pi / math.sqrt(40 / 0.5), abs=0.03)


def test_time_split_within_a_trial(slider):
    bad = _variant(slider, "init: {\"qpos[slide]\": 0.1}}", "init: {\"qpos[slide]\": 0.1}, split: {train_fraction: 0.6}}",
                   "split.yaml")
    rig = load_rig(bad)
    tr = {e.name: e for e in rig.excitations["train"]}
    ho = {e.name: e for e in rig.excitations["holdout"]}
    assert tr["a_train"].num_steps == 30 and ho["a_holdout"].num_steps == 50
    assert ho["a_holdout"].meta["scored_from_frame"] == 30
    real = build_real_trial(rig)
    h = real.holdout[[t.trial_id for t in real.holdout].index("a_holdout")]
    assert not h.valid[:30].any() and h.valid[30:].all()
    # the benchmark's stand-in scores the same part of a time-split trial
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial

    stand_in = make_sim2sim_trial(rig, {"stiffness": 40.0}, noise="none")
    h = stand_in.holdout[[t.trial_id for t in stand_in.holdout].index("a_holdout")]
    assert not h.valid[:30].any() and h.valid[30:].all()


# -- bad input: one line naming file:key ---------------------------------------------------------
@pytest.mark.parametrize("old, new, msg", [
    ("keypoints: {cart: marker}", "keypoint: {cart: marker}",
     r"bad.yaml:keypoint: unknown key \(did you mean keypoints\?\)"),
    ("max_physics_timestep: 0.002", "max_physics_timestep: fast",
     r"bad.yaml:max_physics_timestep: expected a number \(s\), got 'fast' \(string\)"),
    ("model: slider.xml\n", "", r"bad.yaml:model: missing \(required\)"),
    ("model: slider.xml", "model: nope.xml", r"bad.yaml:model: model file not found: .*nope.xml"),
    ("keypoints: {cart: marker}", "keypoints: {cart: markr}",
     r"bad.yaml:keypoints.cart: 'markr' is neither a site nor a body"),
    ("{sim2sim: {truth: {stiffness: 40}, noise: none}}, excitation: still, init: {\"qpos[slide]\": 0.1}}",
     "{video: missing.mp4}, excitation: still}", r"bad.yaml:trials\[0\].source.video.path: file not found: .*missing.mp4"),
    ("excitation: still, init: {\"qpos[slide]\": 0.1}}", "excitation: stil}",
     r"bad.yaml:trials\[0\].excitation: unknown excitation 'stil' \(did you mean still\?\)"),
    ("init: {\"qpos[slide]\": 0.1}}", "init: {\"qpos[slide]\": lots}}",
     r"bad.yaml:trials\[0\].init.qpos\[slide\]: expected a number .* or 'free', got 'lots'"),
    ("target: \"jnt_stiffness[slide]\"", "target: \"jnt_stifness[slide]\"",
     r"bad.yaml:parameters.stiffness.target: .*jnt_stifness"),
    ("split: holdout", "split: hold", r"bad.yaml:trials\[2\].split: expected one of train, holdout, got 'hold'"),
    ("{sim2sim: {truth: {stiffness: 40}, noise: none}}, excitation: still, init: {\"qpos[slide]\": 0.1}}",
     "{simulation: {}}, excitation: still}", r"bad.yaml:trials\[0\].source.simulation: unknown key"),
    ("description: A cart", "description: [A cart", r"bad.yaml:4:6: not valid YAML"),
    ("max_physics_timestep: 0.002", "max_physics_timestep: 0.002\nmax_physics_timestep: 0.004",
     r"bad.yaml:11:1: duplicate key 'max_physics_timestep' \(first given at line 10\)"),
])
def test_bad_rig_config_is_one_line_naming_file_and_key(slider, old, new, msg):
    with pytest.raises(RigConfigError) as e:
        load_rig(_variant(slider, old, new))
    assert re.search(msg, str(e.value)), str(e.value)
    assert "\n" not in str(e.value)


# -- a config is data, not code -----------------------------------------------------------------
def test_code_references_are_refused_without_the_opt_in(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(yaml.safe_dump({"rig": "os:system", "rig_options": {"command": f"touch {marker}"}}))
    monkeypatch.delenv("VID2SID_ALLOW_CODE", raising=False)
    with pytest.raises(CodeRefusedError, match=r"evil.yaml:rig: 'os:system' is a code reference .* --allow-code "
                                               r"or VID2SID_ALLOW_CODE=1"):
        load_rig(cfg)
    with pytest.raises(CodeRefusedError, match="never runs code"):
        load_rig("os:system")
    assert not marker.exists()
    # with the opt-in the reference is imported and called (and must return a Rig)
    monkeypatch.setenv("VID2SID_ALLOW_CODE", "1")
    assert load_rig("toy").name == "toy"


# -- every command reads the same file ---------------------------------------------------------
def test_calibrate_benchmark_and_track_take_the_rig_file(slider, tmp_path, capsys):
    import json

    import cv2

    from vid2sid_ros.cli import main

    rc = main(["calibrate", str(slider), "--budget", "24", "--iterations", "4", "--out", str(tmp_path / "run"),
               "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    res = json.loads((tmp_path / "run" / "result.json").read_text())
    assert res["values"]["stiffness"] == pytest.approx(40.0, rel=0.02)  # shared physics, three trials
    assert yaml.safe_load((tmp_path / "run" / "result.yaml").read_text())["rig"] == "slider"  # was ''
    assert (tmp_path / "run" / "report.html").is_file()

    rc = main(["benchmark", "sim2sim", "--rig", str(slider), "--seeds", "1", "--methods", "reasoner", "--budget", "40",
               "--iterations", "8", "--noise", "keypoint", "--no-progress", "--out", str(tmp_path / "bench")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    bench = json.loads((tmp_path / "bench" / "results.json").read_text())
    # the stand-in needs no video: the rig's own excitations and per-trial initial states (b's is free)
    assert bench["rig"] == "slider" and set(bench["free_parameters"]) == {"stiffness", "b_qpos_slide"}
    assert bench["methods"]["reasoner"]["per_parameter"]["stiffness"] < 0.05

    # track: the rig file's tracker on a clip of a red disc
    tracked = _variant(slider, "max_physics_timestep: 0.002", "max_physics_timestep: 0.002\ntracker: {kind: markers, "
                       "markers: [{name: cart, hsv_lower: [170, 120, 80], hsv_upper: [10, 255, 255]}]}", "tracked.yaml")
    clip = tmp_path / "clip.mp4"
    w = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 20.0, (160, 120))
    for k in range(20):
        f = np.full((120, 160, 3), 230, np.uint8)
        cv2.circle(f, (40 + 4 * k, 60), 8, (0, 0, 220), -1)  # BGR red
        w.write(f)
    w.release()
    rc = main(["track", str(clip), "--rig", str(tracked), "--out", str(tmp_path / "t.json")])
    assert rc == 0, capsys.readouterr().err
    traj = json.loads((tmp_path / "t.json").read_text())
    assert traj["names"] == ["cart"]
    rc = main(["track", str(clip), "--rig", str(_variant(slider, "rig: slider", "rig: os:system", "evil.yaml"))])
    assert rc == 2 and "never runs code unless you allow it" in capsys.readouterr().err


def _wrong_value(type_text: str):
    """A value of none of the key's types (None when every kind of value is accepted)."""
    from vid2sid_ros.rigs.schema import _type_ok

    tokens = [t.strip() for t in type_text.split("|")]
    for v in (3.5, "abc", True, [1, 2], {"x": 1}):
        if not any(_type_ok(t, v) for t in tokens):
            return v
    return None


def _doc_with(path: str, value):
    """A minimal document holding ``value`` at schema ``path`` (lists get one item), and its location."""
    doc: dict = {}
    node, where = doc, []
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        is_list = part.endswith("[]")
        name = part[:-2] if is_list else part
        if name == "*":
            name = "anything"
        where.append(f"{name}[0]" if is_list else name)
        if last:
            node[name] = value
        elif is_list:
            item = {"source": {"sim2sim": {}}} if name == "trials" else {}
            node[name] = [item]
            node = item
        else:
            node[name] = node.get(name) if isinstance(node.get(name), dict) else {}
            node = node[name]
    return doc, ".".join(where)


def test_every_key_of_the_schema_refuses_a_wrong_type_naming_file_and_key():
    from vid2sid_ros.rigs.schema import all_keys, validate_tree

    checked = 0
    for key in all_keys():
        bad = _wrong_value(key.type)
        if bad is None:
            continue  # a free-form key (any value is valid there)
        doc, where = _doc_with(key.path, bad)
        with pytest.raises(RigConfigError) as e:
            validate_tree(doc, "rig.yaml")
        assert str(e.value).startswith(f"rig.yaml:{where}: expected "), (key.path, str(e.value))
        checked += 1
    assert checked > 100  # nearly every key has a type to get wrong


def test_an_inline_parameter_spec_carries_the_rig_name(slider):
    """result.yaml and randomization.yaml said `rig: ''` for every user rig with inline parameters: the spec's
    rig is the config's `rig:` (else the file's stem)."""
    assert load_rig(slider).parameters.rig == "slider"
    unnamed = _variant(slider, "rig: slider\n", "", "my_cart.yaml")
    assert load_rig(unnamed).parameters.rig == "my_cart"


def test_free_initial_state_takes_unit_and_bounds_from_the_joint(tmp_path):
    """docs/rig_config.md: init_bounds default to the joint range, else [-pi, pi] rad / [-1, 1] m. A cart's
    slide limited to +-0.9 m got +-3.14 'rad or m' (the cart off its rail); explicit init_bounds are kept, and the
    unit is still the joint's (a user's hinge with init_bounds printed 'decay_qpos_j1 = 0.886 rad or m')."""
    from vid2sid_ros.rigs import load_rig

    (tmp_path / "cart.xml").write_text(
        '<mujoco><worldbody><body name="cart"><joint name="slider" type="slide" axis="1 0 0" range="-0.9 0.9"/>'
        '<geom type="box" size="0.1 0.05 0.05" mass="1"/><site name="c"/>'
        '<body name="pole"><joint name="hinge" type="hinge" axis="0 1 0"/>'
        '<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.01" mass="0.1"/><site name="tip" pos="0 0 -0.5"/>'
        '</body></body><body name="rod"><joint name="rail2" type="slide" axis="0 0 1"/>'
        '<geom type="sphere" size="0.02" mass="0.1"/></body></worldbody></mujoco>')
    doc = {"model": "cart.xml", "keypoints": {"cart": "c", "tip": "tip"},
           "parameters": {"d": {"unit": "N*s/m", "lower": 0.1, "upper": 5, "nominal": 1, "target": "dof_damping[slider]"}},
           "camera": {"width": 160, "height": 120, "fovy": 50, "pose": {"position": [0, -3, 0], "look_at": [0, 0, 0]}},
           "trials": [{"name": "a", "source": {"sim2sim": {}},
                       "init": {"qpos[slider]": "free", "qpos[hinge]": "free", "qvel[slider]": "free",
                                "qpos[rail2]": "free", "qvel[hinge]": "free"},
                       "init_bounds": {"qpos[rail2]": [-0.2, 0.3], "qvel[hinge]": [-2.0, 2.0]},
                       "excitation": {"kind": "step", "amplitude": 0.0, "duration": 1.0, "rate": 30.0}}]}
    p = load_rig(doc, source=(str(tmp_path / "cart.yaml"), tmp_path)).parameters
    got = {n: (p[n].unit, p[n].lower, p[n].upper) for n in p.names if n.startswith("a_")}
    assert got["a_qpos_slider"] == ("m", -0.9, 0.9)
    assert got["a_qpos_hinge"] == ("rad", pytest.approx(-np.pi), pytest.approx(np.pi))
    assert got["a_qvel_slider"] == ("m/s", -10.0, 10.0)
    assert got["a_qvel_hinge"] == ("rad/s", -2.0, 2.0)  # with init_bounds: still the joint's unit (was 'rad/s or m/s')
    assert got["a_qpos_rail2"] == ("m", -0.2, 0.3)  # the config's init_bounds win over the joint default


def test_csv_excitation_columns_must_name_the_rig_actuators(tmp_path):
    """A commands CSV whose column is not an actuator ('pusher' for 'push') was driven by position,
    silently (swapped columns of two motors would be too); it is one line naming the key, file and column."""
    from vid2sid_ros.rigs import RigConfigError, load_rig

    (tmp_path / "cart.xml").write_text(
        '<mujoco><worldbody><body name="cart"><joint name="slider" type="slide" axis="1 0 0"/>'
        '<geom type="box" size="0.1 0.05 0.05" mass="1"/><site name="c"/></body></worldbody>'
        '<actuator><motor name="push" joint="slider"/></actuator></mujoco>')
    (tmp_path / "ok.csv").write_text("time,push\n0,0.1\n0.1,0.2\n0.2,0.0\n")
    (tmp_path / "bad.csv").write_text("time,pusher\n0,0.1\n0.1,0.2\n0.2,0.0\n")
    doc = {"model": "cart.xml", "keypoints": {"cart": "c"},
           "parameters": {"d": {"unit": "N*s/m", "lower": 0.1, "upper": 5, "nominal": 1, "target": "dof_damping[slider]"}},
           "camera": {"width": 160, "height": 120, "fovy": 50, "pose": {"position": [0, -3, 0], "look_at": [0, 0, 0]}},
           "excitations": {"cmds": {"kind": "csv", "path": "ok.csv"}},
           "trials": [{"name": "a", "source": {"sim2sim": {}}, "excitation": "cmds"}]}
    src = (str(tmp_path / "cart.yaml"), tmp_path)
    assert load_rig(doc, source=src).named_excitations["cmds"].actuator_names == ("push",)
    doc["excitations"]["cmds"]["path"] = "bad.csv"
    with pytest.raises(RigConfigError) as err:
        load_rig(doc, source=src)
    msg = str(err.value)
    assert "\n" not in msg and "cart.yaml:excitations.cmds.path" in msg and "'pusher'" in msg
    assert "did you mean push?" in msg


def test_the_proposer_key_names_every_registered_proposer():
    """The rig config's ``proposer`` row and the calibrator node's parameter list every proposer of the registry."""
    from vid2sid_ros.calibration.proposers import PROPOSERS
    from vid2sid_ros.rigs.schema import all_keys

    doc = next(k.doc for k in all_keys() if k.path == "proposer")
    node = (Path(__file__).resolve().parents[1] / "vid2sid_ros" / "nodes" / "calibrator_node.py").read_text()
    for name in PROPOSERS:
        assert name in doc, name
        assert name in node, name


TWO_MOTORS = """<mujoco model="two">
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 0 1" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
      <body name="b" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 0 1" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.015" mass="0.3"/>
        <site name="tip" pos="0.25 0 0" size="0.01"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m" joint="j1" gear="1"/>
    <motor name="f" joint="j2" gear="1"/>
  </actuator>
</mujoco>
"""


def test_without_an_actuators_key_the_columns_are_the_models_actuators_in_its_order(tmp_path):
    """Two motors and no ``actuators:``: a profile's columns are the model's actuators (the documented
    default), so ``actuator: f`` drives the second motor and a profile without it the first — not one
    column named ``u0`` that the twin refuses at the first rollout."""
    (tmp_path / "m.xml").write_text(TWO_MOTORS)
    (tmp_path / "rig.yaml").write_text(textwrap.dedent("""\
        rig: two
        model: m.xml
        parameters:
          d1: {unit: N*m*s/rad, lower: 0.01, upper: 0.3, nominal: 0.05, target: "dof_damping[j1]"}
        keypoints: {tip: tip}
        camera: {width: 160, height: 120, fovy: 60, pose: {position: [0.3, -0.6, 2.0], look_at: [0.3, 0, 1.0]}}
        excitations:
          first: {kind: sine, amplitude: 0.1, frequency: 1.0, duration: 1.0, rate: 30}
          second: {kind: sine, amplitude: 0.1, frequency: 1.0, duration: 1.0, rate: 30, actuator: f}
        trials:
          - {name: t, source: {sim2sim: {seed: 0}}, excitation: first, split: train}
        """))
    from vid2sid_ros.rigs import load_rig

    rig = load_rig(str(tmp_path / "rig.yaml"))
    first, second = rig.named_excitations["first"], rig.named_excitations["second"]
    assert first.actuator_names == second.actuator_names == ("m", "f")
    assert np.abs(first.values[:, 0]).max() > 0 and not first.values[:, 1].any()
    assert np.abs(second.values[:, 1]).max() > 0 and not second.values[:, 0].any()
    twin = rig.make_twin()
    assert not twin.rollout(first).diverged  # the twin takes the columns (it refused ['u0'] before)


def test_two_parameters_writing_one_model_field_element_are_refused(slider):
    from vid2sid_ros.rigs import load_rig

    bad = _variant(slider, '  stiffness: {unit: N/m, lower: 1, upper: 100, nominal: 20, target: "jnt_stiffness[slide]"}',
                   '  stiffness: {unit: N/m, lower: 1, upper: 100, nominal: 20, target: "jnt_stiffness[slide]"}\n'
                   '  damping: {unit: N*s/m, lower: 0.01, upper: 1, nominal: 0.05, target: "dof_damping[slide]"}\n'
                   '  both: {unit: N/m, lower: 1, upper: 100, nominal: 20,'
                   ' target: "dof_damping[slide]*0.01, jnt_stiffness[slide]"}')
    with pytest.raises(RigConfigError, match=r"^\S*bad.yaml:parameters: 'damping' and 'both' both write "
                                             r"dof_damping\[slide\]; give each model field one parameter$"):
        load_rig(bad)
    assert list(load_rig(slider).parameters.names[:2]) == ["stiffness", "scale"]  # one parameter per element: accepted


def test_a_robot_description_model_is_the_same_twin_as_its_file(tmp_path):
    """Was: ``model: {robot_description: TEXT}`` failed at once ("model file not found: .../<robot ..."): the
    loader handed the text to the twin as a file path."""
    arm = Path(__file__).resolve().parents[1] / "examples" / "rigs" / "urdf_arm"
    doc = yaml.safe_load((arm / "rig.yaml").read_text())
    doc["model"] = {"robot_description": (arm / "arm2.urdf").read_text()}
    for f in ("meshes", "commands.csv"):
        (tmp_path / f).symlink_to(arm / f)
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    from_text = load_rig(tmp_path / "rig.yaml").make_twin()
    from_file = load_rig(arm / "rig.yaml").make_twin()
    assert (from_text.model.nbody, from_text.model.ngeom, from_text.model.nu) == (
        from_file.model.nbody, from_file.model.ngeom, from_file.model.nu)
    exc = build_real_trial(load_rig(arm / "rig.yaml")).train_excitations[0]
    a, b = from_text.rollout(exc), from_file.rollout(exc)
    assert np.array_equal(a.trajectory.keypoints, b.trajectory.keypoints) and not a.diverged
    doc["model"] = {"robot_description": "arm2.urdf"}  # a path where the text belongs: one line
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(RigConfigError, match=r"rig.yaml:model.robot_description: expected URDF XML text"):
        load_rig(tmp_path / "rig.yaml")
