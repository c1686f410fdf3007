"""docs/rig_config.md states what the code does: free initial states, the excitation formulas, CSV timing.

A user (the /work/nu double pendulum) could not tell from the page that a `free` initial state starts at 0
(not at the first frame's pose), whether `chirp` is a linear or a log sweep, how `multisine` draws its phases
and normalises, or how CSV rows are timed. Each statement is checked against the code here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from vid2sid_ros.core.excitation import build_excitation

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs" / "rig_config.md").read_text()
FLAT = " ".join(PAGE.split())

CART = """<mujoco model="cart">
  <option timestep="0.005" gravity="0 0 0"/>
  <worldbody>
    <body name="cart"><joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1" rgba="0.9 0.1 0.1 1"/><site name="mark"/></body>
    <body name="arm" pos="0 0.5 0"><joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.01" mass="0.1"/><site name="tip" pos="0 0 -0.3"/></body>
  </worldbody>
  <actuator><motor name="push" joint="slide" gear="1"/></actuator>
</mujoco>
"""


def test_chirp_is_the_documented_linear_sweep():
    assert "`chirp`: a LINEAR sweep" in FLAT
    assert "u_k = A sin(2 pi (f0 t_k + (f1 - f0) t_k^2 / (2 t_end))), t_end = (T - 1) / rate" in FLAT
    e = build_excitation({"kind": "chirp", "amplitude": 0.7, "f0": 0.2, "f1": 2.5, "duration": 4.0, "rate": 30})
    T = e.num_steps
    t = np.arange(T) / 30.0
    t_end = (T - 1) / 30.0
    assert np.allclose(e.values[:, 0], 0.7 * np.sin(2 * np.pi * (0.2 * t + (2.5 - 0.2) * t ** 2 / (2 * t_end))))


def test_multisine_phases_and_normalisation_are_the_documented_ones():
    assert "phi_i drawn uniformly in [0, 2 pi) by `numpy.random.default_rng(seed).uniform`" in FLAT
    assert "u_k = A s_k / max_k |s_k|" in FLAT
    f = np.array([0.35, 0.8, 1.9])
    e = build_excitation({"kind": "multisine", "amplitude": 0.5, "frequencies": f.tolist(), "seed": 7,
                          "duration": 5.0, "rate": 30})
    t = np.arange(e.num_steps) / 30.0
    phi = np.random.default_rng(7).uniform(0, 2 * np.pi, size=3)
    s = np.sin(2 * np.pi * f[None] * t[:, None] + phi[None]).sum(axis=1)
    assert np.allclose(e.values[:, 0], 0.5 * s / np.abs(s).max())
    assert np.abs(e.values).max() == pytest.approx(0.5)


def test_csv_rows_are_held_and_frame_k_is_before_row_k(tmp_path):
    """Row k acts over [k/rate, (k+1)/rate) whatever the first time stamp; frame k has seen rows 0..k-1."""
    from vid2sid_ros.rigs import load_rig

    assert "row k always acts k / rate after the start of the trial, whatever t_first" in FLAT
    assert "the state at `time_offset` + t_k, BEFORE command k acts" in FLAT
    (tmp_path / "cart.xml").write_text(CART)
    rate, k0 = 20.0, 5
    rows = ["time,push"] + [f"{7.0 + k / rate:.4f},{1.0 if k == k0 else 0.0}" for k in range(12)]
    (tmp_path / "cmd.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "rig.yaml").write_text(
        "model: cart.xml\n"
        "parameters: {m: {unit: '1', lower: 0.5, upper: 2, nominal: 1, target: 'actuator_gear[push,0]'}}\n"
        "keypoints: {cart: mark}\n"
        "camera: {width: 64, height: 48, fovy: 50, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}\n"
        "excitations: {cmd: {kind: csv, path: cmd.csv}}\n"
        "trials: [{name: run, source: {sim2sim: {noise: none}}, excitation: cmd}]\n")
    rig = load_rig(tmp_path / "rig.yaml")
    exc = rig.excitations["train"][0]
    assert exc.rate == pytest.approx(rate) and exc.num_steps == 12  # the rate from the time column's spacing
    x = rig.make_twin().rollout(exc).state["qpos"][:, 0]
    assert np.all(x[:k0 + 1] == 0.0)  # frames 0..k0: row k0 has not acted yet
    v = np.diff(x)
    # held over one period (1 N on 1 kg for 0.05 s): the cart then coasts at 0.05 m/s
    assert 0 < v[k0] < v[k0 + 1]  # accelerating during row k0's period only
    assert np.allclose(v[k0 + 1:], 1.0 / rate * (1 / rate), rtol=1e-6)


def test_a_free_initial_state_starts_where_the_page_says_and_its_example_is_consistent(tmp_path):
    from vid2sid_ros.rigs import load_rig

    assert "A `free` coordinate is NOT read off the first frame" in PAGE
    block = PAGE.split("### Free initial states")[1].split("```yaml\n")[1].split("```")[0]
    doc = yaml.safe_load(block)
    (trial,) = doc["trials"]
    start = doc["calibration"]["start"]
    for key, (lo, hi) in trial["init_bounds"].items():  # the example's start values are its bounds' middles
        joint = re.match(r"qpos\[(\w+)\]", key).group(1)
        assert start[f"{trial['name']}_qpos_{joint}"] == pytest.approx(0.5 * (lo + hi))
    (tmp_path / "cart.xml").write_text(CART)
    base = ("model: cart.xml\n"
            "parameters: {m: {unit: '1', lower: 0.5, upper: 2, nominal: 1, target: 'actuator_gear[push,0]'}}\n"
            "keypoints: {tip: tip}\n"
            "camera: {width: 64, height: 48, fovy: 50, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}\n"
            "excitations: {still: {kind: step, amplitude: 0, duration: 0.5, rate: 20}}\n")
    (tmp_path / "a.yaml").write_text(base + "trials: [{name: decay, source: {sim2sim: {}}, excitation: still, "
                                            "init: {'qpos[hinge]': free}}]\n")
    spec = load_rig(tmp_path / "a.yaml").parameters["decay_qpos_hinge"]
    assert (spec.lower, spec.upper, spec.nominal) == (-math.pi, math.pi, 0.0)  # [-pi, pi] -> 0, not the pose
    (tmp_path / "b.yaml").write_text(base + "trials: [{name: decay, source: {sim2sim: {}}, excitation: still, "
                                            "init: {'qpos[hinge]': free}, init_bounds: {'qpos[hinge]': [0.5, 1.3]}}]\n")
    assert load_rig(tmp_path / "b.yaml").parameters["decay_qpos_hinge"].nominal == pytest.approx(0.9)


def test_key_table_lists_each_key_once_and_no_beside_rows():
    """The reference table has one row per key: a source option beside its kind key is the option
    of that kind (the `trials[].source` row says so), not a second row repeating its meaning."""
    table = PAGE.split("<!-- keys -->\n")[1].split("<!-- /keys -->")[0]
    keys = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    assert len(keys) > 100
    assert len(keys) == len(set(keys)), sorted(k for k in set(keys) if keys.count(k) > 1)
    assert "Beside the kind key" not in table
    assert "`trials[].source.video.fps`" in table and "`trials[].source.fps`" not in table
    assert "options either inside its block or beside it" in table
    from vid2sid_ros.rigs.schema import all_keys, validate_tree

    assert "trials[].source.fps" in {k.path for k in all_keys()}  # still accepted beside the kind key
    validate_tree({"trials": [{"name": "a", "source": {"video": "clip.mp4", "fps": 30}}]}, "rig.yaml",
                  keys=all_keys())


def test_every_start_plugin_is_documented():
    from vid2sid_ros.calibration.start import START_GUESSES, START_KINDS

    assert START_GUESSES
    section = PAGE.split("## Where the search starts")[1].split("\n## ")[0]
    for name in START_GUESSES:
        assert re.search(rf"^\| `{re.escape(name)}` \|", section, re.M), f"start plugin {name} not in docs/rig_config.md"
    for kind in START_KINDS:
        assert f"`kind: {kind}`" in section
