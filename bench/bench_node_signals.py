#!/usr/bin/env python3
"""Start/stop and start-up-signal check of the node executables (``python -m vid2sid_ros.nodes.<node>``).

1. ``--runs`` (default 50) start/stop cycles: start the node, wait for its ready line, send
   SIGINT (even runs) or SIGTERM (odd runs), expect exit status 0 / 143 within ``--stop-bound``
   seconds and no traceback.
2. ``--random`` (default 20) SIGINTs at a uniformly random moment of start-up (seeded,
   from the end of the interpreter's own start-up -- ``python -c pass``, measured; before
   it no line of the package has run -- to the longest start-up of part 1): expect status 0
   and no traceback, whatever the phase (imports, ``rclpy.init``, construction, spinning).

Prints one line per run and the counts. Set ``ROS_DOMAIN_ID`` and
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` first (discovery stays on this machine).

    python bench/bench_node_signals.py --node excitation_node --runs 50 --random 20
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READY = {"excitation_node": "excitation 'train_step'", "tracker_node": None, "sim_twin_node": "ready",
         "calibrator_node": None, "recorder_node": "recording", "stand_in_rig_node": "stand-in rig"}
BAD = ("Traceback", "Exception ignored", "RCLError")


def start(node: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", f"vid2sid_ros.nodes.{node}", "--ros-args", "--params-file",
                             str(REPO / "config" / "finger.yaml"), "-p", "enabled:=false"]
                            if node == "recorder_node" else
                            [sys.executable, "-m", f"vid2sid_ros.nodes.{node}", "--ros-args", "--params-file",
                             str(REPO / "config" / "finger.yaml")],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_ready(proc: subprocess.Popen, marker: str | None, timeout: float = 60.0) -> tuple[float, str]:
    """Seconds until the node logged ``marker`` (or any INFO line when None); the lines read."""
    t0, out = time.monotonic(), []
    while time.monotonic() - t0 < timeout:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        out.append(line)
        if (marker or "[INFO]") in line:
            return time.monotonic() - t0, "".join(out)
    raise RuntimeError("node did not come up:\n" + "".join(out))


def stop(proc: subprocess.Popen, sig: int, bound: float) -> tuple[int, float, str]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        rest, _ = proc.communicate(timeout=bound + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
    return proc.returncode, time.monotonic() - t0, rest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default="excitation_node", choices=sorted(READY))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--random", type=int, default=20)
    ap.add_argument("--stop-bound", type=float, default=2.0, help="s from the signal to the exit")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ok_runs, startup = 0, []
    for i in range(a.runs):
        proc = start(a.node)
        t_ready, _ = wait_ready(proc, READY[a.node])
        startup.append(t_ready)
        sig = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
        rc, dt, rest = stop(proc, sig, a.stop_bound)
        want = 0 if sig == signal.SIGINT else 143
        good = rc == want and dt <= a.stop_bound and not any(b in rest for b in BAD)
        ok_runs += good
        print(f"start/stop {i + 1:3d}: {signal.Signals(sig).name} ready {t_ready:.2f} s, exit {rc} after {dt:.2f} s"
              + ("" if good else f"  FAIL\n{rest}"), flush=True)
    t_max = max(startup) if startup else 4.0
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    t_interp = time.monotonic() - t0
    rng = random.Random(a.seed)
    ok_random = 0
    for i in range(a.random):
        at = rng.uniform(t_interp, t_max)
        proc = start(a.node)
        time.sleep(at)
        rc, dt, rest = stop(proc, signal.SIGINT, a.stop_bound)
        good = rc == 0 and not any(b in rest for b in BAD)
        ok_random += good
        print(f"SIGINT at {at:.2f} s of start-up {i + 1:3d}: exit {rc} after {dt:.2f} s"
              + ("" if good else f"  FAIL\n{rest}"), flush=True)
    print(f"{a.node}: start/stop {ok_runs}/{a.runs} clean (exit 0 on SIGINT, 143 on SIGTERM, within "
          f"{a.stop_bound:g} s, no traceback); SIGINT at a random moment of start-up {ok_random}/{a.random} "
          f"clean (exit 0, no traceback; moments {t_interp:.2f}-{t_max:.2f} s); start-up "
          f"{min(startup, default=0):.2f}-{t_max:.2f} s")
    return 0 if ok_runs == a.runs and ok_random == a.random else 1


if __name__ == "__main__":
    sys.exit(main())
