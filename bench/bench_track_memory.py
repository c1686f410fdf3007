"""Peak memory of ``vid2sid track`` on a long high-resolution clip.

Renders the finger twin, scales its frames to WIDTHxHEIGHT, loops them into a clip of
SECONDS at 30 fps (mp4v), then runs ``vid2sid track CLIP --rig finger`` in a fresh
process and reports its peak resident memory (``ru_maxrss`` of the child) and wall time.
``--code DIR`` runs another checkout's ``vid2sid_ros`` (to compare before/after).

Usage::

    python bench/bench_track_memory.py --seconds 60 [--width 1920 --height 1080] [--code /path/to/checkout]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_clip(path: Path, seconds: float, width: int, height: int, fps: float = 30.0) -> Path:
    """A clip of the finger twin's rendered motion at ``width`` x ``height`` px (streamed to the encoder)."""
    import cv2

    sys.path.insert(0, str(REPO))
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("finger")
    frames = rig.make_twin().rollout(rig.excitations["train"][0], render=True).frames
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    for k in range(int(round(seconds * fps))):
        f = cv2.resize(frames[k % len(frames)], (width, height), interpolation=cv2.INTER_LINEAR)
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def peak_rss_of_track(clip: Path, code: Path, out: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, wall time in s, exit code) of ``vid2sid track`` run from ``code``."""
    env = dict(os.environ, PYTHONPATH=str(code))
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "vid2sid_ros.cli", "track", str(clip), "--rig", "finger",
                          "--out", str(out)], env=env, cwd=str(code), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, err = p.communicate()
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: kB; the largest child so far
    if p.returncode not in (0, 1):
        print(err.decode()[-500:], file=sys.stderr)
    return rss, wall, p.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose vid2sid_ros runs (default this one)")
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="vid2sid_track_mem_"))
    work.mkdir(parents=True, exist_ok=True)
    clip = work / f"clip_{a.width}x{a.height}_{a.seconds:g}s.mp4"
    if not clip.exists():
        make_clip(clip, a.seconds, a.width, a.height)
    rss, wall, rc = peak_rss_of_track(clip, a.code, work / "traj.json")
    n = int(round(a.seconds * 30))
    print(f"vid2sid track, {n} frames of {a.width}x{a.height} ({a.seconds:g} s at 30 fps, {clip.stat().st_size / 1e6:.1f} "
          f"MB file) from {a.code}: peak RSS {rss / 2**20:.0f} MiB, {wall:.1f} s, exit {rc}")
    return 0 if rc in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
