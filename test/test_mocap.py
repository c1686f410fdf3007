"""io/mocap.py and io/joint_csv.py: the documented export layouts, gaps, frames, bad input."""

from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.io.joint_csv import JointCsvError, load_joint_csv
from vid2sid_ros.io.mocap import MocapError, load_mocap, write_motive_csv

DATA = Path(__file__).resolve().parent / "data" / "mocap"
K = np.arange(5)
A = np.stack([0.1 + 0.001 * K, np.full(5, 0.2), np.full(5, 0.3)], axis=1)
B = np.stack([np.zeros(5), -0.1 + 0.002 * K, np.full(5, 0.5)], axis=1)


@pytest.mark.parametrize("name, fmt, opts", [
    ("motive.csv", "motive", {"frame": {"up_axis": "y"}}),
    ("vicon.csv", "vicon", {}),
    ("qualisys.tsv", "qualisys", {}),
    ("plain.csv", "plain", {"unit": "m"}),
])
def test_every_layout_reads_the_same_world_points(name, fmt, opts):
    rec = load_mocap(DATA / name, markers={"a": "a", "b": "b"}, **opts)
    assert rec.format == fmt and rec.rate == pytest.approx(100.0)
    np.testing.assert_allclose(rec.time, K / 100.0, atol=1e-9)
    np.testing.assert_allclose(rec.points[:, 0], A, atol=1e-9)
    ok = np.array([True, True, False, True, True])
    np.testing.assert_allclose(rec.points[ok, 1], B[ok], atol=1e-9)
    assert rec.valid[:, 1].tolist() == ok.tolist() and np.isnan(rec.points[2, 1]).all()
    assert rec.invalid == {"a": 0, "b": 1}
    assert "b 1/5" in rec.report()
    traj = rec.trajectory("trial1")
    assert (traj.kind, traj.unit, traj.frame) == ("points", "m", "world") and traj.valid.sum() == 9


def test_frame_pose_and_trajectory_steps(tmp_path):
    rec = load_mocap(DATA / "vicon.csv", markers={"tip": "a"},
                     frame={"position": [1.0, 0.0, 0.0], "rpy": [0.0, 0.0, np.pi / 2]})
    np.testing.assert_allclose(rec.points[0, 0], [1.0 - 0.2, 0.1, 0.3], atol=1e-9)
    traj = rec.trajectory("t", rate=50.0)  # 100 Hz samples onto 50 Hz command steps: first sample of each
    assert traj.num_frames == 3 and np.allclose(traj.keypoints[1, 0], rec.points[2, 0])
    late = rec.trajectory("t", start_s=0.02)
    assert late.num_frames == 3 and np.allclose(late.keypoints[0, 0], rec.points[2, 0])


def test_motive_writer_round_trip_with_gaps(tmp_path):
    t = np.arange(6) / 100.0
    pts = np.random.default_rng(0).normal(size=(6, 3, 3)) * 0.1
    pts[3, 1] = np.nan
    p = write_motive_csv(tmp_path / "take.csv", t, pts, ["d1", "d2", "d3"])
    rec = load_mocap(p, markers=["d1", "d2", "d3"], frame={"up_axis": "y"})
    np.testing.assert_allclose(rec.points, pts, atol=1e-6)
    assert rec.invalid == {"d1": 0, "d2": 1, "d3": 0}


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_bad_mocap_input_is_one_line_naming_file_and_column(tmp_path):
    with pytest.raises(MocapError, match=r"motive.csv: marker column 'tipp' \(keypoint 'tip'\) not found; markers in "
                                         r"the file: a, b"):
        load_mocap(DATA / "motive.csv", markers={"tip": "tipp"})
    with pytest.raises(MocapError, match=r"did you mean 'a'"):
        load_mocap(DATA / "plain.csv", markers={"tip": "a "}, unit="m")
    p = _write(tmp_path, "back.csv", "time,a_x,a_y,a_z\n0.0,1,2,3\n0.02,1,2,3\n0.01,1,2,3\n")
    with pytest.raises(MocapError, match=r"back.csv:4: time column: non-monotonic time 0.01 s after 0.02 s"):
        load_mocap(p, markers=["a"], unit="mm")
    p = _write(tmp_path, "dup.csv", "time,a_x,a_y,a_z\n0.0,1,2,3\n0.0,1,2,3\n")
    with pytest.raises(MocapError, match=r"dup.csv:3: time column: duplicate time 0 s"):
        load_mocap(p, markers=["a"], unit="mm")
    with pytest.raises(MocapError, match=r"plain.csv: unit: unknown length unit 'inch'; expected one of mm, cm, m"):
        load_mocap(DATA / "plain.csv", markers=["a"], unit="inch")
    with pytest.raises(MocapError, match=r"does not say its length unit; give unit"):
        load_mocap(DATA / "plain.csv", markers=["a"])
    p = _write(tmp_path, "norate.csv", "a_x,a_y,a_z\n1,2,3\n")
    with pytest.raises(MocapError, match=r"norate.csv: no time column .* and no rate; give rate"):
        load_mocap(p, markers=["a"], unit="m")
    p = _write(tmp_path, "word.csv", "time,a_x,a_y,a_z\n0.0,1,2,3\n0.01,1,two,3\n")
    with pytest.raises(MocapError, match=r"word.csv:3: column 'a Y': expected a number, got 'two'"):
        load_mocap(p, markers=["a"], unit="m")
    bad_units = (DATA / "motive.csv").read_text().replace("Millimeters", "Furlongs")
    with pytest.raises(MocapError, match=r"header 'Length Units': unknown length unit 'Furlongs'"):
        load_mocap(_write(tmp_path, "furlong.csv", bad_units), markers=["a"])
    with pytest.raises(MocapError, match=r"unit 'm' given but the file's header says 1000 units per m"):
        load_mocap(DATA / "motive.csv", markers=["a"], unit="m")
    with pytest.raises(MocapError, match=r"up_axis: expected 'z' or 'y'"):
        load_mocap(DATA / "vicon.csv", markers=["a"], frame={"up_axis": "x"})


def test_nan_rows_are_invalid_samples_not_fatal(tmp_path):
    p = _write(tmp_path, "nan.csv", "t,a_x,a_y,a_z\n0,1,2,3\n0.01,nan,nan,nan\n0.02,,,\n0.03,1,2,3\n")
    rec = load_mocap(p, markers=["a"], unit="mm")
    assert rec.invalid == {"a": 2} and rec.valid[:, 0].tolist() == [True, False, False, True]


@pytest.mark.parametrize("delim", [",", "\t", ";"])
def test_column_wise_reader_matches_the_cell_by_cell_one(tmp_path, monkeypatch, delim):
    """The data rows are parsed column-wise with numpy (a 1M-row take: 66 s / +1.18 GB before, 19 s / +0.43 GB
    after on the loaded bench machine: bench/bench_mocap_parse.py); gaps next to the time column and in the last column, a short row, quoted
    cells and 'NA' cells must read exactly as the cell-by-cell reader reads them."""
    import vid2sid_ros.io.mocap as mocap

    rng = np.random.default_rng(1)
    rows = [delim.join(["time", "a_x", "a_y", "a_z", "b_x", "b_y", "b_z"])]
    for i in range(40):
        cells = [f"{i / 100:.2f}"] + [f"{v:.4f}" for v in rng.normal(size=6)]
        if i % 7 == 3:
            cells[1:4] = ["", "", ""]  # a gap next to the time column
        if i % 5 == 2:
            cells[6] = ""  # a gap in the last column (the row ends with a delimiter)
        rows.append(delim.join(cells))
    base = "\n".join(rows) + "\n"
    variants = {"plain": base, "short_row": base + delim.join(["0.40", "1", "2", "3"]) + "\n",
                "quoted": base.replace("0.10" + delim, '"0.10"' + delim),
                "NA": base + delim.join(["0.40", "NA", "2", "3", "4", "5", "6"]) + "\n"}
    fast_reader = mocap._numbers
    for name, text in variants.items():
        path = _write(tmp_path, f"{name}.csv", text)
        lines, d = mocap._lines(path)
        table = mocap._plain(mocap._split(lines[:1], d), path, None)
        declined = fast_reader(lines, mocap._data_lines(lines, table, d), d, table, [1, 2, 3, 4, 5, 6]) is None
        assert declined == (name != "plain"), name  # what it cannot read exactly goes cell by cell
        fast = load_mocap(path, markers=["a", "b"], unit="mm")
        with monkeypatch.context() as m:
            m.setattr(mocap, "_numbers", lambda *a, **k: None)  # the cell-by-cell reader alone
            slow = load_mocap(path, markers=["a", "b"], unit="mm")
        np.testing.assert_array_equal(fast.time, slow.time)
        np.testing.assert_array_equal(fast.points, slow.points)
        assert fast.invalid == slow.invalid and fast.invalid["a"] >= 6 and fast.invalid["b"] >= 8, (name, fast.invalid)


def test_joint_csv_positions_units_and_commands(tmp_path):
    p = _write(tmp_path, "js.csv", "time,shoulder,slide,cmd\n0.00,0.0,0.10,0.0\n0.01,0.1,,0.5\n0.03,0.3,0.13,nan\n")
    rec = load_joint_csv(p, joints={"shoulder": "shoulder_joint", "slide": "rail"}, units={"slide": "m"},
                         commands={"cmd": "motor"}, rate=100.0)
    traj = rec.trajectory("t1")
    assert traj.kind == "joints" and traj.units == ("rad", "m") and traj.names == ("shoulder_joint", "rail")
    assert traj.num_frames == 4 and traj.valid.tolist() == [[True, True], [True, False], [False, False], [True, True]]
    exc = rec.excitation("t1")
    assert exc.actuator_names == ("motor",) and exc.values[:, 0].tolist() == [0.0, 0.5, 0.5, 0.5]  # held
    assert rec.invalid == {"shoulder_joint": 0, "rail": 1}


def test_bad_joint_csv_is_one_line(tmp_path):
    p = _write(tmp_path, "js.csv", "time,shoulder\n0.0,0.0\n0.0,0.1\n")
    with pytest.raises(JointCsvError, match=r"js.csv: joint column 'elbow' not found; columns: time, shoulder"):
        load_joint_csv(p, joints=["elbow"])
    with pytest.raises(JointCsvError, match=r"js.csv:3: column 'time': duplicate time 0 s"):
        load_joint_csv(p, joints=["shoulder"])
    with pytest.raises(JointCsvError, match=r"unknown joint unit 'deg'; expected rad"):
        load_joint_csv(p, joints=["shoulder"], units="deg")


def test_c3d_files_through_the_c3d_package(tmp_path):
    c3d = pytest.importorskip("c3d")
    w = c3d.Writer(point_rate=100.0, point_units="mm  ")
    for k in range(5):
        p = np.zeros((2, 5), np.float32)
        p[0, :3], p[1, :3] = A[k] * 1000, B[k] * 1000
        if k == 2:
            p[1, 3] = -1.0  # the C3D gap convention
        w.add_frames([(p, np.zeros((0, 0), np.float32))])
    w.set_point_labels(["rod:a", "rod:b"])
    path = tmp_path / "take.c3d"
    with path.open("wb") as fh:
        w.write(fh)
    rec = load_mocap(path, markers={"tip": "a", "mid": "b"})
    assert rec.format == "c3d" and rec.rate == pytest.approx(100.0) and rec.invalid == {"tip": 0, "mid": 1}
    np.testing.assert_allclose(rec.points[:, 0], A, atol=1e-5)
    np.testing.assert_allclose(rec.points[[0, 1, 3, 4], 1], B[[0, 1, 3, 4]], atol=1e-5)
    np.testing.assert_allclose(rec.time, K / 100.0)
    with pytest.raises(MocapError, match=r"take.c3d: marker 'c' \(keypoint 'x'\) not in POINT:LABELS; markers in the "
                                         r"file: a, b"):
        load_mocap(path, markers={"x": "c"})
    bad = tmp_path / "bad.c3d"
    bad.write_bytes(b"\x02\x50" + b"\x00" * 50)
    with pytest.raises(MocapError, match=r"bad.c3d: not a readable C3D file"):
        load_mocap(bad, markers=["a"])
