"""bench/bench_executor.py runs (a smoke run at its --tiny size, not a timing) and finds every backend's
results identical to serial."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_executor_tiny_runs_and_every_backend_matches_serial():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_executor.py"), "--tiny"], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    backends = {line.split("|")[2].strip() for line in rows}
    assert {"serial", "threads(2)", "pool(2)"} <= backends
    assert len(rows) == 10 and all(line.rstrip().endswith("| yes |") for line in rows), out.stdout
