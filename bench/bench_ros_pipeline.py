#!/usr/bin/env python3
"""Benchmark of the lockstep ROS pipeline and of /vid2sid/propose.

1. ``/vid2sid/propose`` latency with the reasoner: the finger graph with the stand-in
   rig runs the standard 2 s training step at 30 Hz, then a client in another rclpy
   context (every message crosses DDS) calls the service ``--propose-calls`` times
   (one iteration each, applied to the twin) and the wall time of each call is reported.
2. The lockstep pipeline at each ``--rates`` (default 30 and 60 Hz) for ``--duration``
   seconds (default 60): excitation timer -> stand-in rig (step + render + sensor noise)
   and sim twin (step + render) -> tracker (both streams) -> trajectories, every node on
   its own executor thread (``Bringup``). Reported per stream:

   * dropped: command steps with no frame at the tracker 10 s after the trial's end;
   * late: frames that reached the tracker (its image callback) more than one command
     period after their capture time ``t_k + p`` (command stamp + period), i.e. more
     than 2 periods after their command was due; late frames are still paired by step;
   * after capture: frames that reached the tracker after their capture time at all
     (the twins compute a period ahead: a frame can be ready before its capture time);
   * delay = arrival at the tracker - capture time, p50 / p95 / p99 / max;

   plus the process CPU time per command step (all threads: DDS, executors, physics,
   rendering, noise, tracking), split by node (its spin thread and workers) and by
   thread, and the CPU ceiling of an idle 2-core machine, ``2 cores / CPU per step``.
   Whether one process reaches that ceiling depends on how much of a step holds the
   interpreter lock (rendering, MuJoCo, OpenCV and DDS release it): measure it with
   ``--rates`` on a quiet machine rather than infer it (an earlier version of this text
   inferred a GIL bound of ~58 steps/s that a measurement at 60 Hz contradicted).

   The machine's load average is printed: wall-clock figures depend on what else runs.

3. ``--processes``: the same graph, nodes and params files started the way ``ros2 launch``
   does (``launch/calibrate_finger.launch.py stand_in:=true``; its node table,
   :func:`vid2sid_ros.nodes.launch_support.launch_plan`): one OS process per node
   (``python -m vid2sid_ros.nodes.<executable> --ros-args -r __node:=<name>
   --params-file ...``, the bench's overrides in one more params file, as launch passes
   its override dict). The bench process is only a client in its own rclpy context: it
   calls ``/vid2sid/excitation/start`` and reads ``dropped_frames`` / ``late_frames``
   from the published trajectories, the delays from the tracker's log line, and the CPU
   time of every node process from ``/proc/<pid>/stat``. ``--compare`` runs both modes.

Run: ``.venv/bin/python bench/bench_ros_pipeline.py`` (about 4 min);
``nice .venv/bin/python bench/bench_ros_pipeline.py --propose-calls 0 --rates 60 120 --duration 30 --compare``
for docs/benchmarks.md's one-process vs one-process-per-node figures.
ROS traffic stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, own domain).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import threading
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


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU time (s) of every thread of this process, ``{native id: (name, cpu)}`` (Linux /proc)."""
    tck = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        comm = st[st.index("(") + 1:st.rindex(")")]
        out[int(tid)] = (names.get(int(tid), comm), (int(fields[11]) + int(fields[12])) / tck)
    return out


NODES = ("excitation_node", "stand_in_rig_node", "sim_twin_node", "tracker_node", "calibrator_node", "recorder_node")


def _node_of(name: str) -> str:
    """Thread name -> node it works for (``spin_<node>``, ``<node>_step_0``, ``<node>_worker``), or a role."""
    for node in NODES:
        if name == f"spin_{node}" or name.startswith(node + "_"):
            return node
    if name.startswith("llvmpipe"):
        return "rendering (llvmpipe)"
    return "shared (DDS, main, pools)"


def _role(name: str) -> str:
    """Thread name without its pool index (``sim_twin_node_step_0`` -> ``sim_twin_node_step``)."""
    return re.sub(r"[-_]\d+(_\d+)?$", "", name)


def run_trial(rate: float, duration: float, noise: bool, record: bool, tmp: Path) -> dict:
    import numpy as np

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
        cpu0, threads0 = time.process_time(), thread_cpu()
        tid = b["excitation_node"].start_trial()
        tracker = b["tracker_node"]
        ok = _wait(lambda: tid in tracker.results, duration + 120.0)
        wall = time.monotonic() - t0
        cpu, threads1 = time.process_time() - cpu0, thread_cpu()
        load1 = os.getloadavg()[0]
        if not ok:
            return {"rate": rate, "error": "trajectories not published in time"}
        steps = tracker.results[tid]["real"].num_frames
        by_role: dict[str, float] = collections.defaultdict(float)
        by_node: dict[str, float] = collections.defaultdict(float)
        for k, (name, c) in threads1.items():
            used = c - threads0.get(k, (name, 0.0))[1]
            by_role[_role(name)] += used
            by_node[_node_of(name)] += used
        out = {"rate": rate, "steps": steps, "wall_s": wall, "load_avg": (load0, load1),
               "queue_drops": tracker.queue_drops, "cpu_s": cpu, "cpu_by_role": dict(by_role),
               "cpu_by_node": dict(by_node),
               "rig_noise_drops": getattr(b.nodes.get("stand_in_rig_node"), "frames_dropped_by_noise", 0)}
        for s, tr in tracker.results[tid].items():
            m = tr.meta
            out[s] = {k: m.get(k) for k in ("dropped_frames", "late_frames", "duplicate_frames", "delay_p50_s",
                                              "delay_p95_s", "delay_max_s")}
            d = tracker.receipt_delays.get(tid, {}).get(s, [])
            out[s]["after_capture"] = int((d > 0).sum()) if len(d) else 0
            out[s]["delay_p99_s"] = float(np.percentile(d, 99)) if len(d) else None
        return out
    finally:
        b.shutdown()


def _proc_cpu(pid: int) -> float:
    """CPU time (user + system, s) of process ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_trial_processes(rate: float, duration: float, noise: bool, record: bool, tmp: Path) -> dict:
    """The lockstep trial with one OS process per node (the ``ros2 launch`` route); see module doc, 3."""
    import subprocess

    import rclpy
    import yaml
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    from vid2sid_ros.nodes.common import LATCHED_QOS, TrajectoryMsg
    from vid2sid_ros.nodes.graph import find_config_dir
    from vid2sid_ros.nodes.launch_support import launch_plan

    exc = (f"{{kind: chirp, f0: 0.3, f1: 4.0, amplitude: 0.25, offset: 0.35, duration: {duration}, "
           f"rate: {rate}}}")
    overrides = {"excitation_node": {"excitation_config": exc},
                 "tracker_node": {"trial_grace": 10.0, "queue_size": 100000},
                 "stand_in_rig_node": {"noise": noise}, "recorder_node": {"enabled": record}}
    plan = launch_plan("finger_stand_in", str(find_config_dir()),
                       {"bag_path": str(tmp / f"bag_proc_{rate:g}Hz"), "run_dir": str(tmp / "runs_proc")})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    ctx = Context()
    rclpy.init(context=ctx)
    client = rclpy.create_node("bench_launch_client", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client)
    got: dict[str, object] = {}
    for s in ("real", "sim"):
        client.create_subscription(TrajectoryMsg, f"/vid2sid/{s}/trajectory",
                                   lambda m, s=s: got.__setitem__(s, m), LATCHED_QOS)
    try:
        for n in plan:
            params = [p for p in n.parameters if isinstance(p, str)]
            extra = {**n.overrides, **overrides.get(n.name, {})}
            if extra:
                f = tmp / f"{n.name}_{rate:g}Hz.yaml"
                f.write_text(yaml.safe_dump({n.name: {"ros__parameters": extra}}))
                params.append(str(f))
            cmd = [sys.executable, "-m", f"vid2sid_ros.nodes.{n.executable}", "--ros-args", "-r", f"__node:={n.name}"]
            for f in params:
                cmd += ["--params-file", f]
            for a, b in n.remappings:
                cmd += ["-r", f"{a}:={b}"]
            logs[n.name] = tmp / f"{n.name}_{rate:g}Hz.log"
            with open(logs[n.name], "w") as log:
                procs[n.name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        start = client.create_client(Trigger, "/vid2sid/excitation/start")
        end = time.monotonic() + 120.0
        # up: the start service answers and every image stream has its publisher and the tracker as subscriber
        while time.monotonic() < end and not (
                start.service_is_ready()
                and all(client.count_publishers(f"/vid2sid/{s}/image_raw") >= 1 for s in ("real", "sim"))
                and all(client.count_subscribers(f"/vid2sid/{s}/image_raw") >= 1 for s in ("real", "sim"))):
            ex.spin_once(timeout_sec=0.1)
            dead = [k for k, p in procs.items() if p.poll() is not None]
            if dead:
                return {"rate": rate, "error": f"node process(es) {dead} exited; see {logs[dead[0]]}"}
        if time.monotonic() >= end:
            return {"rate": rate, "error": "the graph did not come up within 120 s"}
        time.sleep(2.0)  # the twins build their models after their publishers exist
        load0 = os.getloadavg()[0]
        cpu0 = {k: _proc_cpu(p.pid) for k, p in procs.items()}
        t0 = time.monotonic()
        fut = start.call_async(Trigger.Request())
        ex.spin_until_future_complete(fut, timeout_sec=30.0)
        if fut.result() is None or not fut.result().success:
            return {"rate": rate, "error": f"excitation start refused: {fut.result()}"}
        deadline = time.monotonic() + duration + 120.0
        while len(got) < 2 and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.1)
        wall = time.monotonic() - t0
        cpu = {k: _proc_cpu(p.pid) - cpu0[k] for k, p in procs.items()}
        load1 = os.getloadavg()[0]
        if len(got) < 2:
            return {"rate": rate, "error": "trajectories not published in time"}
        time.sleep(0.5)  # the tracker's log line follows its publish
        text = logs["tracker_node"].read_text(errors="replace")
        out = {"rate": rate, "steps": int(got["real"].num_steps), "wall_s": wall, "load_avg": (load0, load1),
               "cpu_s": sum(cpu.values()), "cpu_by_node": cpu}
        for s in ("real", "sim"):
            m = re.findall(rf" {s}: \d+ steps.*?dropped (\d+), late (\d+), duplicate (\d+)"
                           r"(?:, delay p50 (\d+) ms max (\d+) ms)?", text)
            d = m[-1] if m else ("", "", "", "", "")
            out[s] = {"dropped_frames": int(got[s].dropped_frames), "late_frames": int(got[s].late_frames),
                      "duplicate_frames": int(d[2]) if d[2] else None,
                      "delay_p50_s": float(d[3]) / 1e3 if d[3] else None,
                      "delay_max_s": float(d[4]) / 1e3 if d[4] else None}
        return out
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        ex.shutdown()
        client.destroy_node()
        rclpy.try_shutdown(context=ctx)


def _print_processes(r: dict, a) -> None:
    n, period_ms = r["steps"], 1e3 / r["rate"]
    print(f"{r['rate']:g} Hz x {a.duration:g} s, one process per node (ros2 launch route): {n} steps, wall "
          f"{r['wall_s']:.1f} s, load avg {r['load_avg'][0]:.2f} -> {r['load_avg'][1]:.2f}", flush=True)
    for s in ("real", "sim"):
        m = r[s]
        ms = {k: "?" if m[k] is None else f"{1e3 * m[k]:.0f}" for k in ("delay_p50_s", "delay_max_s")}
        print(f"  {s:4s}: dropped {m['dropped_frames']}, late {m['late_frames']} (> {period_ms:.1f} ms after "
              f"capture), duplicates {m['duplicate_frames']}; delay p50 {ms['delay_p50_s']} ms, max "
              f"{ms['delay_max_s']} ms")
    cpu_ms = 1e3 * r["cpu_s"] / n
    by_node = sorted(r["cpu_by_node"].items(), key=lambda kv: -kv[1])
    print(f"  CPU {r['cpu_s']:.1f} s = {cpu_ms:.1f} ms per step, all node processes ({100 * r['cpu_s'] / r['wall_s']:.0f}"
          "% of one core); by process, ms per step: " + ", ".join(f"{k} {1e3 * c / n:.2f}" for k, c in by_node),
          flush=True)
    print(f"  CPU ceiling of an idle 2-core machine at this CPU per step: {2000 / cpu_ms:.0f} steps/s", flush=True)


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
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--processes", action="store_true",
                      help="one OS process per node, as ros2 launch starts them (default: one process, Bringup)")
    mode.add_argument("--compare", action="store_true", help="both: one process, then one process per node")
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
                print(f"/vid2sid/propose (reasoner, 1 iteration, 2 s trial at 30 Hz): p50 "
                      f"{statistics.median(lat):.2f} s, max {max(lat):.2f} s over {len(lat)} calls; error px: "
                      + ", ".join(f"{e:.3f}" for e in r["error_px"]), flush=True)
        for rate in a.rates:
            if a.processes or a.compare:
                r = run_trial_processes(rate, a.duration, not a.no_noise, a.record, tmp)
                if "error" in r:
                    print(f"{rate:g} Hz, one process per node: {r['error']}")
                else:
                    _print_processes(r, a)
                if a.processes:
                    continue
            r = run_trial(rate, a.duration, not a.no_noise, a.record, tmp)
            if "error" in r:
                print(f"{rate:g} Hz: {r['error']}")
                continue
            n, period_ms = r["steps"], 1e3 / rate
            print(f"{rate:g} Hz x {a.duration:g} s, one process (vid2sid bringup) ({n} steps, period {period_ms:.1f} ms, noise "
                  f"{'off' if a.no_noise else 'on'}, record {'on' if a.record else 'off'}), wall {r['wall_s']:.1f} s, "
                  f"load avg {r['load_avg'][0]:.2f} -> {r['load_avg'][1]:.2f}, tracker queue drops {r['queue_drops']}, "
                  f"frames dropped by the sensor model {r['rig_noise_drops']}", flush=True)
            print(f"  late = reached the tracker more than one period ({period_ms:.1f} ms) after its capture time "
                  f"t_k + p; after capture = reached it after t_k + p at all; delay = arrival - capture time")
            for s in ("real", "sim"):
                m = r[s]
                ms = {k: 1e3 * (m[k] if m[k] is not None else float("nan"))
                      for k in ("delay_p50_s", "delay_p95_s", "delay_p99_s", "delay_max_s")}
                print(f"  {s:4s}: dropped {m['dropped_frames']}, late {m['late_frames']}, after capture "
                      f"{m['after_capture']}, duplicates {m['duplicate_frames']}; delay p50 "
                      f"{ms['delay_p50_s']:.0f} ms, p95 {ms['delay_p95_s']:.0f} ms, p99 {ms['delay_p99_s']:.0f} ms, "
                      f"max {ms['delay_max_s']:.0f} ms", flush=True)
            cpu_ms = 1e3 * r["cpu_s"] / n
            roles = sorted(r["cpu_by_role"].items(), key=lambda kv: -kv[1])
            nodes = dict(r["cpu_by_node"])
            render = nodes.pop("rendering (llvmpipe)", 0.0)
            twins = [k for k in ("stand_in_rig_node", "sim_twin_node") if k in nodes]
            for k in twins:  # each twin renders one frame per step
                nodes[k] += render / len(twins)
            by_node = sorted(nodes.items(), key=lambda kv: -kv[1])
            print(f"  CPU {r['cpu_s']:.1f} s = {cpu_ms:.1f} ms per step ({100 * r['cpu_s'] / r['wall_s']:.0f}% of one "
                  "core); by node, ms per step: " + ", ".join(f"{k} {1e3 * c / n:.2f}" for k, c in by_node))
            print("    by thread, ms per step: "
                  + ", ".join(f"{k} {1e3 * c / n:.2f}" for k, c in roles if 1e3 * c / n >= 0.05))
            print(f"  CPU ceiling of an idle 2-core machine at this CPU per step: {2000 / cpu_ms:.0f} steps/s",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
