"""In-process bringup: every node of a graph in one process, on one MultiThreadedExecutor.

PyPI has no ROS 2 ``launch``, so where ``ros2 launch vid2sid_ros calibrate_finger.launch.py``
is unavailable, ``vid2sid bringup finger`` runs the same nodes (the same
:data:`~vid2sid_ros.nodes.graph.GRAPHS` table the launch files read) with the same
``config/*.yaml`` files, passed to each node as ``--params-file`` arguments exactly as
``launch_ros`` does. Nodes still talk over DDS (topics, services, the parameter services),
so an external ``ros2`` tool or a client in another process sees the same graph.

:class:`Bringup` is also what the end-to-end tests use (``start()`` spins in a
background thread; ``shutdown()`` destroys the nodes, which closes the bag).
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Any, Mapping

import rclpy
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from .graph import GRAPH_ARGUMENTS, GRAPHS, NodeSpec, find_config_dir, graph_nodes

__all__ = ["Bringup", "graph_for_config", "node_cli_args"]


def node_cli_args(spec: NodeSpec, config_dir: Path) -> list[str]:
    """``--ros-args`` of one node: its params files and remappings (what launch_ros passes).

    Raises:
        FileNotFoundError: a params file of the spec is missing.
    """
    args = ["--ros-args"]
    for f in spec.params_files:
        path = config_dir / f
        if not path.is_file():
            raise FileNotFoundError(f"node {spec.name}: params file {path} not found")
        args += ["--params-file", str(path)]
    for src, dst in spec.remappings:
        args += ["-r", f"{src}:={dst}"]
    return args


def graph_for_config(name_or_path: str) -> str:
    """Graph name for a graph name or a config file path (``config/finger.yaml`` -> ``finger``).

    Raises:
        KeyError: listing the valid graph names and config files.
    """
    if name_or_path in GRAPHS:
        return name_or_path
    stem = Path(name_or_path).name
    matches = [g for g, nodes in GRAPHS.items() if nodes and nodes[0].params_files[-1] == stem]
    if matches:
        return matches[0]
    files = sorted({n.params_files[-1] for nodes in GRAPHS.values() for n in nodes})
    raise KeyError(f"unknown graph or config {name_or_path!r}; graphs: {', '.join(GRAPHS)}; configs: {', '.join(files)}")


class Bringup:
    """Nodes of one graph on one executor (see module docstring).

    Args:
        graph: a name of :data:`GRAPHS` (``finger``, ``finger_stand_in``, ``replay_finger``...).
        arguments: launch arguments (``GRAPH_ARGUMENTS``) ``{name: value}``; empty values ignored.
        overrides: extra parameters ``{node name: {parameter: value}}`` (applied after the
            params files, like ``-p`` on the command line).
        config_dir: directory of the params files (default :func:`find_config_dir`).
        context: rclpy context (default: a new one, initialised here and shut down by
            :meth:`shutdown`).
        num_threads: executor threads (long service calls hold one each).
        exclude: node names of the graph not to start.

    Raises:
        UnknownGraphError, FileNotFoundError, KeyError (unknown argument or node name),
        and whatever a node raises while starting (bad parameter values...).
    """

    def __init__(self, graph: str, *, arguments: Mapping[str, str] | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None, config_dir: str | Path | None = None,
                 context: Context | None = None, num_threads: int = 8, exclude: tuple[str, ...] = ()) -> None:
        self.graph = graph
        self.specs = [s for s in graph_nodes(graph) if s.name not in exclude]
        self.config_dir = Path(config_dir) if config_dir is not None else find_config_dir()
        over: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (overrides or {}).items()}
        known_args = {a.name: a for a in GRAPH_ARGUMENTS[graph]}
        for name, value in (arguments or {}).items():
            if name not in known_args:
                raise KeyError(f"graph {graph!r} has no argument {name!r}; arguments: {', '.join(known_args)}")
            if value not in ("", None):
                a = known_args[name]
                over.setdefault(a.node, {})[a.parameter] = value
        names = {s.name for s in graph_nodes(graph)}
        unknown = [n for n in over if n not in names]
        if unknown:
            raise KeyError(f"graph {graph!r} has no node(s) {unknown}; nodes: {', '.join(sorted(names))}")
        self._own_context = context is None
        self.context = context if context is not None else Context()
        if self._own_context:
            rclpy.init(context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=num_threads, context=self.context)
        self.nodes: dict[str, Node] = {}
        try:
            for spec in self.specs:
                mod = importlib.import_module(spec.module)
                node = mod.make_node(context=self.context, cli_args=node_cli_args(spec, self.config_dir),
                                     parameter_overrides=[Parameter(k, value=v) for k, v in over.get(spec.name, {}).items()])
                self.nodes[spec.name] = node
                self.executor.add_node(node)
        except BaseException:
            self.shutdown()
            raise
        self._thread: threading.Thread | None = None

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def spin(self) -> None:
        """Spin until the context shuts down (or :meth:`shutdown`)."""
        try:
            self.executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass

    def start(self) -> "Bringup":
        """Spin in a background thread (tests, benchmarks, the CLI)."""
        self._thread = threading.Thread(target=self.spin, name=f"bringup_{self.graph}", daemon=True)
        self._thread.start()
        return self

    def drain(self, *, quiet_s: float = 0.5, timeout: float = 5.0) -> None:
        """Graceful stop, part 1: end a running trial, then keep spinning until the recorder
        has had nothing to write for ``quiet_s`` seconds (messages in flight reach the bag),
        at most ``timeout`` seconds. Needs the executor spinning (:meth:`start`)."""
        import time

        ex = self.nodes.get("excitation_node")
        if ex is not None and getattr(ex, "running", False):
            ex.stop_trial("stopped by shutdown")
        rec = self.nodes.get("recorder_node")
        deadline = time.monotonic() + timeout
        while rec is not None and rec.writer is not None and time.monotonic() < deadline:
            if time.monotonic() - rec.last_write >= quiet_s:
                break
            time.sleep(0.05)

    def shutdown(self) -> None:
        """Destroy every node (closing the bag), stop the executor and the context; idempotent."""
        for name in reversed(list(self.nodes)):
            node = self.nodes.pop(name)
            try:
                self.executor.remove_node(node)
            except Exception:  # noqa: BLE001 - best effort while tearing down
                pass
            node.destroy_node()
        try:
            self.executor.shutdown(timeout_sec=2.0)
        except Exception:  # noqa: BLE001
            pass
        if self._own_context:
            rclpy.try_shutdown(context=self.context)
        if getattr(self, "_thread", None) is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> "Bringup":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
