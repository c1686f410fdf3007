"""What the launch files launch, computed from :data:`~vid2sid_ros.nodes.graph.GRAPHS`.

``launch/*.launch.py`` call :func:`generate_launch_description` (which imports the ROS 2
``launch`` / ``launch_ros`` packages, present on a ROS 2 install only). The node list
itself comes from :func:`launch_plan`, a pure function also used by the tests and by
the in-process bringup's consistency check, so ``ros2 launch`` and ``vid2sid bringup``
start the same executables with the same names, params files and remappings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from .graph import GRAPH_ARGUMENTS, GRAPHS, argument_settings, graph_nodes

__all__ = ["NodeLaunch", "launch_plan", "generate_launch_description", "NAMESPACE_DESCRIPTION"]

NAMESPACE_DESCRIPTION = ("namespace of the whole graph, e.g. robot1: nodes, topics and services move to "
                         "/robot1/... (two robots on one ROS graph); empty = the root namespace")


@dataclass(frozen=True)
class NodeLaunch:
    """Arguments of one ``launch_ros.actions.Node``."""

    package: str
    executable: str
    name: str
    parameters: tuple[Any, ...]  # params file paths, then an overrides dict if any
    remappings: tuple[tuple[str, str], ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict)


def launch_plan(graph: str, config_dir: str, arguments: Mapping[str, str] | None = None) -> list[NodeLaunch]:
    """The nodes to launch for ``graph``.

    Args:
        graph: a :data:`GRAPHS` name.
        config_dir: the package's installed ``config`` directory.
        arguments: launch argument values ``{name: value}``; empty values are not passed.

    Raises:
        UnknownGraphError, KeyError: unknown graph or argument.
    """
    known = {a.name: a for a in GRAPH_ARGUMENTS[graph]} if graph in GRAPHS else {}
    args = dict(arguments or {})
    unknown = [k for k in args if k not in known]
    if unknown:
        raise KeyError(f"graph {graph!r} has no argument(s) {unknown}; arguments: {', '.join(known)}")
    plan = []
    for spec in graph_nodes(graph):
        over = {param: args[a.name] for a in known.values() for node, param in argument_settings(a, graph)
                if node == spec.name and args.get(a.name)}
        params: tuple[Any, ...] = tuple(os.path.join(config_dir, f) for f in spec.params_files)
        if over:
            params += (over,)
        plan.append(NodeLaunch(spec.package, spec.executable, spec.name, params, spec.remappings, over))
    return plan


def generate_launch_description(graph: str, *, stand_in_graph: str | None = None):
    """LaunchDescription of ``graph`` (ROS 2 ``launch`` required).

    Declares every argument of the graph(s) (``ros2 launch vid2sid_ros <file> -s`` lists
    them), a ``namespace`` argument (empty = the root namespace; every node, topic and
    service of the graph moves into it) and, when ``stand_in_graph`` is given, a ``stand_in``
    argument that swaps the camera for the stand-in rig.
    """
    from ament_index_python.packages import get_package_share_directory
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    graphs = [graph] + ([stand_in_graph] if stand_in_graph else [])
    declared: dict[str, str] = {}
    for g in graphs:
        for a in GRAPH_ARGUMENTS[g]:
            declared.setdefault(a.name, a.description)

    def _nodes(context, *_args, **_kwargs):
        chosen = graph
        if stand_in_graph and LaunchConfiguration("stand_in").perform(context).strip().lower() in ("true", "1", "yes"):
            chosen = stand_in_graph
        config_dir = os.path.join(get_package_share_directory("vid2sid_ros"), "config")
        values = {a.name: LaunchConfiguration(a.name).perform(context) for a in GRAPH_ARGUMENTS[chosen]}
        namespace = LaunchConfiguration("namespace").perform(context).strip()
        return [Node(package=n.package, executable=n.executable, name=n.name, namespace=namespace,
                     parameters=list(n.parameters), remappings=list(n.remappings), output="screen",
                     emulate_tty=True)
                for n in launch_plan(chosen, config_dir, values)]

    actions = [DeclareLaunchArgument(name, default_value="", description=desc) for name, desc in declared.items()]
    actions.append(DeclareLaunchArgument(
        "namespace", default_value="", description=NAMESPACE_DESCRIPTION))
    if stand_in_graph:
        actions.append(DeclareLaunchArgument(
            "stand_in", default_value="false",
            description="true: a twin at hidden parameters plays the robot (no camera, no hardware)"))
    actions.append(OpaqueFunction(function=_nodes))
    return LaunchDescription(actions)
