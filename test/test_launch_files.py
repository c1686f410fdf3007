"""Launch files and the in-process bringup start the same nodes, executables and config files.

ROS 2 ``launch`` is not on PyPI, so the launch files are parsed with ``ast`` (not run):
each must define ``generate_launch_description`` and name its graph(s) of
``vid2sid_ros.nodes.graph.GRAPHS``; the node list is then checked through
``launch_plan`` (what the launch files pass to ``launch_ros.actions.Node``) against the
bringup's ``node_cli_args`` and against the files on disk.
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
            assert node.name in data and "ros__parameters" in data[node.name], f"{f} has no section {node.name}"
        # the bringup passes exactly these params files, in this order
        cli = node_cli_args(spec, cfg_dir)
        assert [cli[i + 1] for i, a in enumerate(cli) if a == "--params-file"] == list(node.parameters)


def test_launch_arguments_become_node_parameters():
    plan = launch_plan("replay_finger", "/cfg", {"replay_bag": "/bags/b1", "bag_path": "", "run_dir": "/r"})
    byname = {n.name: n for n in plan}
    assert byname["bag_replay_node"].parameters[-1] == {"bag_path": "/bags/b1"}
    assert byname["calibrator_node"].parameters[-1] == {"run_dir": "/r"}
    assert all(isinstance(p, str) for p in byname["recorder_node"].parameters)  # empty argument: not passed
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
            for key in section["ros__parameters"]:
                if key.startswith(("physics.", "nuisance.", "hidden.")):
                    continue  # declared from the rig's parameter spec
                assert key in declared[node], f"{cfg.name}: {node}.{key} is not a declared parameter"
