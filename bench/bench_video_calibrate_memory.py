"""Peak memory of ``vid2sid track`` and ``vid2sid calibrate`` on a long high-resolution video trial.

Writes a user rig (a one-link MJCF arm with a red marker on its tip, swung by a 20 s chirp),
renders the twin's motion at a small size (``--render-width`` px), scales each frame up to
WIDTHxHEIGHT into an mp4v clip of SECONDS at 30 fps (streamed to the encoder), then writes the
rig config whose real trial is that clip (``trials: [{source: {video: CLIP}}]``, camera
declared at WIDTHxHEIGHT) and runs, each in its own fresh process:

* ``vid2sid track CLIP --rig RIG.yaml --excitation swing`` (the clip tracked into a trial file);
* ``vid2sid calibrate RIG.yaml`` (the video trial loaded and tracked inside calibrate, the
  identifiability check, the diagnosis, the twin rendered for the report's overlay next to
  the clip's footage, the report written), with ``--tracker-bias`` also the twin filmed and
  tracked like the robot (``calibration.tracker_bias: true``).

Each process's peak resident memory is its own ``ru_maxrss`` (``os.wait4``), in MiB.
``--code DIR`` runs another checkout's ``vid2sid_ros`` (to compare before/after).

Usage::

    python bench/bench_video_calibrate_memory.py --seconds 20 --width 3840 --height 2160 [--tracker-bias]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FPS = 30.0

sys.path.insert(0, str(REPO / "test"))

from helpers import one_link_arm  # noqa: E402


def write_rig(folder: Path, width: int, height: int, seconds: float, video: str | None,
              tracker_bias: bool = False) -> Path:
    """The rig config (``rig.yaml`` + ``arm.xml`` in ``folder``, ``test/helpers/one_link_arm.py``); its trial is
    ``video`` or a sim2sim stand-in."""
    source = f"{{video: {video}}}" if video else "{sim2sim: {seed: 1}}"
    text = one_link_arm.rig_text(
        name="arm", source=source, width=width, height=height, fovy=45, look_x=0.15, marker_radius=0.03,
        excitation=f"kind: chirp, amplitude: 0.3, f0: 0.3, f1: 1.5, duration: {seconds:g}, rate: {FPS:g}",
        trial_extra=", split: {train_fraction: 0.75}")
    text += "calibration: {iterations: 2, rollout_budget: 12" + (", tracker_bias: true" if tracker_bias else "") + "}\n"
    return one_link_arm.write_rig(folder, text, rig_file="rig.yaml" if video else f"render_{width}x{height}.yaml",
                                  rgba="0.2 0.3 0.8 1")


def make_clip(folder: Path, path: Path, seconds: float, width: int, height: int, render_width: int) -> Path:
    """The twin's motion rendered at ``render_width`` px wide, scaled to ``width`` x ``height`` (mp4v)."""
    import cv2
    sys.path.insert(0, str(REPO))
    from vid2sid_ros.rigs import load_rig

    rh = max(2, int(round(render_width * height / width)) // 2 * 2)
    rig = load_rig(write_rig(folder, render_width, rh, seconds, None))
    twin = rig.make_twin()
    truth = rig.parameters.complete({"damping": 0.08})  # the stand-in robot's hidden damping
    twin.set_parameters(truth)
    try:
        frames = twin.rollout(rig.named_excitations["swing"], render=True).frames  # the whole chirp, one take
    finally:
        twin.close()
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (width, height))
    for f in frames:
        writer.write(cv2.cvtColor(cv2.resize(f, (width, height), interpolation=cv2.INTER_LINEAR), cv2.COLOR_RGB2BGR))
    writer.release()
    return path


def run_measured(cmd: list[str], code: Path, cwd: Path) -> tuple[int, float, int, str]:
    """(peak RSS in bytes of this one process, wall time in s, exit code, stderr tail) of ``cmd``."""
    env = dict(os.environ, PYTHONPATH=str(code))
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    err_path = cwd / f"stderr_{int(time.time() * 1e6)}.txt"
    t0 = time.perf_counter()
    with open(err_path, "wb") as err:
        p = subprocess.Popen(cmd, env=env, cwd=str(cwd), stdout=subprocess.DEVNULL, stderr=err,
                             stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage (not the largest child so far)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    return int(usage.ru_maxrss) * 1024, wall, p.returncode, err_path.read_text(errors="replace")[-800:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--width", type=int, default=3840)
    ap.add_argument("--height", type=int, default=2160)
    ap.add_argument("--render-width", type=int, default=384, help="width the twin is rendered at before scaling (px)")
    ap.add_argument("--tracker-bias", action="store_true", help="also film and track the twin at the result")
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose vid2sid_ros runs (default this one)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--only", choices=["track", "calibrate"], default=None, help="run only this command")
    a = ap.parse_args(argv)
    work = (a.work or Path(tempfile.mkdtemp(prefix="vid2sid_video_cal_mem_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    clip = work / f"clip_{a.width}x{a.height}_{a.seconds:g}s.mp4"
    if not clip.exists():
        make_clip(work, clip, a.seconds, a.width, a.height, a.render_width)
    rig = write_rig(work, a.width, a.height, a.seconds, str(clip), tracker_bias=a.tracker_bias)
    py = [sys.executable, "-m", "vid2sid_ros.cli"]
    runs = [("track", py + ["track", str(clip), "--rig", str(rig), "--excitation", "swing",
                            "--out", str(work / "trial.json")]),
            ("calibrate", py + ["calibrate", str(rig), "--out", str(work / "run"), "--quiet"])]
    n = int(round(a.seconds * FPS))
    size = clip.stat().st_size / 1e6
    worst = 0
    for name, cmd in runs:
        if a.only and name != a.only:
            continue
        rss, wall, rc, err = run_measured(cmd, a.code, work)
        if rc != 0:
            print(f"vid2sid {name} exited {rc}:\n{err}", file=sys.stderr)
            worst = 1
        print(f"vid2sid {name}, {n} frames of {a.width}x{a.height} ({a.seconds:g} s at {FPS:g} fps, {size:.1f} MB "
              f"file{', tracker bias' if a.tracker_bias and name == 'calibrate' else ''}) from {a.code}: "
              f"peak RSS {rss / 2**20:.0f} MiB, {wall:.1f} s, exit {rc}", flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
