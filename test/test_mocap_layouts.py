"""Lab mocap files as labs write them: axis-first columns (``x1,y1,z1``) and several trials in one
file told apart by an ID column, read through the rig config's documented keys only."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.io.mocap import MocapError, load_mocap
from vid2sid_ros.rigs import RigConfigError, build_real_trial, load_rig

CART = """<mujoco model="cart">
  <option timestep="0.005" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="cart" pos="0 0 0.1"><joint name="slide" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/><site name="mark" pos="0 0 0.05"/>
      <body name="pole"><joint name="hinge" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.01" mass="0.1"/><site name="tip" pos="0 0 -0.3"/>
      </body></body>
  </worldbody>
  <actuator><motor name="push" joint="slide" gear="1"/></actuator>
</mujoco>
"""

RATE = 50.0


def _rows(take: str, n: int, t0: float, offset_mm: float):
    """``n`` rows of take ``take``: time from ``t0`` s, marker 1 and 2 in mm (known pattern)."""
    out = []
    for k in range(n):
        t = t0 + k / RATE
        m1 = (offset_mm + 10.0 * k, 0.0, 150.0)
        m2 = (offset_mm + 10.0 * k + 5.0, 0.0, -150.0 + k)
        out.append([take, f"{t:.4f}", *(f"{v:.3f}" for v in m1 + m2)])
    return out


def _write(path, header, rows):
    path.write_text("\n".join(",".join(r) for r in [header] + rows) + "\n")
    return path


@pytest.fixture()
def two_takes(tmp_path):
    rows = _rows("A", 20, 0.0, 0.0) + _rows("B", 30, 0.0, 100.0)
    return _write(tmp_path / "lab.csv", ["take", "time", "x1", "y1", "z1", "x2", "y2", "z2"], rows)


def test_axis_first_columns_and_an_id_column_select_one_take(two_takes):
    rec = load_mocap(two_takes, markers={"mark": "1", "tip": "2"}, unit="mm", trial_column="take", trial_id="B")
    assert rec.points.shape == (30, 2, 3)
    assert rec.time[0] == 0.0 and rec.time[-1] == pytest.approx(29 / RATE) and rec.rate == pytest.approx(RATE)
    # take B's first row: marker 1 at (100, 0, 150) mm, marker 2 at (105, 0, -150) mm
    np.testing.assert_allclose(rec.points[0], [[0.100, 0.0, 0.150], [0.105, 0.0, -0.150]], atol=1e-9)
    np.testing.assert_allclose(rec.points[-1, 0, 0], 0.100 + 0.290, atol=1e-9)
    whole = load_mocap(two_takes, markers=["1"], unit="mm",
                       trial_column="take", trial_id="A")
    assert whole.points.shape == (20, 1, 3)


def test_a_missing_take_or_column_is_one_line_listing_what_is_there(two_takes):
    with pytest.raises(MocapError, match=r"no row with take = 'C'; IDs in the file: 'A', 'B'"):
        load_mocap(two_takes, markers=["1"], unit="mm", trial_column="take", trial_id="C")
    with pytest.raises(MocapError, match=r"trial_column 'session' not found; columns: take, time, x1"):
        load_mocap(two_takes, markers=["1"], unit="mm", trial_column="session", trial_id="A")
    with pytest.raises(MocapError, match="give both trial_column"):
        load_mocap(two_takes, markers=["1"], unit="mm", trial_id="A")
    # without the ID column the two takes' times go backwards: refused, naming the line
    with pytest.raises(MocapError, match=r"lab.csv:22: time column: non-monotonic"):
        load_mocap(two_takes, markers=["1"], unit="mm")


@pytest.mark.parametrize("names", [("x1", "y1", "z1"), ("X_1", "Y_1", "Z_1"), ("1_x", "1_y", "1_z"),
                                   ("1.X", "1.Y", "1.Z")])
def test_one_marker_spelled_every_common_way(tmp_path, names):
    p = _write(tmp_path / "m.csv", ["time", *names], [["0", "1", "2", "3"], ["0.01", "4", "5", "6"]])
    rec = load_mocap(p, markers=["1"], unit="m")
    np.testing.assert_allclose(rec.points[:, 0], [[1, 2, 3], [4, 5, 6]])


def test_a_rig_config_reads_one_take_by_its_documented_keys(two_takes, tmp_path):
    (tmp_path / "cart.xml").write_text(CART)
    cfg = tmp_path / "rig.yaml"
    cfg.write_text(
        "model: cart.xml\n"
        "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 2, nominal: 0.5, target: \"dof_damping[slide]\"}}\n"
        "keypoints: {mark: mark, tip: tip}\n"
        "trials:\n"
        f"  - {{name: b, source: {{mocap: {{path: {two_takes}, unit: mm, markers: {{mark: '1', tip: '2'}}, "
        "trial_column: take, trial_id: B}}, excitation: none}\n")
    rig = load_rig(cfg)
    real = build_real_trial(rig)
    traj = real.train[0]
    assert traj.kind == "points" and traj.unit == "m" and traj.num_frames == 30
    assert traj.time[0] == pytest.approx(0.0) and traj.time[-1] == pytest.approx(29 / RATE)
    np.testing.assert_allclose(traj.keypoints[0, 0], [0.100, 0.0, 0.150], atol=1e-9)
    bad = tmp_path / "bad.yaml"
    bad.write_text(cfg.read_text().replace("trial_id: B", "trial_id: Z"))
    with pytest.raises(RigConfigError) as info:
        load_rig(bad)
    msg = str(info.value)
    assert "\n" not in msg and "trials[0].source.mocap" in msg and "no row with take = 'Z'" in msg


def test_markers_default_to_the_rig_keypoints(tmp_path):
    """``mocap.markers`` is documented as defaulting to the keypoint names; leaving it out failed with
    "expected a mapping ..., got None"."""
    (tmp_path / "cart.xml").write_text(CART)
    rows = [[f"{k / 50:.2f}", str(2 * k + 1), "0", "100", str(2 * k + 2), "0", "-100"] for k in range(12)]
    _write(tmp_path / "m.csv", ["time", "mark_x", "mark_y", "mark_z", "tip_x", "tip_y", "tip_z"], rows)
    cfg = tmp_path / "rig.yaml"
    cfg.write_text(
        "model: cart.xml\n"
        "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 2, nominal: 0.5, target: \"dof_damping[slide]\"}}\n"
        "keypoints: {mark: mark, tip: tip}\n"
        "trials:\n  - {name: a, source: {mocap: {path: m.csv, unit: mm}}, excitation: none}\n")
    traj = build_real_trial(load_rig(cfg)).train[0]
    assert traj.names == ("mark", "tip")
    np.testing.assert_allclose(traj.keypoints[1, :, 0], [0.003, 0.004], atol=1e-12)


def test_a_file_without_marker_columns_says_which_naming_is_expected(tmp_path):
    p = _write(tmp_path / "m.csv", ["time", "a", "b", "c"], [["0", "1", "2", "3"], ["0.01", "4", "5", "6"]])
    with pytest.raises(MocapError, match=r"markers in the file: none \(a plain file names each marker's three "
                                         r"columns <m>_x, <m>_y, <m>_z"):
        load_mocap(p, markers=["1"], unit="m")


@pytest.mark.parametrize("rate", [120.0, 240.0, 59.94])
def test_times_rounded_to_the_millisecond_give_the_true_rate(tmp_path, rate):
    """A 120 Hz capture exported with times to 1 ms steps 8 and 9 ms; the median step read 125 Hz,
    a commanded trial at 120 Hz was refused ("rate 120 Hz differs from the recording's 125 Hz") and
    every 25th step was left empty. The rounding is within the column's resolution of a constant
    rate: the true rate is read and every step holds its sample."""
    n = 240
    rows = [[f"{k / rate:.3f}", f"{k:.1f}", "0", "100"] for k in range(n)]
    p = _write(tmp_path / "m.csv", ["time", "mark_x", "mark_y", "mark_z"], rows)
    rec = load_mocap(p, markers=["mark"], unit="mm")
    assert rec.rate == pytest.approx(rate, rel=2e-4)
    if rate == round(rate):
        assert rec.rate == rate
    traj = rec.trajectory("a")
    assert traj.num_frames == n and traj.valid.all() and traj.meta["missing_steps"] == 0
    np.testing.assert_allclose(traj.keypoints[:, 0, 0], np.arange(n) * 1e-3, atol=1e-12)  # sample k at step k
    # through a rig config with a commanded trial at the capture rate
    (tmp_path / "cart.xml").write_text(CART)
    cfg = tmp_path / "rig.yaml"
    cfg.write_text(
        "model: cart.xml\n"
        "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 2, nominal: 0.5, target: \"dof_damping[slide]\"}}\n"
        "keypoints: {mark: mark}\n"
        f"excitations: {{push: {{kind: sine, amplitude: 1.0, frequency: 1.0, duration: {n / rate!r}, rate: {rate}}}}}\n"
        "trials:\n  - {name: a, source: {mocap: {path: m.csv, unit: mm}}, excitation: push}\n")
    real = build_real_trial(load_rig(cfg))
    assert real.train[0].num_frames == n and real.train[0].valid.all()


def test_times_rounded_coarser_than_the_period_say_so(tmp_path):
    rows = [[f"{k / 240.0:.2f}", f"{k:.1f}", "0", "100"] for k in range(40)]
    p = _write(tmp_path / "m.csv", ["time", "mark_x", "mark_y", "mark_z"], rows)
    with pytest.raises(MocapError) as info:
        load_mocap(p, markers=["mark"], unit="mm")
    msg = str(info.value)
    assert "\n" not in msg and "duplicate time" in msg and "written to 0.01 s" in msg and "more decimals" in msg
