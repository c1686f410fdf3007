"""What `vid2sid calibrate` prints: quiet by default (a progress bar with a time estimate on a
terminal, one line per iteration, the summary), each warning once, rationales with -v, and a
resume hint that runs as printed."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import subprocess
import struct
import sys
import termios
from pathlib import Path
from types import SimpleNamespace

import pytest

from vid2sid_ros.cli import main
from vid2sid_ros.report.terminal import CalibrationTerminal, moved_parameters

REPO = Path(__file__).resolve().parents[1]


def _run_in_a_terminal(argv: list[str], cwd: Path, timeout: float = 240.0) -> str:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal; everything it wrote there."""
    try:
        master, slave = pty.openpty()
    except OSError as err:  # a container without /dev/ptmx
        pytest.skip(f"no pseudo-terminal on this machine ({err}); the bar is drawn only on a terminal")
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 40 rows, 120 columns
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    proc = subprocess.Popen(argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                raise TimeoutError(f"no output for {timeout} s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return b"".join(chunks).decode("utf-8", errors="replace")


def _screen_lines(raw: str) -> list[str]:
    """The lines left on the screen: a carriage return rewrites its line (the bar), ANSI codes dropped."""
    raw = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    return [seg.split("\r")[-1].rstrip() for seg in raw.replace("\r\n", "\n").split("\n")][:-1]


def test_finger_calibration_terminal_is_short_with_a_progress_bar_and_each_warning_once(tmp_path):
    out = tmp_path / "run"
    raw = _run_in_a_terminal([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", "--rig", "finger",
                              "--iterations", "10", "--out", str(out)], cwd=tmp_path)
    lines = _screen_lines(raw)
    assert len(lines) <= 25, "\n".join(lines)
    # the bar: rollouts against the budget, elapsed < remaining (tqdm's time estimate), drawn with \r
    assert re.search(r"calibrating .*\d+/40 rollouts \[\d\d:\d\d<\d\d:\d\d\]", raw), raw[:2000]
    assert not any("rollouts [" in ln and "calibrating" in ln for ln in lines)  # ... and gone at the end
    # one line per iteration (iteration 0 = the start point), each with its error's unit
    done = [json.loads(x)["iteration"] for x in (out / "iterations.jsonl").read_text().splitlines()]
    iters = [ln for ln in lines if ln.startswith("iter ")]
    assert [int(re.match(r"iter +(\d+)/10", ln).group(1)) for ln in iters] == [0] + done
    assert all(re.search(r"error \d+\.\d+ px", ln) for ln in iters)
    assert "→" in iters[1] and "N·m/rad" in iters[1]  # the parameters moved, one unit spelling
    assert not any("Trace:" in ln or "*" in ln for ln in lines)  # no rationale by default; N·m, not N*m
    warned = [ln for ln in lines if ln.startswith(("warning:", "note:"))]
    assert len(warned) == len(set(warned))
    assert any(ln.startswith("stopped: ") for ln in lines) and lines[-2].startswith("report: ")


def test_ten_full_iterations_fit_in_25_lines_and_the_bar_counts_iterations_without_a_budget(tmp_path):
    """The finger made to run all 10 iterations (no convergence stop, no rollout budget)."""
    cfg = tmp_path / "finger10.yaml"
    cfg.write_text("rig: finger\ncalibration: {stop_when_converged: false, rollout_budget: null}\n")
    out = tmp_path / "run"
    raw = _run_in_a_terminal([sys.executable, "-m", "vid2sid_ros.cli", "calibrate", str(cfg), "--iterations", "10",
                              "--out", str(out)], cwd=tmp_path)
    lines = _screen_lines(raw)
    assert len(lines) <= 25, "\n".join(lines)
    assert [ln.split()[1] for ln in lines if ln.startswith("iter ")] == [f"{i}/10" for i in range(11)]
    assert re.search(r"calibrating .*\d+/10 iterations \[\d\d:\d\d<\d\d:\d\d\]", raw)
    warned = [ln for ln in lines if ln.startswith(("warning:", "note:"))]
    assert len(warned) == len(set(warned))


def _rec(i, values, *, notes=(), proposer="reasoner", rationale="Raising k 1 → 2. Trace: numbers"):
    return SimpleNamespace(iteration=i, values=values, error_px=1.0 / (i + 1), proposer=proposer, notes=list(notes),
                           rationale=rationale, rollouts_used=2,
                           extra={"best_error_px": 1.0 / (i + 1), "rollouts_total": 2 * (i + 1),
                                  "current_after": values})


def test_each_warning_and_note_is_printed_once():
    """An up-front warning (the rollout budget's) is handed to on_warning AND kept in iteration 0's
    notes: it was printed twice ("warning: ..." then "    note: ..."); a fallback note repeated
    every iteration."""
    out, err = io.StringIO(), io.StringIO()
    t = CalibrationTerminal({"k": "N*m/rad"}, iterations=3, budget=None, out=out, err=err, progress=False,
                            proposer="gemini")
    t.warning("bounds allow a rollout over the substep budget")
    t.iteration(_rec(0, {"k": 1.0}, notes=["bounds allow a rollout over the substep budget"]))
    t.iteration(_rec(1, {"k": 2.0}, notes=["fallback 'reasoner' used"], proposer="reasoner"))
    t.iteration(_rec(2, {"k": 2.0001}, notes=["fallback 'reasoner' used"], proposer="reasoner"))
    t.close()
    assert err.getvalue().splitlines() == ["warning: bounds allow a rollout over the substep budget"]
    lines = out.getvalue().splitlines()
    assert lines == ["iter  0/3  error 1.000 px  start point  [2 rollouts]",
                     "iter  1/3  error 0.500 px (best 0.500 px)  k 1 → 2 N·m/rad (by reasoner)  [4 rollouts]",
                     "note: fallback 'reasoner' used",
                     # 2 → 2.0001 prints as 2 → 2: no move on the terminal
                     "iter  2/3  error 0.333 px (best 0.333 px)  moves below 3 significant digits (by reasoner)  "
                     "[6 rollouts]"]


def test_verbose_adds_the_rationale_and_quiet_prints_no_iteration():
    out = io.StringIO()
    t = CalibrationTerminal({"k": "N*m/rad"}, iterations=1, budget=10, out=out, err=io.StringIO(), verbosity=1,
                            progress=False)
    t.iteration(_rec(1, {"k": 2.0}, notes=["a note"]))
    assert "Trace: numbers" in out.getvalue() and "    note: a note" in out.getvalue()
    out = io.StringIO()
    t = CalibrationTerminal({"k": "N*m/rad"}, iterations=1, budget=10, out=out, err=io.StringIO(), verbosity=-1,
                            progress=False)
    t.line("calibrating ...")
    t.iteration(_rec(1, {"k": 2.0}))
    assert out.getvalue() == ""


def test_moved_parameters_hide_moves_below_the_printed_digits_and_cap_the_line():
    units = {n: "1" for n in "abcdef"}
    before = dict.fromkeys("abcdef", 1.0)
    after = {"a": 1.0004, "b": 1.5, "c": 3.0, "d": 1.1, "e": 1.2, "f": 1.3}
    assert moved_parameters(before, after, units) == ["b 1 → 1.5", "c 1 → 3", "d 1 → 1.1", "e 1 → 1.2",
                                                      "f 1 → 1.3"]
    out = io.StringIO()
    t = CalibrationTerminal(units, iterations=1, budget=None, out=out, err=io.StringIO(), progress=False, width=200)
    t.iteration(_rec(0, before))
    t.iteration(_rec(1, after))
    assert "b 1 → 1.5, c 1 → 3, d 1 → 1.1, e 1 → 1.2, 1 more" in out.getvalue()
    # narrower: fewer named, the line within the width (was: 256-character iteration lines on a 100-column log)
    for width, named in ((90, "b 1 → 1.5, c 1 → 3, 3 more"), (80, "b 1 → 1.5, 4 more"), (50, "5 parameters moved")):
        out = io.StringIO()
        t = CalibrationTerminal(units, iterations=1, budget=None, out=out, err=io.StringIO(), progress=False,
                                width=width)
        t.iteration(_rec(0, before))
        t.iteration(_rec(1, after))
        line = out.getvalue().splitlines()[1]
        assert named in line and (len(line) <= width or named == "5 parameters moved"), line


def test_the_resume_hint_names_a_program_that_exists(tmp_path, monkeypatch):
    """The hint said `vid2sid calibrate ...`, not on PATH after `make demo` (venv not activated)."""
    from vid2sid_ros.commands.calibrate import cli_prefix

    exe = tmp_path / "venv" / "bin" / "vid2sid"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(exe), "calibrate"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cli_prefix() == [str(exe.resolve())]
    monkeypatch.setenv("PATH", str(exe.parent))
    assert cli_prefix() == ["vid2sid"]
    monkeypatch.setattr(sys, "argv", [str(REPO / "vid2sid_ros" / "cli.py")])  # python -m vid2sid_ros.cli
    assert cli_prefix() == [sys.executable, "-m", "vid2sid_ros.cli"]


def test_identifiability_warnings_reach_the_terminal_once(tmp_path, capsys):
    """The check at the result warned on stderr AND the summary listed the same combination."""
    out = tmp_path / "run"
    assert main(["calibrate", "--rig", "pendulum", "--iterations", "1", "--no-report", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    lines = (cap.out + cap.err).splitlines()
    warned = [ln for ln in lines if ln.startswith("warning:")]
    assert len(warned) == len(set(warned))
    final = json.loads((out / "result.json").read_text())["final_identifiability"]
    assert final.get("weak_directions"), "the pendulum's damping/drag combination is poorly identifiable"
    assert sum("Poorly identifiable combination" in ln for ln in warned) == len(final["weak_directions"])
    assert not any(final["warning"][:60] in ln for ln in lines)  # its text is the summary's combination line
    assert not any("N*m" in ln for ln in lines)


def test_rationale_moves_show_enough_digits_and_no_percentage_of_a_signed_nuisance():
    """Were: "motor_gain 1.61 → 1.61 (-0.3 %)" and "latency 0.000257 s → 0.000176 s (-31.5 %)"."""
    from vid2sid_ros.calibration.proposers.rationale import moved_sentences
    from vid2sid_ros.core.parameters import ParameterSet, ParameterSpec

    ps = ParameterSet((ParameterSpec(name="motor_gain", unit="N*m", lower=0.1, upper=10, nominal=1.6),
                       ParameterSpec(name="latency", unit="s", lower=-0.05, upper=0.05, nominal=0.0, kind="nuisance"),
                       ParameterSpec(name="offset", unit="m", lower=-0.1, upper=0.1, nominal=0.0),
                       ParameterSpec(name="k", unit="N*m/rad", lower=0.1, upper=1, nominal=0.3)))
    out = moved_sentences(ps, {"motor_gain": 1.61, "latency": 0.000257, "offset": -0.02, "k": 0.3619},
                          {"motor_gain": 1.6052, "latency": 0.000176, "offset": -0.01, "k": 0.36190000001})
    assert out == ["Lowering motor_gain 1.61 N·m → 1.605 N·m (-0.3 %).",
                   "Lowering latency (a measurement nuisance, not physics) 0.000257 s → 0.000176 s (-8.1e-05 s).",
                   "Raising offset -0.02 m → -0.01 m (+0.01 m)."]  # k moved below 6 digits: no sentence


def test_a_run_stopped_by_its_budget_prints_a_command_that_goes_on(tmp_path, capsys, monkeypatch):
    """Was: "to go on: a larger --budget in a new --out" (no command to run); then a command that raised
    only the limit that stopped it (``--iterations 20`` with 118 of 120 rollouts spent: nothing ran).
    Whether to print it is :func:`go_on_advice`'s (test_go_on_advice.py); here it says the run may go on."""
    import shlex

    import vid2sid_ros.report.terminal as terminal

    monkeypatch.setattr(terminal, "go_on_advice", lambda run: (True, "it was still improving at its limit"))
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--rig", "toy", "--proposer", "random", "--iterations", "20", "--budget", "6",
                 "--out", "run", "--no-report", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    (i,) = [k for k, ln in enumerate(out) if ln.startswith("to go on")]
    argv = shlex.split(out[i + 1])  # the command on a line of its own, whole
    assert argv[:4] == [sys.executable, "-m", "vid2sid_ros.cli", "calibrate"]
    assert argv[argv.index("--budget") + 1] == "12" and argv[argv.index("--iterations") + 1] == "40"
    assert argv[argv.index("--out") + 1] == "run" and argv[-1] == "--resume"  # was: a new run in run_more
    before = (tmp_path / "run" / "iterations.jsonl").read_bytes()
    assert main([*argv[3:], "--no-report", "-q"]) == 0  # runs as printed, continuing the run
    assert (tmp_path / "run" / "iterations.jsonl").read_bytes().startswith(before)
    assert 6 < json.loads((tmp_path / "run" / "result.json").read_text())["rollouts"] <= 12
