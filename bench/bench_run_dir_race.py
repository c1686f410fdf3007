"""Races of two ``vid2sid calibrate`` runs into one run directory.

Each race starts two identical ``vid2sid calibrate --rig toy`` processes into the same
``--out`` at the same moment (both wait on one start file, so their imports do not decide
the order). Every race must end with exactly one run completed (exit 0) and the other
refused in one line (exit 2: the directory is in use, or already holds the winner's run),
and the winner's ``iterations.jsonl`` byte-identical to a run alone, timing fields
(``wall_s``) aside.

Usage::

    python bench/bench_run_dir_race.py --races 50 [--iterations 4] [--work /tmp/race]

Prints one line per race and a summary; exit status 1 when any race failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_STARTER = ("import os, sys, time\n"
            "go = sys.argv.pop(1)\n"
            "from vid2sid_ros import cli\n"
            "import vid2sid_ros.calibration.loop, vid2sid_ros.rigs  # noqa: F401 - imports done before the start\n"
            "while not os.path.exists(go):\n"
            "    time.sleep(0.001)\n"
            "sys.exit(cli.main(sys.argv[1:]))\n")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("MUJOCO_GL", "egl")
    return env


def calibrate_args(out: Path, iterations: int) -> list[str]:
    """The CLI arguments of one toy calibration into ``out`` (deterministic, seeded)."""
    return ["calibrate", "--rig", "toy", "--iterations", str(iterations), "--seed", "0", "--out", str(out),
            "--no-report", "--quiet"]


def timeless(path: Path) -> list[dict]:
    """``iterations.jsonl``'s records with the timing field ``wall_s`` removed."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        d.pop("wall_s", None)
        out.append(d)
    return out


def run_alone(out: Path, iterations: int) -> subprocess.CompletedProcess:
    """One calibration into ``out`` with nothing racing it."""
    return subprocess.run([sys.executable, "-m", "vid2sid_ros.cli", *calibrate_args(out, iterations)],
                          capture_output=True, text=True, env=_env(), timeout=300)


def race(out: Path, iterations: int, go: Path) -> list[tuple[int, str, str]]:
    """Two calibrations into ``out`` released together; their (exit code, stdout, stderr)."""
    procs = [subprocess.Popen([sys.executable, "-c", _STARTER, str(go), *calibrate_args(out, iterations)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(2)]
    time.sleep(2.5)  # both past their imports, spinning on the start file
    go.write_text("")
    res = []
    for p in procs:
        o, e = p.communicate(timeout=300)
        res.append((p.returncode, o, e))
    go.unlink()
    return res


def judge(res: list[tuple[int, str, str]], out: Path, reference: list[dict]) -> str | None:
    """None when the race ended as it must, else what went wrong."""
    codes = sorted(r[0] for r in res)
    if codes != [0, 2]:
        return f"exit codes {codes}, expected [0, 2]: " + " | ".join(r[2].strip()[-300:] for r in res)
    loser = next(r for r in res if r[0] == 2)
    lines = [ln for ln in loser[2].splitlines() if ln.strip()]
    if len(lines) != 1 or not ("in use by another run" in lines[0] or "already holds a calibration run" in lines[0]):
        return f"the refused run said {lines!r}, expected one line naming the holder"
    if loser[1].strip():
        return f"the refused run printed to stdout: {loser[1][:200]!r}"
    if timeless(out / "iterations.jsonl") != reference:
        return "the winner's iterations.jsonl differs from a run alone"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--races", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="vid2sid_race_"))
    work.mkdir(parents=True, exist_ok=True)
    alone = run_alone(work / "alone", a.iterations)
    if alone.returncode != 0:
        print(f"the run alone failed (rc {alone.returncode}): {alone.stderr[-500:]}")
        return 1
    reference = timeless(work / "alone" / "iterations.jsonl")
    failures, refused_busy = 0, 0
    for i in range(a.races):
        out = work / f"race_{i:03d}"
        res = race(out, a.iterations, work / "go")
        why = judge(res, out, reference)
        loser = next((r[2].strip() for r in res if r[0] == 2), "")
        refused_busy += "in use by another run" in loser
        print(f"race {i + 1:2d}: " + ("ok" if why is None else f"FAILED: {why}") + f"  [{loser[:160]}]", flush=True)
        failures += why is not None
    print(f"{a.races - failures}/{a.races} races ended with one run and one one-line refusal "
          f"({refused_busy} refused while the winner ran, {a.races - failures - refused_busy} after it ended); "
          f"winner's iterations.jsonl identical to a run alone (wall_s aside) in every passing race")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
