"""calibrator_node reads the rig config as `vid2sid calibrate` does (the `nuisance:` block) and writes its
session directory only once the calibration's checks have passed.

In-process, one rclpy context of the test's own; the real trial is a toy stand-in made here and handed to
the node as its subscription callbacks would (``real`` / ``excitations``), so no topic traffic is needed.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

pytest.importorskip("rclpy")

from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial  # noqa: E402
from vid2sid_ros.sim.toy import make_rig  # noqa: E402

TRUTH = {"stiffness": 0.8, "damping": 0.05, "gain": 0.5}


def _node(ros, tmp_path, config_text: str):
    from rclpy.parameter import Parameter

    from vid2sid_ros.nodes.calibrator_node import CalibratorNode

    cfg = tmp_path / "rig.yaml"
    cfg.write_text(config_text)
    node = CalibratorNode(context=ros.context, parameter_overrides=[
        Parameter("rig_config", value=str(cfg)), Parameter("run_dir", value=str(tmp_path / "sessions")),
        Parameter("final_identifiability", value=False)])
    ros.nodes.append(node)
    return node


def _give_trial(node, trajectory, excitation, trial_id="t1") -> None:
    node.real[trial_id], node.excitations[trial_id] = trajectory, excitation
    node._trial_order.append(trial_id)


@pytest.mark.timeout(120)
def test_the_rig_configs_nuisance_block_reaches_the_calibrator_node(ros, tmp_path):
    """Regression: the node calibrated with the default switches whatever the config's nuisance: said."""
    from vid2sid_ros.srv import Propose

    node = _node(ros, tmp_path, "rig: toy\nnuisance: {latency: {bounds: [-0.02, 0.03]}}\n")
    real = make_sim2sim_trial(make_rig(), TRUTH, noise="none")
    _give_trial(node, real.train[0], real.train_excitations[0])
    resp = node._propose(Propose.Request(iterations=1, apply=False), Propose.Response())
    assert resp.accepted, resp.message
    (session,) = (tmp_path / "sessions").iterdir()
    lat = yaml.safe_load((session / "result.yaml").read_text())["nuisance"]["latency"]
    assert (lat["lower"], lat["upper"]) == (-0.02, 0.03)  # the config's bounds (default ±0.05 s)
    assert (session / "session_start.json").is_file()

    (tmp_path / "off").mkdir()
    off = _node(ros, tmp_path / "off", "rig: toy\nnuisance: {latency: false}\n")
    _give_trial(off, real.train[0], real.train_excitations[0])
    assert off._propose(Propose.Request(iterations=1, apply=False), Propose.Response()).accepted
    assert "latency" not in off.results[-1].values


def test_a_bad_nuisance_block_stops_the_node_naming_the_key(ros, tmp_path):
    """The rig config's schema refuses the value at load, before the node builds anything (one line: file, key,
    what was expected)."""
    from vid2sid_ros.rigs import RigConfigError

    with pytest.raises(RigConfigError, match=r"rig\.yaml:nuisance\.latency\.enabled: expected true or false, got "
                                             r"'maybe' \(string\)"):
        _node(ros, tmp_path, "rig: toy\nnuisance: {latency: {enabled: maybe}}\n")


@pytest.mark.timeout(60)
def test_a_refused_session_leaves_no_session_directory(ros, tmp_path):
    """Regression: session_start.json (and its directory) were written before the calibration's checks."""
    from vid2sid_ros.srv import Propose

    node = _node(ros, tmp_path, "rig: toy\n")
    real = make_sim2sim_trial(make_rig(), TRUTH, noise="none")
    renamed = dataclasses.replace(real.train[0], names=("elbow", "hand"))  # keypoints the twin does not have
    _give_trial(node, renamed, real.train_excitations[0])
    resp = node.serve(Propose.Request(iterations=1, apply=False), Propose.Response())
    assert not resp.accepted and "differ from the twin's" in resp.message, resp.message
    assert not (tmp_path / "sessions").exists()
