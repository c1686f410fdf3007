"""Launch files and the in-process bringup start the same nodes, executables and config files.

ROS 2 ``launch`` is not on PyPI. Each launch file is parsed with ``ast`` (it must define
``generate_launch_description`` and name its graph(s) of ``vid2sid_ros.nodes.graph.GRAPHS``)
and also EXECUTED against small stand-ins of ``launch`` / ``launch_ros`` /
``ament_index_python`` that record the actions it builds: the declared arguments, and the
``launch_ros.actions.Node`` list its OpaqueFunction returns (default, ``stand_in:=true``,
arguments given) are checked against the graph table, the params files on disk and the
bringup's ``node_cli_args``.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from vid2sid_ros.nodes.graph import GRAPH_ARGUMENTS, GRAPHS, find_config_dir
from vid2sid_ros.nodes.launch_support import launch_plan

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch"
EXPECTED = {"calibrate_finger.launch.py": ("finger", "finger_stand_in"),
            "calibrate_tentacle.launch.py": ("tentacle", "tentacle_stand_in"),
            "replay_bag.launch.py": ("replay_finger",)}


def _constants(path: Path) -> tuple[dict[str, str], set[str], list[str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              for t in n.targets if isinstance(t, ast.Name)}
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    imports = [f"{n.module}:{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    return consts, funcs, imports


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_launch_file_names_its_graphs_from_the_one_table(fname):
    consts, funcs, imports = _constants(LAUNCH / fname)
    assert "generate_launch_description" in funcs
    assert "vid2sid_ros.nodes.launch_support:generate_launch_description" in imports
    graphs = tuple(consts[k] for k in ("GRAPH", "STAND_IN_GRAPH") if k in consts)
    assert graphs == EXPECTED[fname]
    assert all(g in GRAPHS for g in graphs)


def test_every_launch_file_is_expected():
    assert sorted(p.name for p in LAUNCH.glob("*.launch.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_plan_nodes_executables_and_configs_exist(graph):
    from vid2sid_ros.nodes.bringup import node_cli_args

    cfg_dir = find_config_dir()
    plan = launch_plan(graph, str(cfg_dir))
    assert [n.name for n in plan] == [s.name for s in GRAPHS[graph]]
    assert len({n.name for n in plan}) == len(plan)
    for node, spec in zip(plan, GRAPHS[graph]):
        mod = importlib.util.find_spec(f"vid2sid_ros.nodes.{node.executable}")
        assert mod is not None, f"no module for executable {node.executable}"
        src = Path(mod.origin).read_text()
        assert "def main(args=None)" in src and "def make_node(" in src
        for f in node.parameters:
            data = yaml.safe_load(Path(f).read_text())
            key = f"/**/{node.name}"  # any namespace (a bare node name only matches the root namespace)
            assert key in data and "ros__parameters" in data[key], f"{f} has no section {key}"
        # the bringup passes exactly these params files, in this order
        cli = node_cli_args(spec, cfg_dir)
        assert [cli[i + 1] for i, a in enumerate(cli) if a == "--params-file"] == list(node.parameters)


def test_launch_arguments_become_node_parameters():
    plan = launch_plan("replay_finger", "/cfg", {"replay_bag": "/bags/b1", "bag_path": "", "run_dir": "/r"})
    byname = {n.name: n for n in plan}
    assert byname["bag_replay_node"].parameters[-1] == {"bag_path": "/bags/b1"}
    assert byname["calibrator_node"].parameters[-1] == {"run_dir": "/r"}
    # empty bag_path: not passed; run_dir also places the recorder's automatically named bags
    assert byname["recorder_node"].parameters[-1] == {"output_dir": "/r"}
    with pytest.raises(KeyError, match="no argument"):
        launch_plan("finger", "/cfg", {"nope": "1"})
    assert {a.name for a in GRAPH_ARGUMENTS["finger"]} >= {"bag_path", "run_dir", "camera_source"}


def test_node_parameters_in_configs_are_declared():
    """Every key of a node's config section is a parameter the node declares (no silent typos)."""
    from vid2sid_ros.nodes import bag_replay_node, calibrator_node, camera_node, excitation_node, recorder_node
    from vid2sid_ros.nodes import sim_twin_node, stand_in_rig_node, tracker_node

    declared = {m.__name__.rsplit(".", 1)[1]: {p.name for p in m.PARAMS} for m in (
        bag_replay_node, calibrator_node, camera_node, excitation_node, recorder_node, sim_twin_node,
        stand_in_rig_node, tracker_node)}
    for cfg in sorted(find_config_dir().glob("*.yaml")):
        data = yaml.safe_load(cfg.read_text())
        if not isinstance(data, dict) or not all(isinstance(v, dict) and "ros__parameters" in v for v in data.values()):
            continue  # not a ROS params file
        for node, section in data.items():
            node = node.rsplit("/", 1)[-1]
            for key in section["ros__parameters"]:
                if key.startswith(("physics.", "nuisance.", "hidden.")):
                    continue  # declared from the rig's parameter spec
                assert key in declared[node], f"{cfg.name}: {node}.{key} is not a declared parameter"


# -- the launch files executed against stand-ins of ROS 2 `launch` / `launch_ros` -------------------------------
# (PyPI has no `launch`; these record what the launch file builds, with launch's semantics for
#  configurations: a LaunchConfiguration of an undeclared argument is an error, declared ones default.)

class _Action:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchDescription:
    def __init__(self, actions):
        self.actions = list(actions)


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        if self.name not in context.launch_configurations:
            raise LookupError(f"launch configuration '{self.name}' was never declared")
        return context.launch_configurations[self.name]


class _Context:
    def __init__(self, configurations):
        self.launch_configurations = dict(configurations)


@pytest.fixture
def fake_launch(monkeypatch):
    import sys
    import types

    share = ROOT  # a checkout has config/ and launch/ where an install has share/vid2sid_ros/...
    mods = {
        "launch": types.ModuleType("launch"),
        "launch.actions": types.ModuleType("launch.actions"),
        "launch.substitutions": types.ModuleType("launch.substitutions"),
        "launch_ros": types.ModuleType("launch_ros"),
        "launch_ros.actions": types.ModuleType("launch_ros.actions"),
        "ament_index_python": types.ModuleType("ament_index_python"),
        "ament_index_python.packages": types.ModuleType("ament_index_python.packages"),
    }
    mods["launch"].LaunchDescription = _LaunchDescription
    mods["launch.actions"].DeclareLaunchArgument = type("DeclareLaunchArgument", (_Action,), {})
    mods["launch.actions"].OpaqueFunction = type("OpaqueFunction", (_Action,), {})
    mods["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    mods["launch_ros.actions"].Node = type("Node", (_Action,), {})

    def get_package_share_directory(pkg):
        assert pkg == "vid2sid_ros", pkg
        return str(share)

    mods["ament_index_python.packages"].get_package_share_directory = get_package_share_directory
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return share


def _run_launch_file(fname, given=None):
    """Execute ``launch/<fname>`` like ``ros2 launch`` would: returns (declared defaults, Node kwargs list)."""
    import runpy

    ld = runpy.run_path(str(LAUNCH / fname))["generate_launch_description"]()
    declared = {a.args[0]: a.kwargs for a in ld.actions if type(a).__name__ == "DeclareLaunchArgument"}
    opaque = [a for a in ld.actions if type(a).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1 and len(ld.actions) == len(declared) + 1
    unknown = set(given or {}) - set(declared)
    assert not unknown, f"{fname}: not declared: {unknown}"  # ros2 launch would ignore them silently
    ctx = _Context({**{k: v["default_value"] for k, v in declared.items()}, **(given or {})})
    nodes = opaque[0].kwargs["function"](ctx)
    return declared, [n.kwargs for n in nodes]


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_launch_file_runs_and_builds_the_graph_table(fake_launch, fname):
    graphs = EXPECTED[fname]
    declared, nodes = _run_launch_file(fname)
    want_args = ({a.name for g in graphs for a in GRAPH_ARGUMENTS[g]} | {"namespace"}
                 | ({"stand_in"} if len(graphs) > 1 else set()))
    assert set(declared) == want_args
    assert all(v["description"] for v in declared.values())
    cfg_dir = fake_launch / "config"
    spec = GRAPHS[graphs[0]]
    assert [n["name"] for n in nodes] == [s.name for s in spec]
    for n, s in zip(nodes, spec):
        assert (n["package"], n["executable"]) == (s.package, s.executable)
        assert n["parameters"] == [str(cfg_dir / f) for f in s.params_files]  # empty arguments are not passed
        assert all(Path(p).is_file() for p in n["parameters"])
        assert n["remappings"] == list(s.remappings)
        assert (ROOT / "scripts" / s.executable).is_file(), f"no scripts/{s.executable} for ros2 run"
        assert n["namespace"] == ""  # the root namespace by default


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_namespace_argument_moves_every_node(fake_launch, fname):
    _, nodes = _run_launch_file(fname, {"namespace": "robot1"})
    assert nodes and {n["namespace"] for n in nodes} == {"robot1"}


@pytest.mark.parametrize("fname", sorted(f for f, g in EXPECTED.items() if len(g) > 1))
def test_launch_file_stand_in_and_arguments_reach_the_nodes(fake_launch, fname):
    stand_in = EXPECTED[fname][1]
    _, nodes = _run_launch_file(fname, {"stand_in": "true", "run_dir": "/runs/x", "bag_path": "/bags/y"})
    assert [n["name"] for n in nodes] == [s.name for s in GRAPHS[stand_in]]
    by = {n["name"]: n for n in nodes}
    assert by["calibrator_node"]["parameters"][-1] == {"run_dir": "/runs/x"}
    # run_dir also reaches the recorder (automatically named bags go there); bag_path is the explicit bag
    assert by["recorder_node"]["parameters"][-1] == {"bag_path": "/bags/y", "output_dir": "/runs/x"}
    assert all(isinstance(p, str) for p in by["tracker_node"]["parameters"])
    _, nodes = _run_launch_file(fname, {"stand_in": "false"})
    assert [n["name"] for n in nodes] == [s.name for s in GRAPHS[EXPECTED[fname][0]]]


def test_rig_config_argument_reaches_every_rig_node_only():
    from vid2sid_ros.nodes.graph import RIG_NODES
    from vid2sid_ros.nodes.launch_support import launch_plan

    plan = launch_plan("finger", "/cfg", {"rig_config": "/lab/my_finger.yaml"})
    got = {n.name: n.overrides.get("rig_config") for n in plan}
    assert {k for k, v in got.items() if v == "/lab/my_finger.yaml"} == RIG_NODES & set(got)
    assert got["camera_node"] is None and got["recorder_node"] is None
