"""Re-run a calibration offline: a recorded real trial replaces the camera and the rig.

    ros2 launch vid2sid_ros replay_bag.launch.py replay_bag:=runs/bag_20260101_120000

The bag's camera frames and commands are republished with their recorded timing; the
twin re-runs the commands in lockstep. Nodes and params files (config/finger.yaml, then
config/replay_finger.yaml) come from the graph "replay_finger" of
vid2sid_ros.nodes.graph.GRAPHS (also run by `vid2sid bringup replay_finger`).
"""

from vid2sid_ros.nodes.launch_support import generate_launch_description as _generate

GRAPH = "replay_finger"


def generate_launch_description():
    return _generate(GRAPH)
