"""Motion-capture exports (OptiTrack Motive, Vicon Nexus, Qualisys, plain CSV/TSV) as 3-D trajectories.

A lab's motion-capture system exports marker positions per frame; :func:`load_mocap`
reads them into a :class:`MocapRecording` (time, marker positions in metres in the
twin's world frame, validity) and :meth:`MocapRecording.trajectory` makes the
``kind="points"`` :class:`~vid2sid_ros.core.trajectory.Trajectory` the calibration fits.
No ROS, no network; ``csv`` for the header rows, numpy for the data rows (a 1M-row take in
seconds: ``bench/bench_mocap_parse.py``).

Column layouts (``format``; ``"auto"`` detects them from the first lines)
-------------------------------------------------------------------------

``motive`` — OptiTrack Motive "CSV export" (format versions 1.2x): line 1 holds
``key,value`` pairs (``Export Frame Rate``, ``Length Units`` = ``Meters`` /
``Millimeters`` / ``Centimeters``, ``Coordinate Space``), then a blank line, then header
rows whose first cells are empty or ``Type`` / ``Name`` / ``ID``: the ``Type`` row says
``Marker`` (or ``Rigid Body Marker``, ``Rigid Body``), the ``Name`` row the marker label
(``Take:disk1`` or ``disk1``), a row says ``Position`` / ``Rotation``; the column row is
``Frame,Time (Seconds),X,Y,Z,...``. Empty cells are gaps (occluded markers). Motive's
world is Y-up: give ``up_axis: y`` to turn it into the twin's Z-up world (REP 103)::

    Format Version,1.23,Take Name,rod_trial1,Export Frame Rate,100.000000,Length Units,Millimeters,...
    <blank>
    ,,Marker,Marker,Marker,...
    ,,rod:disk1,rod:disk1,rod:disk1,rod:disk2,...
    ,,1,1,1,2,...
    ,,Position,Position,Position,...
    Frame,Time (Seconds),X,Y,Z,X,Y,Z,...
    0,0.000000,12.31,480.02,-3.20,...

``vicon`` — Vicon Nexus "Export CSV" trajectories section: a line ``Trajectories``, the
frame rate (Hz) alone on the next line, the marker row ``,,Subject:disk1,,,Subject:disk2,,,``,
the column row ``Frame,Sub Frame,X,Y,Z,...`` and a units row ``,,mm,mm,mm,...``; no time
column (t = (frame - first frame) / rate); empty cells are gaps::

    Trajectories
    100
    ,,rod:disk1,,,rod:disk2,,,rod:disk3,,
    Frame,Sub Frame,X,Y,Z,X,Y,Z,X,Y,Z
    ,,mm,mm,mm,mm,mm,mm,mm,mm,mm
    1,0,12.3,4.5,480.0,...

``qualisys`` — Qualisys Track Manager TSV export (tab separated): header lines
``NO_OF_FRAMES``, ``FREQUENCY <Hz>``, ``MARKER_NAMES <name> <name> ...``, then optional
``Frame	Time	disk1 X	disk1 Y	disk1 Z ...`` and data rows. Units are mm. A gap is
written as ``0.000 0.000 0.000`` (or empty): exact zeros of all three coordinates are
invalid samples.

``plain`` — one header row: a time column (``time``, ``t``, ``timestamp``, ``Time
(Seconds)``; or none with ``rate``) and three columns per marker named ``<m>_x``,
``<m>.x``, ``<m> X`` or ``<m>:X``, or axis first, ``x<m>`` / ``x_<m>`` (``x1,y1,z1`` is marker
``1``), any case; ``,``, tab or ``;`` separated; ``unit`` required. A file holding several
trials one after another selects one with ``trial_column`` (the ID column's name) and
``trial_id`` (its value in that trial's rows); times then start at that trial's first row.

``c3d`` — a C3D file (binary, the biomechanics standard every system exports), read with the
maintained pure-Python ``c3d`` package: ``POINT:LABELS`` name the markers, ``POINT:RATE`` is
the rate, ``POINT:UNITS`` the unit (``mm`` usually); a sample with a negative residual is
invalid (the C3D convention for a gap). ``format: auto`` picks it for ``.c3d`` files.

Every recording becomes: time (s, starting where the file starts), positions in m,
``valid`` False where a coordinate is empty, NaN or a Qualisys zero gap; each invalid
sample is counted per marker (:attr:`MocapRecording.invalid`) — reported, not fatal.

Errors (:class:`MocapError`) are one line naming the file and the column or line:
a missing marker column, a non-numeric cell, non-monotonic or duplicate times, an
unknown unit, no time column and no rate.
"""

from __future__ import annotations

import csv
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.trajectory import Trajectory
from ..core.files import file_problem

__all__ = ["MocapError", "MocapRecording", "load_mocap", "FORMATS", "UNITS", "frame_transform", "write_motive_csv",
           "rate_from_times"]

#: supported column layouts (module docstring)
FORMATS = ("auto", "motive", "vicon", "qualisys", "plain", "c3d")

#: length unit name -> metres per unit (Motive spells them out)
UNITS: dict[str, float] = {"m": 1.0, "meters": 1.0, "metres": 1.0, "mm": 1e-3, "millimeters": 1e-3,
                           "millimetres": 1e-3, "cm": 1e-2, "centimeters": 1e-2, "centimetres": 1e-2}

#: largest marker coordinate, m (either sign, after the unit): a capture volume is metres across
MAX_COORDINATE_M = 1e4
#: a recording may fill at most this many command steps per sample (plus :data:`MAX_EXTRA_STEPS`): more is
#: a time jump (a typo, a second take appended, a time column not in seconds), not a gap in the capture
MAX_STEPS_PER_SAMPLE = 10
MAX_EXTRA_STEPS = 10_000

_TIME_NAMES = ("time", "t", "timestamp", "time (seconds)", "time_s", "time [s]", "sec", "seconds")


class MocapError(ValueError):
    """A motion-capture file cannot be read as asked; the message names the file and column/line."""


@dataclass(frozen=True)
class MocapRecording:
    """Marker positions of one motion-capture take, in the twin's world frame.

    Attributes:
        time: sample times, shape (T,) s, strictly increasing, starting at the file's first time.
        markers: K keypoint names (the names the rig config maps the markers to).
        points: positions, shape (T, K, 3) m, in ``frame``; NaN where invalid.
        valid: shape (T, K) bool.
        frame: coordinate frame name (``"world"`` once transformed into the twin's world).
        rate: nominal sample rate, Hz (from the header, the ``rate`` option or the time column:
            :func:`rate_from_times`).
        invalid: invalid samples per marker ``{name: count}`` (gaps, NaN rows).
        source: the file.
        format: the detected layout.
    """

    time: np.ndarray
    markers: tuple[str, ...]
    points: np.ndarray
    valid: np.ndarray
    frame: str
    rate: float
    invalid: dict[str, int] = field(default_factory=dict)
    source: str = ""
    format: str = "plain"

    def report(self) -> str:
        """One line: samples, rate and the invalid samples per marker."""
        T = int(self.time.size)
        bad = ", ".join(f"{m} {n}/{T}" for m, n in self.invalid.items() if n) or "none"
        return f"{self.source}: {T} samples at {self.rate:.6g} Hz, {len(self.markers)} markers; invalid samples: {bad}"

    def trajectory(self, trial_id: str, *, rate: float | None = None, start_s: float = 0.0,
                   stop_s: float | None = None) -> Trajectory:
        """The recording as a ``kind="points"`` trajectory, one row per command step.

        Samples are assigned to command steps ``k = round((t - start_s) * rate)``; a step
        without a sample is invalid (never interpolated), a step with two samples keeps
        the first.

        Args:
            trial_id: the excitation the recording belongs to.
            rate: the command rate, Hz (default: the recording's rate).
            start_s: recording time of command step 0, s (the trial's time offset).
            stop_s: last recording time used (default: the end).

        Raises:
            MocapError: if no sample falls in ``[start_s, stop_s]``, or the samples would fill more
                than :data:`MAX_STEPS_PER_SAMPLE` steps each (plus :data:`MAX_EXTRA_STEPS`) at ``rate``.
        """
        rate = float(rate or self.rate)
        t = self.time
        keep = (t >= start_s - 0.5 / rate) & (t <= (math.inf if stop_s is None else stop_s + 0.5 / rate))
        if not keep.any():
            raise MocapError(f"{self.source}: no sample between {start_s} s and {stop_s} s")
        _check_span(t[keep], rate, self.source)
        k = np.rint((t[keep] - start_s) * rate).astype(int)
        T = int(k.max()) + 1
        pts = np.full((T, len(self.markers), 3), np.nan)
        valid = np.zeros((T, len(self.markers)), bool)
        rows = np.nonzero(keep)[0]
        first = np.unique(k, return_index=True)[1]
        pts[k[first]] = self.points[rows[first]]
        valid[k[first]] = self.valid[rows[first]]
        meta = {"source": self.source, "format": self.format, "invalid_samples": dict(self.invalid),
                "missing_steps": int(T - first.size)}
        return Trajectory(np.arange(T) / rate, pts, valid, self.markers, "real", trial_id, np.arange(T), meta,
                          kind="points", unit="m", frame=self.frame)


def frame_transform(spec: Mapping[str, Any] | None, *, source: str = "frame") -> tuple[str, np.ndarray, np.ndarray]:
    """Pose of the capture volume in the twin's world: ``(name, R (3, 3), p (3,) m)``.

    ``spec`` keys (all optional): ``name`` (default ``"world"``), ``up_axis`` (``z`` default,
    ``y`` for Motive's Y-up world: (x, y, z)_mocap -> (z, x, y)_world, i.e. REP 103 with the
    capture's z towards the viewer as world x), ``position`` [x, y, z] m of the capture
    origin in the world, ``rpy`` [roll, pitch, yaw] rad (applied after the up-axis change).
    A world point is ``R @ p_mocap + position``.

    Raises:
        MocapError: unknown key or malformed value (names ``source``).
    """
    spec = dict(spec or {})
    unknown = sorted(set(spec) - {"name", "up_axis", "position", "rpy"})
    if unknown:
        raise MocapError(f"{source}: unknown key(s) {unknown}; expected name, up_axis, position, rpy")
    up = str(spec.get("up_axis", "z")).lower()
    if up == "z":
        R = np.eye(3)
    elif up == "y":
        R = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    else:
        raise MocapError(f"{source}.up_axis: expected 'z' or 'y', got {spec.get('up_axis')!r}")

    def vec(key: str) -> np.ndarray:
        v = spec.get(key, [0.0, 0.0, 0.0])
        try:
            a = np.asarray(v, dtype=float)
        except (TypeError, ValueError):
            a = np.zeros(0)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise MocapError(f"{source}.{key}: expected 3 numbers, got {v!r}")
        return a

    r, p, y = vec("rpy")
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1.0]])
    Ry = np.array([[cp, 0, sp], [0, 1.0, 0], [-sp, 0, cp]])
    Rx = np.array([[1.0, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return str(spec.get("name", "world")), Rz @ Ry @ Rx @ R, vec("position")


# -- parsing --------------------------------------------------------------------------
#: header rows parsed with ``csv`` (the data rows below them are read column-wise: :func:`_numbers`)
_HEAD_LINES = 200


def _lines(path: Path) -> tuple[list[str], str]:
    """The file's lines and its delimiter (tab, ``,`` or a spreadsheet locale's ``;``)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise MocapError(f"{path}: not a text (CSV/TSV) file ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise MocapError(f"{path}: cannot read: {err.strerror or err}") from None
    lines = text.splitlines()
    del text
    sample = "\n".join(lines[:40])
    delim = "\t" if sample.count("\t") > sample.count(",") else ","
    first = next((ln for ln in lines if ln.strip()), "")
    if ";" in first and "," not in first and "\t" not in first:
        delim = ";"  # a spreadsheet export in a locale whose list separator is ';'
    return lines, delim


def _split(lines: Sequence[str], delim: str) -> list[list[str]]:
    """``lines`` as rows of stripped cells (``csv`` quoting rules)."""
    return [[c.strip() for c in row] for row in csv.reader(lines, delimiter=delim)]


def _detect(rows: list[list[str]]) -> str:
    first = rows[0][0].lower() if rows and rows[0] else ""
    if first == "format version":
        return "motive"
    if first == "trajectories":
        return "vicon"
    if first.startswith("no_of_frames") or any(r and r[0].upper() == "MARKER_NAMES" for r in rows[:20]):
        return "qualisys"
    return "plain"


def _unit_factor(unit: Any, path: Path, where: str) -> float:
    key = str(unit).strip().lower()
    if key not in UNITS:
        close = difflib.get_close_matches(key, UNITS, n=1)
        raise MocapError(f"{path}: {where}: unknown length unit {unit!r}; expected one of mm, cm, m"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    return UNITS[key]


def _number(cell: str, path: Path, line: int, column: str) -> float:
    if cell == "" or cell.lower() in ("nan", "-nan", "na", "null"):
        return math.nan
    try:
        return float(cell)
    except ValueError:
        hint = " (a decimal comma? export numbers with a decimal point)" if re.fullmatch(r"-?\d+,\d+", cell) else ""
        raise MocapError(f"{path}:{line}: column {column!r}: expected a number, got {cell!r}{hint}") from None


@dataclass
class _Table:
    columns: dict[str, tuple[int, int, int]]   # marker label -> (ix, iy, iz)
    time_col: int | None
    rate: float | None
    unit: float | None
    start: int                                 # 0-based line index of the first data row
    zero_is_gap: bool = False
    frame_col: int | None = None
    stop_at_blank: bool = False                # the data end at the first blank line (Vicon sections)


def _motive(rows: list[list[str]], path: Path) -> _Table:
    meta = {rows[0][i].lower(): rows[0][i + 1] for i in range(0, len(rows[0]) - 1, 2)}
    hdr = next((i for i, r in enumerate(rows) if len(r) > 1 and r[0].lower() == "frame"
                and r[1].lower().startswith("time")), None)
    if hdr is None:
        raise MocapError(f"{path}: Motive CSV without the 'Frame,Time (Seconds),X,Y,Z' column row")
    head = rows[1:hdr]
    labelled = {r[1].lower(): r for r in head if len(r) > 1 and r[0] == "" and r[1].lower() in ("type", "name", "id")}
    nonblank = [r for r in head if any(r)]
    types = labelled.get("type") or (nonblank[0] if len(nonblank) >= 4 else None)
    names = labelled.get("name") or (nonblank[1] if len(nonblank) >= 4 else None)
    kinds = next((r for r in nonblank if any(c.lower() == "position" for c in r)), None)
    if names is None or kinds is None:
        raise MocapError(f"{path}: Motive CSV header without the marker 'Name' row and the 'Position' row")
    cols: dict[str, list[int]] = {}
    axes = rows[hdr]
    for i in range(2, len(axes)):
        if i >= len(names) or i >= len(kinds) or kinds[i].lower() != "position":
            continue
        if types is not None and i < len(types) and types[i] and "marker" not in types[i].lower():
            continue  # rigid-body pivot positions are not markers
        label = names[i].split(":")[-1]
        cols.setdefault(label, []).append(i)
    columns = {m: tuple(ix[:3]) for m, ix in cols.items() if len(ix) >= 3}
    rate = meta.get("export frame rate") or meta.get("capture frame rate")
    unit = meta.get("length units")
    return _Table(columns, 1, float(rate) if rate else None,
                  _unit_factor(unit, path, "header 'Length Units'") if unit else None, hdr + 1, frame_col=0)


def _vicon(rows: list[list[str]], path: Path) -> _Table:
    try:
        rate = float(rows[1][0])
    except (IndexError, ValueError):
        raise MocapError(f"{path}:2: Vicon CSV: expected the frame rate (Hz) under 'Trajectories'") from None
    if len(rows) < 5:
        raise MocapError(f"{path}: Vicon CSV: expected the marker, column and unit rows after the rate")
    names, axes, units = rows[2], rows[3], rows[4]
    columns = {}
    for i, n in enumerate(names):
        if n and i + 2 < len(axes):
            columns[n.split(":")[-1]] = (i, i + 1, i + 2)
    unit_cells = {u for u in units[2:] if u}
    if len(unit_cells) > 1:
        raise MocapError(f"{path}:5: Vicon CSV: mixed units {sorted(unit_cells)} in the units row")
    unit = _unit_factor(unit_cells.pop(), path, "units row (line 5)") if unit_cells else None
    return _Table(columns, None, rate, unit, 5, frame_col=0, stop_at_blank=True)  # the section ends at a blank line


def _qualisys(rows: list[list[str]], path: Path) -> _Table:
    head: dict[str, list[str]] = {}
    start = 0
    for i, r in enumerate(rows):
        if r and re.fullmatch(r"[A-Z_0-9]+", r[0]) and not r[0].isdigit():
            head[r[0]] = r[1:]
            start = i + 1
        else:
            break
    names = [n for n in head.get("MARKER_NAMES", []) if n]
    if not names:
        raise MocapError(f"{path}: Qualisys TSV without a MARKER_NAMES line")
    try:
        rate = float(head["FREQUENCY"][0])
    except (KeyError, IndexError, ValueError):
        raise MocapError(f"{path}: Qualisys TSV without a numeric FREQUENCY line") from None
    time_col = None
    off = 0
    if start < len(rows) and rows[start] and rows[start][0].lower() == "frame":
        cols = [c.lower() for c in rows[start]]
        time_col = cols.index("time") if "time" in cols else None
        off = 2 if time_col is not None else 1
        start += 1
    columns = {n: (off + 3 * j, off + 3 * j + 1, off + 3 * j + 2) for j, n in enumerate(names)}
    return _Table(columns, time_col, rate, 1e-3, start, zero_is_gap=True, frame_col=0 if off else None)


def _plain(rows: list[list[str]], path: Path, time_column: str | None) -> _Table:
    header = rows[0]
    low = [h.lower() for h in header]
    if time_column is not None:
        if time_column.lower() not in low:
            raise MocapError(f"{path}: time column {time_column!r} not found; columns: {', '.join(header)}")
        time_col = low.index(time_column.lower())
    else:
        time_col = next((low.index(n) for n in _TIME_NAMES if n in low), None)
    cols: dict[str, dict[str, int]] = {}
    for i, h in enumerate(header):
        # marker first (disk1_x, disk1.X, disk1 X, rod:disk1:X), else axis first (x1, X_1, x_tip)
        m = (re.fullmatch(r"(?P<m>.+?)[\s_.:]+(?P<a>[xyzXYZ])", h)
             or re.fullmatch(r"(?P<a>[xyzXYZ])[\s_.:]*(?P<m>[^\s_.:].*)", h))
        if m:
            cols.setdefault(m.group("m").split(":")[-1], {})[m.group("a").lower()] = i
    columns = {m: (c["x"], c["y"], c["z"]) for m, c in cols.items() if set(c) == {"x", "y", "z"}}
    return _Table(columns, time_col, None, None, 1)


def _data_lines(lines: Sequence[str], table: _Table, delim: str) -> list[int]:
    """0-based indices of the data rows: lines from ``table.start`` holding a cell (blank ones skipped;
    with ``stop_at_blank`` the data end at the first blank line)."""
    blank = delim + " \t"
    stop = len(lines)
    if table.stop_at_blank:
        stop = next((i for i in range(table.start, len(lines)) if not lines[i].strip(blank)), stop)
    return [i for i in range(table.start, stop) if lines[i].strip(blank)]


def _numbers(lines: Sequence[str], data: Sequence[int], delim: str, table: _Table,
             cols: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(times (T,), points (T, K, 3))`` in file units, read column-wise with numpy; None when the rows are
    not a plain numeric table (quotes, a short row, a cell that is not a number, a missing time), which
    :func:`_numbers_by_cell` then reads cell by cell to name the line and column.

    The data rows are joined into one text, empty cells written as ``nan`` and parsed by ``np.loadtxt``
    (its C reader, from bytes, only the columns used): no list of cells per row and no ``float()`` call per
    cell (``bench/bench_mocap_parse.py``, 1M rows x 11 columns, back to back on the loaded 2-core bench
    machine: 66 s and +1.18 GB before, 19 s and +0.43 GB after).
    """
    import io

    if not data:
        return None
    d = delim
    n = lines[data[0]].count(d) + 1
    block = "\n".join([lines[i] for i in data])
    if '"' in block:
        return None
    block = f"\n{block}\n"
    for _ in range(2):  # ",,," needs two passes (the replacements overlap); each scan is cheap, a copy is not
        if d + d in block:
            block = block.replace(d + d, f"{d}nan{d}")
    for empty, cell in (("\n" + d, f"\nnan{d}"), (d + "\n", f"{d}nan\n")):  # first / last cell of a row
        if empty in block:
            block = block.replace(empty, cell)
    extra = [c for c in (table.time_col, table.frame_col) if c is not None]
    used = sorted({c for c in [*extra, *cols] if c < n})
    raw = io.BytesIO(block.encode("utf-8"))  # bytes: a StringIO would hold 4 bytes per character
    del block
    try:
        M = np.loadtxt(raw, delimiter=d, dtype=float, usecols=used, ndmin=2, comments=None, encoding="utf-8")
    except ValueError:  # a cell that is not a number, a short row
        return None
    del raw
    if M.shape[0] != len(data):
        return None
    where = {c: j for j, c in enumerate(used)}
    nan = np.full(len(data), np.nan)

    def col(c: int | None) -> np.ndarray:
        return M[:, where[c]] if c in where else nan

    if table.time_col is not None:
        times = col(table.time_col).copy()
        if not np.all(np.isfinite(times)):
            return None  # the cell-by-cell reader names the line
    elif table.frame_col is not None:
        times = col(table.frame_col).copy()
    else:
        times = np.arange(len(data), dtype=float)
    pts = np.stack([col(c) for c in cols], axis=1).reshape(len(data), len(cols) // 3, 3)
    return times, pts


def _numbers_by_cell(lines: Sequence[str], data: Sequence[int], delim: str, table: _Table,
                     mapping: Mapping[str, str], path: Path) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`_numbers` returns, one ``float()`` per cell (``csv`` quoting), naming the bad cell.

    Raises:
        MocapError: a cell that is not a number (file:line and column), a missing, NaN or infinite time.
    """
    K = len(mapping)
    T = len(data)
    times = np.empty(T)
    pts = np.full((T, K, 3), np.nan)
    for r_i, (i, row) in enumerate(zip(data, csv.reader((lines[i] for i in data), delimiter=delim))):
        line = i + 1
        row = [c.strip() for c in row]
        if table.time_col is not None:
            cell = row[table.time_col] if table.time_col < len(row) else ""
            times[r_i] = _number(cell, path, line, "time")
            if not math.isfinite(times[r_i]):
                raise MocapError(f"{path}:{line}: time column: expected a finite time in s, got {cell!r}"
                                 + ("" if cell else " (empty)"))
        elif table.frame_col is not None:
            fc = table.frame_col
            times[r_i] = _number(row[fc] if fc < len(row) else "", path, line, "Frame")
        else:
            times[r_i] = r_i
        for k, label in enumerate(mapping.values()):
            for a, c in enumerate(table.columns[label]):
                pts[r_i, k, a] = _number(row[c] if c < len(row) else "", path, line, f"{label} {'XYZ'[a]}")
    return times, pts


def load_mocap(path: str | Path, *, markers: Mapping[str, str] | Sequence[str], format: str = "auto",
               unit: str | None = None, rate: float | None = None, time_column: str | None = None,
               frame: Mapping[str, Any] | None = None, trial_column: str | None = None,
               trial_id: str | int | None = None) -> MocapRecording:
    """Read a motion-capture export (module docstring) into world-frame metres.

    Args:
        path: the CSV/TSV file.
        markers: keypoint name -> marker label in the file (or a list of labels used as
            both); the subject prefix (``rod:``) of Motive/Vicon labels is ignored.
        format: one of :data:`FORMATS`.
        unit: length unit of the file (``mm``, ``cm``, ``m``); required for ``plain``
            files, checked against the header of the others when given.
        rate: sample rate, Hz; required when the file has no time column (Vicon uses
            its header rate). Times from a time column win.
        time_column: name of the time column of a plain file (default: ``time``, ``t``...).
        frame: pose of the capture volume in the twin's world (:func:`frame_transform`).
        trial_column: name of a plain file's trial ID column; with ``trial_id``, only the rows
            whose cell in it equals ``trial_id`` (compared as text) are read.
        trial_id: the trial's ID in ``trial_column``.

    Returns:
        The :class:`MocapRecording` (positions transformed into ``frame``'s name, m).

    Raises:
        MocapError: one line naming the file and the column or line (missing marker
            column, non-numeric cell, non-monotonic or duplicate time, a time jump filling
            more than :data:`MAX_STEPS_PER_SAMPLE` steps per sample, a coordinate beyond
            ±:data:`MAX_COORDINATE_M` m, unknown unit, no time and no rate, unknown format, empty file).
    """
    path = Path(path)
    if format not in FORMATS:
        raise MocapError(f"{path}: unknown mocap format {format!r}; expected one of {', '.join(FORMATS)}")
    why = file_problem(path)
    if why:  # missing, or a FIFO / directory / device (never opened)
        raise MocapError(f"{path}: motion-capture file not found" if why.startswith("file not found")
                         else f"motion-capture file {why}")
    if format == "c3d" or (format == "auto" and path.suffix.lower() == ".c3d"):
        return _load_c3d(path, markers, unit=unit, frame=frame)
    lines, delim = _lines(path)
    rows = _split(lines[:_HEAD_LINES], delim)  # the header; data rows are read column-wise below
    if not rows or not any(any(r) for r in rows):
        raise MocapError(f"{path}: empty file")
    fmt = _detect(rows) if format == "auto" else format
    table = {"motive": lambda: _motive(rows, path), "vicon": lambda: _vicon(rows, path),
             "qualisys": lambda: _qualisys(rows, path), "plain": lambda: _plain(rows, path, time_column)}[fmt]()
    mapping = dict(markers) if isinstance(markers, Mapping) else {str(m): str(m) for m in markers}
    if not mapping:
        raise MocapError(f"{path}: no markers asked for; give markers: {{keypoint: label}}")
    _check_marker_columns(mapping, table, fmt, path)
    factor = _length_factor(table.unit, unit, path, says=None if table.unit is None else
                            f"the file's header says {1 / table.unit:g} units per m",
                            missing="the file does not say its length unit")
    if rate is not None and not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise MocapError(f"{path}: rate must be a number > 0 Hz, got {rate!r}")
    rate_hz = table.rate or rate
    if table.time_col is None and rate_hz is None:
        raise MocapError(f"{path}: no time column (time, t, 'Time (Seconds)') and no rate; give rate: <Hz>")
    data = _data_lines(lines, table, delim)  # 0-based line indices of the data rows
    if not data:
        raise MocapError(f"{path}: no data rows")
    if trial_column is not None or trial_id is not None:
        data = _trial_rows(lines, data, delim, rows[0] if fmt == "plain" else None, trial_column, trial_id, path)
    cols = [c for label in mapping.values() for c in table.columns[label]]
    parsed = _numbers(lines, data, delim, table, cols)
    if parsed is None:  # something a plain numeric table does not have: read cell by cell, naming the bad one
        parsed = _numbers_by_cell(lines, data, delim, table, mapping, path)
    del lines
    times, pts = parsed
    line_of = np.asarray(data) + 1  # 1-based line numbers, for messages
    if table.time_col is None:
        if not np.all(np.isfinite(times)):
            raise MocapError(f"{path}: Frame column holds a non-number")
        times = (times - times[0]) / float(rate_hz)
    _check_increasing(times, line_of, path)
    dt = np.diff(times)
    if trial_column is not None:
        times = times - times[0]  # one take of several: its time starts at its first row
    if table.zero_is_gap:
        pts[np.all(pts == 0.0, axis=2)] = np.nan
    if rate_hz is None:
        rate_hz = rate_from_times(times) if dt.size else 1.0
    if not (math.isfinite(rate_hz) and rate_hz > 0):
        raise MocapError(f"{path}: time column: the times give no sample rate (median step {float(np.median(dt)):.6g}"
                         " s); times must be seconds")
    _check_span(times, float(rate_hz), path, line_of)
    return _recording(times, mapping, pts, factor, frame, float(rate_hz), path, fmt, line_of)


def _check_marker_columns(mapping: Mapping[str, str], table: Any, fmt: str, path: Path) -> None:
    """MocapError naming the first asked marker label the file has no columns for (and the closest it has)."""
    for kp, label in mapping.items():
        if label not in table.columns:
            have = ", ".join(table.columns) or "none"
            close = difflib.get_close_matches(label, list(table.columns), n=1)
            naming = (" (a plain file names each marker's three columns <m>_x, <m>_y, <m>_z, or <m>.x, '<m> X', "
                      "<m>:X, or axis first x<m>, x_<m>)" if fmt == "plain" and not table.columns else "")
            raise MocapError(f"{path}: marker column {label!r} (keypoint {kp!r}) not found; markers in the file: {have}"
                             + (f" (did you mean {close[0]!r}?)" if close else "") + naming)


def _check_increasing(times: np.ndarray, line_of: np.ndarray, path: Path) -> None:
    """MocapError at the first line whose time (s) does not increase (with a hint when times are rounded)."""
    dt = np.diff(times)
    bad = np.nonzero(dt <= 0)[0]
    if bad.size:
        i = int(bad[0]) + 1
        line = int(line_of[i])
        what = "duplicate" if dt[bad[0]] == 0 else "non-monotonic"
        q = _time_resolution(times)
        span = float(times[-1] - times[0]) / max(times.size - 1, 1)
        hint = (f"; the times are written to {q:g} s, about the sample period ({span:.3g} s) or coarser: export "
                "them with more decimals, or drop the time column and give the trial's `rate`"
                if what == "duplicate" and q is not None and q >= 0.5 * span else "")
        raise MocapError(f"{path}:{line}: time column: {what} time {times[i]:.6g} s after {times[i - 1]:.6g} s "
                         f"(times must increase){hint}")


def _trial_rows(lines: Sequence[str], data: Sequence[int], delim: str, header: Sequence[str] | None,
               column: str | None, wanted: str | int | None, path: Path) -> list[int]:
    """The data lines (0-based indices) of one trial: those whose ``column`` cell equals ``wanted``.

    Raises:
        MocapError: the file is not a plain table (``header`` None), ``column`` or ``wanted``
            missing, no such column (the columns listed), or no row with that ID (the IDs listed).
    """
    if header is None:
        raise MocapError(f"{path}: trial_column/trial_id select rows of a plain CSV/TSV only (this file is not one)")
    if column is None or wanted is None or str(wanted).strip() == "":
        raise MocapError(f"{path}: give both trial_column (the ID column's name) and trial_id (its value), "
                         f"got trial_column={column!r}, trial_id={wanted!r}")
    low = [h.lower() for h in header]
    if str(column).lower() not in low:
        raise MocapError(f"{path}: trial_column {column!r} not found; columns: {', '.join(header)}")
    col = low.index(str(column).lower())
    want = str(wanted).strip()
    cells = [next(csv.reader([lines[i]], delimiter=delim), [])[col:col + 1] for i in data]
    ids = [c[0].strip() if c else "" for c in cells]
    chosen = [i for i, v in zip(data, ids) if v == want]
    if not chosen:
        seen = list(dict.fromkeys(ids))
        shown = ", ".join(repr(v) for v in seen[:10]) + (" ..." if len(seen) > 10 else "")
        raise MocapError(f"{path}: no row with {column} = {want!r}; IDs in the file: {shown}")
    return chosen


def _time_resolution(times: np.ndarray) -> float | None:
    """The decimal resolution the times were written with (1 s ... 1 µs): the coarsest 10^-d s of
    which every time is a whole multiple, or None (finer, or not decimal-rounded)."""
    for d in range(7):
        q = 10.0 ** -d
        if np.all(np.abs(times / q - np.rint(times / q)) < 1e-6):
            return q
    return None


def rate_from_times(times: np.ndarray) -> float:
    """Sample rate (Hz) of a strictly increasing time column of a constant-rate capture.

    The period is the mean of the regular steps (those within 0.5-1.5x the median step; a
    dropped sample's double step is left out), not the median step: times rounded to the
    millisecond at 120 Hz step by 8 and 9 ms, whose median (8 ms) reads 125 Hz. When every time
    lies within the column's resolution (:func:`_time_resolution`, both ends rounded) of a
    whole-number rate's grid, that rate is returned (120 Hz, not 119.992 Hz).

    Args:
        times: shape (T,) s, T >= 2, strictly increasing.

    Returns:
        The rate, Hz (inf when the steps are not finite: the caller refuses it).
    """
    t = np.asarray(times, float)
    dt = np.diff(t)
    med = float(np.median(dt))
    regular = dt[(dt > 0.5 * med) & (dt < 1.5 * med)]
    period = float(np.mean(regular)) if regular.size else med
    if not (math.isfinite(period) and period > 0):
        return math.inf
    rate = 1.0 / period
    q = _time_resolution(t)
    whole = float(round(rate))
    if q is not None and whole > 0:
        k = np.rint((t - t[0]) * whole)
        if np.all(np.diff(k) >= 1) and np.max(np.abs(t - t[0] - k / whole)) <= q * (1 + 1e-6):
            return whole
    return rate


def _check_span(times: np.ndarray, rate: float, path: Path | str, line_of: np.ndarray | None = None) -> None:
    """Refuse times that would fill far more command steps than there are samples (at ``rate`` Hz).

    Raises:
        MocapError: naming the line after the largest time step (was: a 1e9 s time typo asked
            :meth:`MocapRecording.trajectory` for a 2 TiB array; times near 1e308 s a negative one).
    """
    n = int(times.size)
    with np.errstate(over="ignore", invalid="ignore"):
        steps = (float(times[-1]) - float(times[0])) * rate if n else 0.0
    if n and not (math.isfinite(steps) and steps <= MAX_STEPS_PER_SAMPLE * n + MAX_EXTRA_STEPS):
        dt = np.diff(times)
        i = int(np.argmax(dt)) + 1 if dt.size else 0
        where = f"{path}:{int(line_of[i])}" if line_of is not None else str(path)
        raise MocapError(f"{where}: time column: {n} samples span {float(times[-1]) - float(times[0]):.6g} s "
                         f"({steps:.3g} steps at {rate:.6g} Hz; the largest step, {float(dt[i - 1]) if dt.size else 0:.6g}"
                         " s, ends here): a time jump or a time column not in seconds")


def _length_factor(file_factor: float | None, unit: str | None, path: Path, *, says: str | None,
                   missing: str) -> float:
    """Metres per file unit: the file's own (``file_factor``) or the ``unit`` option, which must agree.

    Raises:
        MocapError: ``unit`` unknown or contradicting the file (``says`` what the file says), or neither
            given (``missing`` says what the file lacks).
    """
    factor = file_factor
    if unit is not None:
        given = _unit_factor(unit, path, "unit")
        if factor is not None and not math.isclose(given, factor):
            raise MocapError(f"{path}: unit {unit!r} given but {says}")
        factor = given
    if factor is None:
        raise MocapError(f"{path}: {missing}; give unit: mm, cm or m")
    return factor


def _recording(times: np.ndarray, mapping: Mapping[str, str], pts: np.ndarray, factor: float,
               frame: Mapping[str, Any] | None, rate: float, path: Path, fmt: str,
               line_of: np.ndarray | None = None) -> MocapRecording:
    """The :class:`MocapRecording` of file-unit points (T, K, 3), NaN = gap: scaled to m, moved into ``frame``.

    Raises:
        MocapError: a coordinate beyond ±:data:`MAX_COORDINATE_M` m (names the line when
            ``line_of``, the 1-based line of each sample, is given; was: a 1e308 cell kept as a
            valid position and an overflow warning).
    """
    valid = np.all(np.isfinite(pts), axis=2)
    with np.errstate(over="ignore", invalid="ignore"):
        metres = pts * factor
        big = valid[..., None] & ~(np.abs(metres) <= MAX_COORDINATE_M)
    if big.any():
        r, k, a = (int(v[0]) for v in np.nonzero(big))
        where = f"{path}:{int(line_of[r])}" if line_of is not None else f"{path}: sample {r}"
        raise MocapError(f"{where}: marker {list(mapping.values())[k]!r} {'XYZ'[a]}: {pts[r, k, a]:.6g} file units "
                         f"= {metres[r, k, a]:.3g} m, beyond ±{MAX_COORDINATE_M:g} m (a unit or export error?)")
    name, R, p = frame_transform(frame, source=f"{path} frame")
    world = metres @ R.T + p
    world[~valid] = np.nan
    invalid = {kp: int((~valid[:, k]).sum()) for k, kp in enumerate(mapping)}
    return MocapRecording(times, tuple(mapping), world, valid, name, rate, invalid, str(path), fmt)


def _load_c3d(path: Path, markers: Mapping[str, str] | Sequence[str], *, unit: str | None,
              frame: Mapping[str, Any] | None) -> MocapRecording:
    """A C3D file (module docstring) through the ``c3d`` package."""
    import warnings

    try:
        import c3d
    except ImportError:
        raise MocapError(f"{path}: reading C3D needs the 'c3d' package (pip install c3d==0.6.0)") from None
    mapping = dict(markers) if isinstance(markers, Mapping) else {str(m): str(m) for m in markers}
    if not mapping:
        raise MocapError(f"{path}: no markers asked for; give markers: {{keypoint: label}}")
    try:
        with path.open("rb") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no analog data" and similar notes of the reader
            r = c3d.Reader(fh)
            labels = [str(x).strip().split(":")[-1] for x in r.point_labels]
            rate = float(r.point_rate)
            units = r.get("POINT:UNITS")
            file_unit = units.string_value.strip() if units is not None else ""
            frames = [(int(i), np.array(p[:, :4], float)) for i, p, _ in r.read_frames()]
    except MocapError:
        raise
    except Exception as err:  # noqa: BLE001 - a corrupt or foreign binary file
        raise MocapError(f"{path}: not a readable C3D file ({type(err).__name__}: {err})") from None
    for kp, label in mapping.items():
        if label not in labels:
            close = difflib.get_close_matches(label, labels, n=1)
            raise MocapError(f"{path}: marker {label!r} (keypoint {kp!r}) not in POINT:LABELS; markers in the file: "
                             f"{', '.join(labels) or 'none'}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    factor = _length_factor(_unit_factor(file_unit, path, "POINT:UNITS") if file_unit else None, unit, path,
                            says=f"POINT:UNITS says {file_unit!r}", missing="POINT:UNITS is empty")
    if not (rate > 0 and math.isfinite(rate)):
        raise MocapError(f"{path}: POINT:RATE is {rate!r}; expected a rate > 0 Hz")
    if not frames:
        raise MocapError(f"{path}: no frames")
    idx = [labels.index(m) for m in mapping.values()]
    first = frames[0][0]
    times = np.array([(i - first) / rate for i, _ in frames])
    data = np.stack([p[idx] for _, p in frames])  # (T, K, 4): x, y, z, residual
    pts = data[..., :3].copy()
    pts[data[..., 3] < 0] = np.nan
    return _recording(times, mapping, pts, factor, frame, rate, path, "c3d")


def write_motive_csv(path: str | Path, time: np.ndarray, points_m: np.ndarray, markers: Sequence[str], *,
                     take: str = "take", unit: str = "mm", y_up: bool = True) -> Path:
    """Write positions as an OptiTrack Motive 1.23 CSV export (the layout :func:`load_mocap` reads).

    Args:
        path: file to write (parents created).
        time: (T,) s.
        points_m: (T, K, 3) m in the twin's Z-up world; NaN = gap (empty cells).
        markers: K labels (written as ``take:label``).
        take: take name.
        unit: ``mm`` or ``m`` (``Length Units`` header).
        y_up: write Motive's Y-up coordinates (the inverse of ``frame: {up_axis: y}``).

    Returns:
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.asarray(time, float)
    P = np.asarray(points_m, float)
    if y_up:
        P = P[..., [1, 2, 0]]  # world (x, y, z) -> mocap (y, z, x): inverse of up_axis y
    scale = {"mm": 1000.0, "m": 1.0}[unit]
    rate = 1.0 / float(np.median(np.diff(t))) if t.size > 1 else 100.0
    units = {"mm": "Millimeters", "m": "Meters"}[unit]
    K = len(markers)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Format Version", "1.23", "Take Name", take, "Capture Frame Rate", f"{rate:.6f}",
                    "Export Frame Rate", f"{rate:.6f}", "Total Exported Frames", str(t.size),
                    "Rotation Type", "Quaternion", "Length Units", units, "Coordinate Space", "Global"])
        w.writerow([])
        w.writerow(["", "Type"] + ["Marker"] * (3 * K))
        w.writerow(["", "Name"] + [f"{take}:{m}" for m in markers for _ in range(3)])
        w.writerow(["", "ID"] + [f"1:{k + 1}" for k in range(K) for _ in range(3)])
        w.writerow(["", ""] + ["Position"] * (3 * K))
        w.writerow(["Frame", "Time (Seconds)"] + ["X", "Y", "Z"] * K)
        for i in range(t.size):
            cells = ["" if not np.isfinite(v) else f"{v * scale:.6f}" for v in P[i].ravel()]
            w.writerow([str(i), f"{t[i]:.6f}"] + cells)
    return path
