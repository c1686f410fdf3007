"""Joint-state CSV files: time + one column per joint (+ optional command columns -> excitation).

What a lab gets from ``ros2 topic echo --csv /joint_states`` post-processed, a robot
controller's log, or a spreadsheet: one header row, a time column (``time``, ``t``,
``stamp``; or none and a ``rate``) and one column per joint position, in rad (revolute)
or m (prismatic). Optional command columns (what the controller was told) become the
trial's :class:`~vid2sid_ros.core.excitation.Excitation`, resampled to the command rate
by zero-order hold — the excitation that drives the twin::

    time,shoulder,elbow,cmd_shoulder,cmd_elbow
    0.00,0.000,0.100,0.0,0.0
    0.01,0.002,0.101,0.5,0.0
    ...

Config block (``trials[].source.joint_csv`` of a rig config)::

    joint_csv:
      path: trial1.csv
      joints: {shoulder: shoulder_joint, elbow: elbow_joint}   # column -> model joint (or a list)
      units: {elbow: rad}            # per joint, default rad; "m" for prismatic joints
      commands: {cmd_shoulder: shoulder_motor}                 # column -> actuator (optional)
      time_column: time              # default: time / t / stamp / timestamp
      rate: 100                      # Hz; needed without a time column, else the command rate

Empty or NaN cells are invalid samples (counted per joint, not fatal). Errors are one
line naming the file and column/line: a missing joint or command column, a non-number,
non-monotonic or duplicate time, a unit that is not rad or m.
"""

from __future__ import annotations

import csv
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.files import file_problem
from ..core.trajectory import Trajectory

__all__ = ["JointCsvError", "JointRecording", "load_joint_csv"]

_TIME_NAMES = ("time", "t", "stamp", "timestamp", "time_s", "time (seconds)")


class JointCsvError(ValueError):
    """A joint-state CSV cannot be read as asked; the message names the file and column/line."""


@dataclass(frozen=True)
class JointRecording:
    """Joint coordinates (and commands) of one trial.

    Attributes:
        time: (T,) s, strictly increasing, from the file's first time.
        joints: J model joint names.
        positions: (T, J), rad or m per ``units``; NaN where invalid.
        units: J units (``"rad"`` / ``"m"``).
        commands: (T, A) command values (actuator units) or None; NaN rows held.
        actuators: A actuator names.
        rate: nominal sample rate, Hz.
        invalid: invalid samples per joint.
        source: the file.
    """

    time: np.ndarray
    joints: tuple[str, ...]
    positions: np.ndarray
    units: tuple[str, ...]
    commands: np.ndarray | None
    actuators: tuple[str, ...]
    rate: float
    invalid: dict[str, int] = field(default_factory=dict)
    source: str = ""

    def report(self) -> str:
        """One line: samples, rate and invalid samples per joint."""
        T = int(self.time.size)
        bad = ", ".join(f"{j} {n}/{T}" for j, n in self.invalid.items() if n) or "none"
        return f"{self.source}: {T} samples at {self.rate:.6g} Hz, {len(self.joints)} joints; invalid samples: {bad}"

    def _steps(self, rate: float) -> tuple[np.ndarray, np.ndarray, int]:
        k = np.rint((self.time - self.time[0]) * rate).astype(int)
        first = np.unique(k, return_index=True)[1]
        return k, first, int(k.max()) + 1

    def trajectory(self, trial_id: str, *, rate: float | None = None) -> Trajectory:
        """A ``kind="joints"`` trajectory, one row per command step (missing steps invalid)."""
        rate = float(rate or self.rate)
        k, first, T = self._steps(rate)
        q = np.full((T, len(self.joints)), np.nan)
        q[k[first]] = self.positions[first]
        return Trajectory(np.arange(T) / rate, q[:, :, None], np.isfinite(q), self.joints, "real", trial_id,
                          np.arange(T), {"source": self.source, "invalid_samples": dict(self.invalid)},
                          kind="joints", unit=self.units)

    def excitation(self, trial_id: str, *, rate: float | None = None) -> Excitation | None:
        """The command columns as an excitation at ``rate`` (zero-order hold over gaps), or None."""
        if self.commands is None:
            return None
        rate = float(rate or self.rate)
        k, first, T = self._steps(rate)
        u = np.full((T, len(self.actuators)), np.nan)
        u[k[first]] = self.commands[first]
        for i in range(T):  # hold the last command over steps without a row or with NaN cells
            bad = ~np.isfinite(u[i])
            if bad.any():
                u[i, bad] = u[i - 1, bad] if i > 0 else 0.0
        return Excitation(trial_id, rate, u, self.actuators, meta={"source": self.source, "kind": "joint_csv"})


def _num(cell: str, path: Path, line: int, col: str) -> float:
    if cell == "" or cell.lower() in ("nan", "na", "null"):
        return math.nan
    try:
        return float(cell)
    except ValueError:
        raise JointCsvError(f"{path}:{line}: column {col!r}: expected a number, got {cell!r}") from None


#: the lowest sample rate a joint-state log is read at, Hz: slower means its time column is not in seconds
MIN_RATE_HZ = 1.0


def load_joint_csv(path: str | Path, *, joints: Mapping[str, str] | Sequence[str],
                   units: Mapping[str, str] | str = "rad", commands: Mapping[str, str] | Sequence[str] | None = None,
                   time_column: str | None = None, rate: float | None = None) -> JointRecording:
    """Read a joint-state CSV (module docstring).

    Args:
        path: the file (``,``, tab or ``;`` separated, one header row).
        joints: column -> model joint name (or a list: column = joint name).
        units: ``"rad"``/``"m"`` for all joints or per column.
        commands: column -> actuator name (or a list), optional.
        time_column: name of the time column (default: time / t / stamp / timestamp).
        rate: Hz; required without a time column (then t = row / rate).

    Raises:
        JointCsvError: one line naming the file and column/line (also a time column whose median step is
            over 1 s, below :data:`MIN_RATE_HZ`: ms or ns read as seconds).
    """
    path = Path(path)
    why = file_problem(path)
    if why:  # missing, or a FIFO / directory / device (never opened)
        raise JointCsvError(f"{path}: joint-state CSV not found" if why.startswith("file not found")
                            else f"joint-state CSV {why}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise JointCsvError(f"{path}: not a text CSV file ({err.reason} at byte {err.start})") from None
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    delim = "\t" if "\t" in first else ";" if ";" in first and "," not in first else ","  # ';': spreadsheet locales
    rows = [[c.strip() for c in r] for r in csv.reader(lines, delimiter=delim)]
    rows = [r for r in rows if any(r)]
    if len(rows) < 2:
        raise JointCsvError(f"{path}: expected a header row and at least one data row")
    header = rows[0]
    low = [h.lower() for h in header]
    jmap = dict(joints) if isinstance(joints, Mapping) else {str(j): str(j) for j in joints}
    cmap = (dict(commands) if isinstance(commands, Mapping) else {str(c): str(c) for c in commands}) if commands else {}
    if not jmap:
        raise JointCsvError(f"{path}: no joint columns asked for; give joints: {{column: joint}}")

    def col(name: str, what: str) -> int:
        if name not in header:
            close = difflib.get_close_matches(name, header, n=1)
            raise JointCsvError(f"{path}: {what} column {name!r} not found; columns: {', '.join(header)}"
                                + (f" (did you mean {close[0]!r}?)" if close else ""))
        return header.index(name)

    jcols = [col(c, "joint") for c in jmap]
    ccols = [col(c, "command") for c in cmap]
    ulist = []
    for c in jmap:
        u = units if isinstance(units, str) else units.get(c, "rad")
        if u not in ("rad", "m"):
            raise JointCsvError(f"{path}: column {c!r}: unknown joint unit {u!r}; expected rad (revolute) or m "
                                "(prismatic)")
        ulist.append(u)
    if time_column is not None:
        tcol = col(time_column, "time")
    else:
        tcol = next((low.index(n) for n in _TIME_NAMES if n in low), None)
    if rate is not None and not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise JointCsvError(f"{path}: rate must be a number > 0 Hz, got {rate!r}")
    if tcol is None and rate is None:
        raise JointCsvError(f"{path}: no time column (time, t, stamp) and no rate; give rate: <Hz>")
    data = rows[1:]
    T = len(data)
    t = np.empty(T)
    q = np.full((T, len(jcols)), np.nan)
    u = np.full((T, len(ccols)), np.nan) if ccols else None
    for i, r in enumerate(data):
        line = i + 2
        get = (lambda c: r[c] if c < len(r) else "")
        if tcol is not None:
            t[i] = _num(get(tcol), path, line, header[tcol])
            if not math.isfinite(t[i]):
                raise JointCsvError(f"{path}:{line}: column {header[tcol]!r}: missing time")
        else:
            t[i] = i / float(rate)
        for j, c in enumerate(jcols):
            q[i, j] = _num(get(c), path, line, header[c])
        for j, c in enumerate(ccols):
            u[i, j] = _num(get(c), path, line, header[c])
    dt = np.diff(t)
    bad = np.nonzero(dt <= 0)[0]
    if bad.size:
        i = int(bad[0]) + 1
        raise JointCsvError(f"{path}:{i + 2}: column {header[tcol]!r}: "
                            f"{'duplicate' if dt[bad[0]] == 0 else 'non-monotonic'} time {t[i]:.6g} s after "
                            f"{t[i - 1]:.6g} s (times must increase)")
    t = t - t[0]
    rate_hz = float(rate) if rate is not None else (1.0 / float(np.median(dt)) if dt.size else 1.0)
    if rate is None and dt.size and rate_hz < MIN_RATE_HZ:  # a time column in ms, us or ns read as seconds
        raise JointCsvError(f"{path}: column {header[tcol]!r}: samples {float(np.median(dt)):.6g} s apart "
                            f"({rate_hz:.3g} Hz); times must be in seconds (a column in ms: divide by 1000; in ns: "
                            "by 1e9)")
    invalid = {j: int((~np.isfinite(q[:, k])).sum()) for k, j in enumerate(jmap.values())}
    return JointRecording(t, tuple(jmap.values()), q, tuple(ulist), u, tuple(cmap.values()), rate_hz, invalid,
                          str(path))
