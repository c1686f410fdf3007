"""The one table of the vid2sid ROS graphs: which nodes, executables, config files, remappings.

Both the launch files (``launch/*.launch.py``, for ROS 2 installs) and the in-process
bringup (``vid2sid bringup``, where ``launch`` is unavailable) read :data:`GRAPHS`, so a
graph is defined once. This module imports no rclpy.

Topics and services (names are the graph's defaults; every node takes remappings):

=============================== ======================================= ==========================
name                            type                                    from -> to
=============================== ======================================= ==========================
/vid2sid/excitation/command     vid2sid_ros/ExcitationCommand           excitation -> twin, tracker, calibrator
/vid2sid/real/command           vid2sid_ros/ExcitationCommand           excitation -> rig driver (same stream)
/vid2sid/excitation/trial_end   vid2sid_ros/ExcitationCommand           excitation -> all (step = T, no values)
/vid2sid/real/image_raw         sensor_msgs/Image                       camera | stand-in rig | bag replay -> tracker
/vid2sid/sim/image_raw          sensor_msgs/Image                       twin -> tracker
/vid2sid/{real,sim}/camera_info sensor_msgs/CameraInfo                  beside each image topic, same stamp
/vid2sid/{real,sim}/keypoints   vid2sid_ros/Keypoints                   tracker
/vid2sid/{real,sim}/image_markers visualization_msgs/ImageMarker        tracker (Foxglove/RViz image annotations)
/vid2sid/{real,sim}/trajectory  vid2sid_ros/Trajectory                  tracker -> calibrator
/vid2sid/parameter_update       vid2sid_ros/ParameterUpdate             calibrator
/vid2sid/propose                vid2sid_ros/srv/Propose                 calibrator
/vid2sid/sim/rollout            vid2sid_ros/srv/Rollout                 twin
/vid2sid/excitation/start|stop  std_srvs/srv/Trigger                    excitation
/vid2sid/recorder/stop          std_srvs/srv/Trigger                    recorder (closes the bag)
=============================== ======================================= ==========================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["NodeSpec", "GraphArgument", "GRAPHS", "GRAPH_ARGUMENTS", "TOPICS", "find_config_dir", "graph_nodes",
           "RIG_NODES", "argument_targets", "argument_settings", "UnknownGraphError"]

PACKAGE = "vid2sid_ros"

#: topic and service names of the graph, relative (REP 135 / ROS 2 name resolution): they resolve
#: into the node's namespace, so ``-r __ns:=/robot1`` (the launch files' and the bringup's
#: ``namespace`` argument) moves the whole graph to ``/robot1/vid2sid/...``; in the root namespace
#: they are ``/vid2sid/...``
TOPICS = {
    "excitation": "vid2sid/excitation/command",
    "rig_command": "vid2sid/real/command",
    "trial_end": "vid2sid/excitation/trial_end",
    "real_image": "vid2sid/real/image_raw",
    "sim_image": "vid2sid/sim/image_raw",
    "sim_rollout_image": "vid2sid/sim/rollout/image_raw",
    "sim_rollout_camera_info": "vid2sid/sim/rollout/camera_info",
    "real_camera_info": "vid2sid/real/camera_info",
    "sim_camera_info": "vid2sid/sim/camera_info",
    "real_image_markers": "vid2sid/real/image_markers",
    "sim_image_markers": "vid2sid/sim/image_markers",
    "real_keypoints": "vid2sid/real/keypoints",
    "sim_keypoints": "vid2sid/sim/keypoints",
    "real_trajectory": "vid2sid/real/trajectory",
    "sim_trajectory": "vid2sid/sim/trajectory",
    "parameter_update": "vid2sid/parameter_update",
    "propose": "vid2sid/propose",
    "rollout": "vid2sid/sim/rollout",
    "start": "vid2sid/excitation/start",
    "stop": "vid2sid/excitation/stop",
    "recorder_stop": "vid2sid/recorder/stop",
}


class UnknownGraphError(KeyError):
    """The graph name is not in :data:`GRAPHS`; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class NodeSpec:
    """One node of a graph.

    Attributes:
        name: node name; also the section of the params files (``name: ros__parameters:``).
        executable: ``ros2 run vid2sid_ros <executable>``; the module is
            ``vid2sid_ros.nodes.<executable>`` with ``main(args=None)`` and ``make_node(**kw)``.
        params_files: config file names under ``config/`` (later files override earlier ones).
        remappings: ``(from, to)`` topic remappings.
        package: ROS package of the executable.
    """

    name: str
    executable: str
    params_files: tuple[str, ...]
    remappings: tuple[tuple[str, str], ...] = ()
    package: str = PACKAGE

    @property
    def module(self) -> str:
        return f"{PACKAGE}.nodes.{self.executable}"


@dataclass(frozen=True)
class GraphArgument:
    """A launch argument / bringup option that sets one node parameter when given (non-empty).

    Attributes:
        name: argument name (``ros2 launch ... bag_path:=...``; ``vid2sid bringup --arg bag_path=...``).
        node: node name whose parameter it sets.
        parameter: parameter name.
        description: shown by ``ros2 launch -s`` and ``vid2sid bringup --help``.
        also: further ``(node, parameter)`` pairs set to the same value (``run_dir`` also
            places the recorder's automatically named bags).
    """

    name: str
    node: str
    parameter: str
    description: str
    also: tuple[tuple[str, str], ...] = ()


def _core(cfg: str, *, real: NodeSpec | None) -> list[NodeSpec]:
    nodes = [real] if real is not None else []
    stand_in = real is not None and real.name == "stand_in_rig_node"
    nodes += [  # with a stand-in rig, a trial also waits for its subscription (config/stand_in.yaml)
        NodeSpec("excitation_node", "excitation_node", (cfg, "stand_in.yaml") if stand_in else (cfg,)),
        NodeSpec("sim_twin_node", "sim_twin_node", (cfg,)),
        NodeSpec("tracker_node", "tracker_node", (cfg,)),
        NodeSpec("calibrator_node", "calibrator_node", (cfg,)),
        NodeSpec("recorder_node", "recorder_node", (cfg,)),
    ]
    return nodes


#: graph name -> nodes. ``*_stand_in`` graphs replace the camera by a second twin at hidden
#: parameters (tests, demos); ``replay_*`` graphs replace camera and rig by a recorded bag.
GRAPHS: dict[str, list[NodeSpec]] = {
    "finger": _core("finger.yaml", real=NodeSpec("camera_node", "camera_node", ("finger.yaml",))),
    "finger_stand_in": _core("finger.yaml", real=NodeSpec("stand_in_rig_node", "stand_in_rig_node", ("finger.yaml",))),
    "tentacle": _core("tentacle_ros.yaml", real=NodeSpec("camera_node", "camera_node", ("tentacle_ros.yaml",))),
    "tentacle_stand_in": _core("tentacle_ros.yaml",
                               real=NodeSpec("stand_in_rig_node", "stand_in_rig_node", ("tentacle_ros.yaml",))),
    "replay_finger": [
        NodeSpec("bag_replay_node", "bag_replay_node", ("replay_finger.yaml",)),
        NodeSpec("sim_twin_node", "sim_twin_node", ("finger.yaml",)),
        NodeSpec("tracker_node", "tracker_node", ("finger.yaml",)),
        NodeSpec("calibrator_node", "calibrator_node", ("finger.yaml",)),
        NodeSpec("recorder_node", "recorder_node", ("finger.yaml", "replay_finger.yaml")),
    ],
}

#: nodes that build a rig (their ``rig`` / ``rig_config`` parameters); a GraphArgument with
#: ``node="*"`` sets its parameter on every one of them in the graph
RIG_NODES = frozenset({"excitation_node", "sim_twin_node", "tracker_node", "calibrator_node", "stand_in_rig_node"})

#: graph name -> launch arguments (the same names in the launch files and in the bringup)
GRAPH_ARGUMENTS: dict[str, list[GraphArgument]] = {}
for _g, _nodes in GRAPHS.items():
    _names = {n.name for n in _nodes}
    _args = [GraphArgument("bag_path", "recorder_node", "bag_path",
                           "directory of the rosbag2 (MCAP) bag to record; empty = run_dir/bag_<time>")]
    _args.append(GraphArgument("run_dir", "calibrator_node", "run_dir",
                               "directory for the calibration sessions (iterations.jsonl, results, report) and the "
                               "automatically named bags; empty = the config's",
                               also=(("recorder_node", "output_dir"),)))
    if _names & RIG_NODES:
        _args.append(GraphArgument("rig_config", "*", "rig_config",
                                   "rig config file (RIG.yaml) every rig-building node uses instead of its 'rig'"))
    if "camera_node" in _names:
        _args.append(GraphArgument("camera_source", "camera_node", "source",
                                   "camera: device index (\"0\"), video file path or stream URL"))
    if "bag_replay_node" in _names:
        _args.append(GraphArgument("replay_bag", "bag_replay_node", "bag_path",
                                   "recorded bag of a real trial to replay instead of the camera and rig"))
    GRAPH_ARGUMENTS[_g] = _args


def graph_nodes(name: str) -> list[NodeSpec]:
    """Nodes of graph ``name``.

    Raises:
        UnknownGraphError: listing the valid graph names.
    """
    if name not in GRAPHS:
        raise UnknownGraphError(f"unknown graph {name!r}; valid graphs: {', '.join(GRAPHS)}")
    return list(GRAPHS[name])


def find_config_dir() -> Path:
    """The package's ``config/`` directory.

    Looked up by :func:`vid2sid_ros.share.find_share_path`: the source checkout's
    ``config/``, then ``share/vid2sid_ros/config`` under ``AMENT_PREFIX_PATH`` and ``sys.prefix``.

    Raises:
        FileNotFoundError: listing the places searched.
    """
    from ..share import find_share_path

    return find_share_path("config", "finger.yaml")


def argument_settings(argument: GraphArgument, graph: str) -> list[tuple[str, str]]:
    """Every ``(node, parameter)`` an argument sets in ``graph``: its parameter on
    :func:`argument_targets`, then its ``also`` pairs whose node is in the graph."""
    names = {n.name for n in graph_nodes(graph)}
    return ([(n, argument.parameter) for n in argument_targets(argument, graph)]
            + [(n, p) for n, p in argument.also if n in names])


def argument_targets(argument: GraphArgument, graph: str) -> list[str]:
    """Node names an argument sets its parameter on in ``graph`` (``node="*"``: every rig node)."""
    names = [n.name for n in graph_nodes(graph)]
    if argument.node == "*":
        return [n for n in names if n in RIG_NODES]
    return [argument.node] if argument.node in names else []

