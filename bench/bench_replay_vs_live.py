#!/usr/bin/env python3
"""Replay vs live: does a calibration re-run from a recorded bag reach the live graph's error?

1. Live: the ``finger_stand_in`` graph (a twin at hidden parameters plays the robot) runs one
   trial per training excitation of the finger, records the bag, and calibrates on them through
   ``/vid2sid/propose`` (``--iterations`` N, applied).
2. Replay: a fresh ``replay_finger`` graph (what ``replay_bag.launch.py`` starts) replays that
   bag; the tracker re-tracks its frames, and ``/vid2sid/propose`` runs the same N iterations
   from the same nominal start.

Prints the real trajectories' largest difference (px), both final training errors (px) and
their relative difference; exit 1 when the replay's error is not within ``--tolerance``
(default 10 %) of the live one. In-process (``vid2sid bringup``'s nodes, one executor each);
set ``ROS_DOMAIN_ID`` and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` first.

    python bench/bench_replay_vs_live.py --iterations 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def live_then_replay(out: Path, iterations: int, trial_timeout: float = 120.0) -> dict:
    """Run both graphs in ``out``; returns ``{"live_px", "replay_px", "trials", "max_traj_diff_px",
    "live_message", "replay_message"}`` (errors: training mean absolute keypoint error, px)."""
    import numpy as np
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.bringup import Bringup
    from vid2sid_ros.nodes.common import trajectory_from_msg
    from vid2sid_ros.nodes.graph_client import GraphClient

    context = Context()
    rclpy.init(context=context)
    bag = out / "bag"
    try:
        live = Bringup("finger_stand_in", arguments={"bag_path": str(bag), "run_dir": str(out / "live")},
                       context=context).start()
        client = GraphClient(context, "bench_replay_vs_live")
        try:
            live["calibrator_node"].set_parameters([Parameter("trials", value="all")])
            exc = live["excitation_node"]
            from vid2sid_ros.nodes.common import resolve_rig

            rig = resolve_rig(exc.get_parameter("rig").value)
            trials = []
            for i in range(len(rig.excitations.get("train", ())) or 1):
                exc.set_parameters([Parameter("excitation", value=f"train:{i}")])
                trial = client.start_trial()
                client.wait_trajectories(trial, trial_timeout)
                trials.append(trial)
            live_real = {t: trajectory_from_msg(client.real[t]) for t in trials}
            r_live = client.propose(apply=True, iterations=iterations)
            client.stop_recorder(timeout=60.0)
        finally:
            live.shutdown()
        client.real.clear()
        client.sim.clear()
        replay = Bringup("replay_finger", arguments={"replay_bag": str(bag), "run_dir": str(out / "replay")},
                         overrides={"recorder_node": {"enabled": False}}, context=context).start()
        try:
            replay["calibrator_node"].set_parameters([Parameter("trials", value="all")])
            for t in trials:
                client.wait_trajectories(t, trial_timeout)
            replay_real = {t: trajectory_from_msg(client.real[t]) for t in trials}
            r_replay = client.propose(apply=True, iterations=iterations)
        finally:
            replay.shutdown()
        client.close()
    finally:
        rclpy.try_shutdown(context=context)
    diff = max(float(np.nanmax(np.abs(np.where(live_real[t].valid[..., None], live_real[t].keypoints, 0.0)
                                      - np.where(replay_real[t].valid[..., None], replay_real[t].keypoints, 0.0))))
               for t in trials)
    return {"live_px": float(r_live.error_px), "replay_px": float(r_replay.error_px), "trials": trials,
            "max_traj_diff_px": diff, "live_accepted": bool(r_live.accepted),
            "replay_accepted": bool(r_replay.accepted), "live_message": r_live.message,
            "replay_message": r_replay.message}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=10, help="calibration iterations of each graph")
    ap.add_argument("--tolerance", type=float, default=0.10, help="largest relative error difference (fraction)")
    ap.add_argument("--out", default="", help="directory for the bag and the sessions (default: a temporary one)")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vid2sid_replay_vs_live_") as tmp:
        out = Path(a.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        r = live_then_replay(out, a.iterations)
    rel = abs(r["replay_px"] - r["live_px"]) / max(r["live_px"], 1e-12)
    print(f"trials: {', '.join(r['trials'])}; real trajectories live vs replayed: largest difference "
          f"{r['max_traj_diff_px']:.3g} px")
    print(f"live   ({a.iterations} iterations): {r['live_px']:.4f} px  accepted={r['live_accepted']}")
    print(f"replay ({a.iterations} iterations): {r['replay_px']:.4f} px  accepted={r['replay_accepted']}")
    print(f"relative difference: {100 * rel:.2f} % (tolerance {100 * a.tolerance:g} %); {time.monotonic() - t0:.0f} s")
    ok = r["live_accepted"] and r["replay_accepted"] and rel <= a.tolerance
    if not ok:
        print("live:   " + r["live_message"])
        print("replay: " + r["replay_message"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
