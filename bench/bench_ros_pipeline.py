#!/usr/bin/env python3
"""Benchmark of the lockstep ROS pipeline and of /vid2sid/propose.

1. ``/vid2sid/propose`` latency with the reasoner: the finger graph with the stand-in
   rig runs the standard 2 s training step at 30 Hz, then a client in another rclpy
   context (every message crosses DDS) calls the service ``--propose-calls`` times
   (one iteration each, applied to the twin) and the wall time of each call is reported.
2. The lockstep pipeline at each ``--rates`` (default 30 and 60 Hz) for ``--duration``
   seconds (default 60): excitation timer -> stand-in rig (step + render + sensor noise)
   and sim twin (step + render) -> tracker (both streams) -> trajectories. Reported per
   stream: dropped frames (not at the tracker 10 s after the trial's end) and late frames
   (received more than one command period after the frame's capture target), the delay
   from capture target to tracker (p50 / p95 / max), plus the machine's load average
   (the figures depend on what else runs on the 2 cores).

Run: ``.venv/bin/python bench/bench_ros_pipeline.py`` (about 3 min).
ROS traffic stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, own domain).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _wait(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


def run_trial(rate: float, duration: float, noise: bool, record: bool, tmp: Path) -> dict:
    from vid2sid_ros.nodes.bringup import Bringup

    exc = (f"{{kind: chirp, f0: 0.3, f1: 4.0, amplitude: 0.25, offset: 0.35, duration: {duration}, "
           f"rate: {rate}}}")
    b = Bringup("finger_stand_in",
                arguments={"bag_path": str(tmp / f"bag_{rate:g}Hz"), "run_dir": str(tmp / "runs")},
                overrides={"excitation_node": {"excitation_config": exc},
                           # frames arriving more than 10 s after the trial's end count as dropped
                           "tracker_node": {"trial_grace": 10.0, "queue_size": 100000},
                           "stand_in_rig_node": {"noise": noise},
                           "recorder_node": {"enabled": record}}).start()
    try:
        time.sleep(1.0)
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        tid = b["excitation_node"].start_trial()
        tracker = b["tracker_node"]
        ok = _wait(lambda: tid in tracker.results, duration + 120.0)
        wall = time.monotonic() - t0
        load1 = os.getloadavg()[0]
        if not ok:
            return {"rate": rate, "error": "trajectories not published in time"}
        out = {"rate": rate, "steps": tracker.results[tid]["real"].num_frames, "wall_s": wall,
               "load_avg": (load0, load1), "queue_drops": tracker.queue_drops}
        for s, tr in tracker.results[tid].items():
            m = tr.meta
            out[s] = {k: m.get(k) for k in ("dropped_frames", "late_frames", "duplicate_frames", "delay_p50_s",
                                              "delay_p95_s", "delay_max_s")}
        return out
    finally:
        b.shutdown()


def propose_latency(calls: int, tmp: Path) -> dict:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from vid2sid_ros.nodes.bringup import Bringup
    from vid2sid_ros.srv import Propose

    b = Bringup("finger_stand_in", arguments={"bag_path": str(tmp / "bag_propose"), "run_dir": str(tmp / "runs_p")},
                overrides={"tracker_node": {"trial_grace": 30.0}}).start()
    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("bench_client", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    try:
        time.sleep(1.0)
        tid = b["excitation_node"].start_trial()
        if not _wait(lambda: tid in b["calibrator_node"].real, 60.0):
            return {"error": "no real trajectory"}
        cli = node.create_client(Propose, "/vid2sid/propose")
        cli.wait_for_service(timeout_sec=10.0)
        lat, errs = [], []
        for _ in range(calls):
            t = time.monotonic()
            fut = cli.call_async(Propose.Request(apply=True, iterations=1))
            ex.spin_until_future_complete(fut, timeout_sec=300.0)
            lat.append(time.monotonic() - t)
            errs.append(fut.result().error_px)
        return {"latency_s": lat, "error_px": errs}
    finally:
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        b.shutdown()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=float, nargs="+", default=[30.0, 60.0], help="command rates, Hz")
    p.add_argument("--duration", type=float, default=60.0, help="trial length, s")
    p.add_argument("--propose-calls", type=int, default=5)
    p.add_argument("--no-noise", action="store_true", help="stand-in rig without the sensor noise model")
    p.add_argument("--record", action="store_true", help="also record every topic to a bag")
    a = p.parse_args(argv)
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_ros_") as d:
        tmp = Path(d)
        if a.propose_calls > 0:
            r = propose_latency(a.propose_calls, tmp)
            if "error" in r:
                print(f"propose: {r['error']}")
            else:
                lat = r["latency_s"]
                print(f"/vid2sid/propose (reasoner, 1 iteration, 2 s trial at 30 Hz): p50 {statistics.median(lat):.2f} s, "
                      f"max {max(lat):.2f} s over {len(lat)} calls; error px: "
                      + ", ".join(f"{e:.3f}" for e in r["error_px"]), flush=True)
        for rate in a.rates:
            r = run_trial(rate, a.duration, not a.no_noise, a.record, tmp)
            if "error" in r:
                print(f"{rate:g} Hz: {r['error']}")
                continue
            print(f"{rate:g} Hz x {a.duration:g} s ({r['steps']} steps, noise {'off' if a.no_noise else 'on'}, "
                  f"record {'on' if a.record else 'off'}), wall {r['wall_s']:.1f} s, load avg "
                  f"{r['load_avg'][0]:.2f} -> {r['load_avg'][1]:.2f}, tracker queue drops {r['queue_drops']}",
                  flush=True)
            for s in ("real", "sim"):
                m = r[s]
                print(f"  {s:4s}: dropped {m['dropped_frames']}, late {m['late_frames']}, duplicates "
                      f"{m['duplicate_frames']}, delay p50 {1e3 * (m['delay_p50_s'] or 0):.0f} ms, p95 "
                      f"{1e3 * (m['delay_p95_s'] or 0):.0f} ms, max {1e3 * (m['delay_max_s'] or 0):.0f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
