"""Calibrate the PyElastica tentacle twin against the real soft tentacle (camera + rig driver).

    ros2 launch vid2sid_ros calibrate_tentacle.launch.py camera_source:=/dev/video0
    ros2 launch vid2sid_ros calibrate_tentacle.launch.py stand_in:=true   # no hardware

Nodes, executables and params files (config/tentacle_ros.yaml) come from the graphs
"tentacle" and "tentacle_stand_in" of vid2sid_ros.nodes.graph.GRAPHS (also run by
`vid2sid bringup tentacle`).
"""

from vid2sid_ros.nodes.launch_support import generate_launch_description as _generate

GRAPH = "tentacle"
STAND_IN_GRAPH = "tentacle_stand_in"


def generate_launch_description():
    return _generate(GRAPH, stand_in_graph=STAND_IN_GRAPH)
