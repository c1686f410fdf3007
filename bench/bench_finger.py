#!/usr/bin/env python3
"""Throughput of the finger pipeline: physics, rendering, tracking, and a whole rollout.

Prints, for the shipped finger rig:
  * physics steps/s (raw ``mj_step``, and inside a rollout without rendering),
  * render fps at 320x240 and 640x480 (EGL/OSMesa offscreen),
  * marker-tracker fps on rendered frames at 320x240 and 640x480,
  * sensor-noise fps (default ``SensorNoiseModel``) at both sizes: a live stream frame by
    frame (``stream().apply``, what the stand-in rig node does) and a whole clip (``apply``),
  * rollout + render + track of a 5 s, 30 Hz excitation: time and real-time factor.

Each figure is the median of ``--repeats`` runs, as wall-clock time and as this
process's CPU time (the CPU figure is what the code costs; the wall figure also
counts waiting for a shared machine's cores). Targets (2 cores): rollout + render +
track of 5 s under 0.5 s; tracker above 2000 fps at 320x240.

Usage: python bench/bench_finger.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from vid2sid_ros.core.excitation import build_excitation  # noqa: E402
from vid2sid_ros.perception.markers import MarkerTracker  # noqa: E402
from vid2sid_ros.sim.camera_model import SensorNoiseModel  # noqa: E402
from vid2sid_ros.sim.mujoco_render import OffscreenRenderer, gl_backend  # noqa: E402
from vid2sid_ros.sim.registry import make_rig  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, float]:
    """Median (wall s, CPU s) of ``repeats`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n = args.repeats
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rig = make_rig("finger")  # imports the twin module, which sets the rendering environment defaults
    twin = rig.make_twin()
    print(f"finger pipeline benchmark  (cores: {os.cpu_count()}, load average at start: {load:.2f}, "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}, LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', '(unset)')})")
    ex5 = build_excitation({"kind": "multisine", "name": "bench_5s", "amplitude": 0.25, "offset": 0.3,
                            "frequencies": [0.5, 1.3, 2.1, 3.3], "duration": 5.0, "rate": 30.0, "seed": 1},
                           twin.actuator_names)
    T = ex5.num_steps

    # physics
    m, d = twin.model, twin.data
    m.opt.timestep = 1 / 30 / 17
    mujoco.mj_resetData(m, d)
    d.ctrl[:] = 0.3
    steps = 20000
    w, c = timed(lambda: mujoco.mj_step(m, d, steps), n)
    print(f"physics, raw mj_step:            {steps / w:10.0f} steps/s wall  {steps / c:10.0f} steps/s CPU")
    w, c = timed(lambda: twin.rollout(ex5), n)
    sub = 17 * T
    print(f"physics, rollout (no render):    {sub / w:10.0f} steps/s wall  {sub / c:10.0f} steps/s CPU"
          f"   ({T} commands x 17 substeps in {w * 1e3:.1f} ms)")

    # rendering and tracking at two sizes
    tracker = MarkerTracker.from_config(rig.tracker)
    for (W, H) in ((320, 240), (640, 480)):
        tw = rig.make_twin(width=W, height=H)
        res = tw.rollout(ex5, render=True)
        renderer = OffscreenRenderer(tw.model, W, H, "front")
        renderer.make_current()
        dd = mujoco.MjData(tw.model)
        mujoco.mj_forward(tw.model, dd)
        buf = np.empty((H, W, 3), np.uint8)
        frames = 100
        w, c = timed(lambda: [renderer.render(dd, out=buf) for _ in range(frames)], n)
        print(f"render {W}x{H}:                  {frames / w:10.0f} fps wall      {frames / c:10.0f} fps CPU"
              f"   (backend {gl_backend()})")
        renderer.close()
        w, c = timed(lambda: tracker.track(res.frames), n)
        traj = tracker.track(res.frames)
        err = np.nanmean(np.linalg.norm(traj.keypoints - res.trajectory.keypoints, axis=2))
        print(f"tracker {W}x{H}:                 {T / w:10.0f} fps wall      {T / c:10.0f} fps CPU"
              f"   (MAE vs ground truth {err:.3f} px, {100 * traj.valid.mean():.0f}% valid)")
        noise = SensorNoiseModel.default()
        stream, out = noise.stream(), np.empty_like(res.frames[0])
        w, c = timed(lambda: [stream.apply(f, out=out) for f in res.frames], n)
        print(f"sensor noise {W}x{H}, stream:     {T / w:10.0f} fps wall      {T / c:10.0f} fps CPU"
              f"   ({1e3 * c / T:.2f} ms CPU per frame)")
        w, c = timed(lambda: noise.apply(res.frames), n)
        noisy, _ = noise.apply(res.frames)
        traj = tracker.track(noisy)
        err = np.nanmean(np.linalg.norm(traj.keypoints - res.trajectory.keypoints, axis=2))
        print(f"sensor noise {W}x{H}, clip:       {T / w:10.0f} fps wall      {T / c:10.0f} fps CPU"
              f"   (tracker MAE on noisy frames {err:.3f} px)")
        tw.close()

    # whole pipeline
    def pipeline():
        r = twin.rollout(ex5, render=True)
        tracker.track(r.frames, time=r.trajectory.time)

    pipeline()  # warm up (GL context, shader compilation)
    w, c = timed(pipeline, n)
    print(f"rollout+render+track, 5 s @30 Hz at 320x240: {w:.3f} s wall ({ex5.duration / w:.1f}x real time), "
          f"{c:.3f} s CPU ({ex5.duration / c:.1f}x)   target < 0.5 s")
    twin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
