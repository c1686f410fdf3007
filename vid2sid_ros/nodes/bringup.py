"""In-process bringup: every node of a graph in one process, each on its own executor thread.

PyPI has no ROS 2 ``launch``, so where ``ros2 launch vid2sid_ros calibrate_finger.launch.py``
is unavailable, ``vid2sid bringup finger`` runs the same nodes (the same
:data:`~vid2sid_ros.nodes.graph.GRAPHS` table the launch files read) with the same
``config/*.yaml`` files, passed to each node as ``--params-file`` arguments exactly as
``launch_ros`` does. Nodes still talk over DDS (topics, services, the parameter services),
so an external ``ros2`` tool or a client in another process sees the same graph.

Each node spins on its own executor (:func:`~vid2sid_ros.nodes.common.make_executor`:
single-threaded unless the node's callbacks must run concurrently), in its own thread,
as if it were its own process: an rclpy executor pays for every entity of every node it
holds on each wake-up, so one shared executor for the whole graph costs ~3x the CPU per
callback and couples the nodes' latencies (the excitation timer waits behind image
callbacks). Heavy work (stepping, rendering, sensor noise, detection) runs on the nodes'
own worker threads, never on a spin thread.

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
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter

from .common import make_executor
from .graph import GRAPH_ARGUMENTS, GRAPHS, NodeSpec, argument_settings, argument_targets, find_config_dir, \
    graph_nodes

__all__ = ["Bringup", "graph_for_config", "node_cli_args", "namespace_of"]


def namespace_of(name: str) -> str:
    """A namespace argument as a node namespace: ``""`` -> ``"/"``, ``robot1`` -> ``"/robot1"``.

    Raises:
        ValueError: not a valid ROS namespace (the message names it and the rule).
    """
    from rclpy.validate_namespace import validate_namespace

    ns = "/" + str(name).strip().strip("/")
    try:
        validate_namespace(ns)
    except Exception as err:  # InvalidNamespaceException
        raise ValueError(f"namespace {name!r} is not a valid ROS namespace (letters, digits and '_' "
                         f"separated by '/', not starting with a digit): {err}") from None
    return ns


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
    """Nodes of one graph in one process, one executor each (see module docstring).

    Args:
        graph: a name of :data:`GRAPHS` (``finger``, ``finger_stand_in``, ``replay_finger``...).
        arguments: launch arguments (``GRAPH_ARGUMENTS``) ``{name: value}``; empty values ignored.
        overrides: extra parameters ``{node name: {parameter: value}}`` (applied after the
            params files, like ``-p`` on the command line).
        config_dir: directory of the params files (default :func:`find_config_dir`).
        context: rclpy context (default: a new one, initialised here and shut down by
            :meth:`shutdown`).
        num_threads: threads of each multi-threaded node executor (nodes whose callbacks
            block, e.g. the calibrator's /vid2sid/propose; at least 2).
        exclude: node names of the graph not to start.

    Raises:
        UnknownGraphError, FileNotFoundError, KeyError (unknown argument or node name),
        and whatever a node raises while starting (bad parameter values...).
    """

    def __init__(self, graph: str, *, arguments: Mapping[str, str] | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None, config_dir: str | Path | None = None,
                 context: Context | None = None, num_threads: int = 8, exclude: tuple[str, ...] = (),
                 namespace: str = "") -> None:
        self.graph = graph
        self.namespace = namespace_of(namespace)
        self.specs = [s for s in graph_nodes(graph) if s.name not in exclude]
        self.config_dir = Path(config_dir) if config_dir is not None else find_config_dir()
        over: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (overrides or {}).items()}
        known_args = {a.name: a for a in GRAPH_ARGUMENTS[graph]}
        for name, value in (arguments or {}).items():
            if name not in known_args:
                raise KeyError(f"graph {graph!r} has no argument {name!r}; arguments: {', '.join(known_args)}")
            if value not in ("", None):
                for i, (node, parameter) in enumerate(argument_settings(known_args[name], graph)):
                    if i < len(argument_targets(known_args[name], graph)):
                        over.setdefault(node, {})[parameter] = value
                    else:  # a secondary target (``also``): an explicit override of that parameter wins
                        over.setdefault(node, {}).setdefault(parameter, value)
        names = {s.name for s in graph_nodes(graph)}
        unknown = [n for n in over if n not in names]
        if unknown:
            raise KeyError(f"graph {graph!r} has no node(s) {unknown}; nodes: {', '.join(sorted(names))}")
        self._own_context = context is None
        self.context = context if context is not None else Context()
        if self._own_context:
            rclpy.init(context=self.context)
        self.nodes: dict[str, Node] = {}
        self.executors: dict[str, Executor] = {}
        self._threads: list[threading.Thread] = []
        try:
            for spec in self.specs:
                mod = importlib.import_module(spec.module)
                node = mod.make_node(context=self.context, cli_args=node_cli_args(spec, self.config_dir),
                                     namespace=self.namespace,
                                     parameter_overrides=[Parameter(k, value=v) for k, v in over.get(spec.name, {}).items()])
                self.nodes[spec.name] = node
                self.executors[spec.name] = make_executor(node, context=self.context, max_threads=num_threads)
                self.executors[spec.name].add_node(node)
        except BaseException:
            self.shutdown()
            raise

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    @staticmethod
    def _spin(executor: Executor) -> None:
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass

    def start(self) -> "Bringup":
        """Spin every node's executor in a background thread (tests, benchmarks, the CLI)."""
        if not self._threads:
            for name, ex in self.executors.items():
                t = threading.Thread(target=self._spin, args=(ex,), name=f"spin_{name}", daemon=True)
                t.start()
                self._threads.append(t)
        return self

    def spin(self) -> None:
        """Spin until the context shuts down (or :meth:`shutdown`)."""
        self.start()
        for t in list(self._threads):
            t.join()

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
        """Destroy every node (closing the bag), stop the executors and the context; idempotent."""
        for name in reversed(list(self.nodes)):
            node = self.nodes.pop(name)
            ex = self.executors.get(name)
            try:
                if ex is not None:
                    ex.remove_node(node)
            except Exception:  # noqa: BLE001 - best effort while tearing down
                pass
            node.destroy_node()
        for ex in self.executors.values():
            try:
                ex.shutdown(timeout_sec=2.0)
            except Exception:  # noqa: BLE001
                pass
        self.executors.clear()
        if self._own_context:
            rclpy.try_shutdown(context=self.context)
        for t in getattr(self, "_threads", []):
            t.join(timeout=5.0)
        self._threads = []

    def __enter__(self) -> "Bringup":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
