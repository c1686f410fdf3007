"""The rosidl-generated vid2sid_ros interfaces: import, round-trip over real DDS, errors.

Every message type is published and received over rclpy pub/sub (Fast DDS, loopback
only, this run's own ROS_DOMAIN_ID) and its field values are compared after the trip.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
NAN = float("nan")


def _header(sec: int = 12, nanosec: int = 345, frame_id: str = "camera"):
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id)


def make_excitation_command(step: int = 7):
    from vid2sid_ros.msg import ExcitationCommand

    return ExcitationCommand(
        header=_header(frame_id=""),
        trial_id="trial-042",
        step=step,
        period=0.01,
        actuator_names=["tendon_1", "tendon_2", "wrist"],
        values=[0.5, -1.0, 2.25e-3],
    )


def make_keypoints():
    from vid2sid_ros.msg import Keypoints

    return Keypoints(
        header=_header(),
        source="real",
        trial_id="trial-042",
        step=3,
        names=["base", "mid", "tip"],
        x=[10.5, 200.25, NAN],
        y=[20.0, 120.75, NAN],
        valid=[True, True, False],
    )


def make_trajectory(num_steps: int = 4, names=("a", "b")):
    from vid2sid_ros.msg import Trajectory

    k = len(names)
    return Trajectory(
        header=_header(),
        source="sim",
        trial_id="trial-042",
        keypoint_names=list(names),
        num_steps=num_steps,
        time=[0.02 * t for t in range(num_steps)],
        x=[100.0 + t + 0.5 * j for t in range(num_steps) for j in range(k)],
        y=[50.0 - t - 0.25 * j for t in range(num_steps) for j in range(k)],
        valid=[(t + j) % 3 != 0 for t in range(num_steps) for j in range(k)],
        dropped_frames=1,
        late_frames=2,
    )


def make_parameter_update():
    from vid2sid_ros.msg import ParameterUpdate

    return ParameterUpdate(
        header=_header(),
        iteration=5,
        proposer="reasoner",
        names=["joint_stiffness", "joint_damping"],
        values=[0.35, 0.012],
        units=["N*m/rad", "N*m*s/rad"],
        rationale="decay too slow in sim: raise damping",
        confidence=0.8,
        error_px=NAN,
        accepted=True,
    )


MESSAGE_FACTORIES = {
    "ExcitationCommand": make_excitation_command,
    "Keypoints": make_keypoints,
    "Trajectory": make_trajectory,
    "ParameterUpdate": make_parameter_update,
}


def _plain(value):
    """Message field -> comparable plain Python (arrays to lists, messages to dicts)."""
    if hasattr(value, "get_fields_and_field_types"):
        return {name: _plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("array", "ndarray"):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN; compare a marker instead
    return value


def assert_same_message(got, want):
    assert type(got) is type(want)
    assert _plain(got) == _plain(want)


def test_interfaces_import_from_the_checkout():
    """Dev route: the checkout's vid2sid_ros is imported, msg/srv come from the install."""
    import vid2sid_ros
    from vid2sid_ros import msg, srv
    from vid2sid_ros._interfaces import interfaces_available, require_interfaces

    assert Path(vid2sid_ros.__path__[0]).resolve() == (REPO_ROOT / "vid2sid_ros").resolve()
    assert interfaces_available()
    require_interfaces()
    for name in MESSAGE_FACTORIES:
        assert hasattr(msg, name)
    assert hasattr(srv, "Propose") and hasattr(srv, "Rollout")


def test_import_type_support_from_the_checkout():
    from rosidl_generator_py import import_type_support

    from vid2sid_ros.msg import Trajectory
    from vid2sid_ros.srv import Propose

    module = import_type_support("vid2sid_ros")
    assert module is not None
    assert Path(module.__file__).parent.name == "vid2sid_ros"
    # what rclpy does when it creates a publisher / service of these types
    Trajectory.__class__.__import_type_support__()
    Propose.__class__.__import_type_support__()
    assert Trajectory._TYPE_SUPPORT is not None
    assert Propose._TYPE_SUPPORT is not None


def test_fields_are_the_contract():
    """The field names and types other modules code against."""
    from vid2sid_ros.msg import ExcitationCommand, Keypoints, ParameterUpdate, Trajectory
    from vid2sid_ros.srv import Propose, Rollout

    assert ExcitationCommand.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "trial_id": "string", "step": "uint32", "period": "double",
        "actuator_names": "sequence<string>", "values": "sequence<double>"}
    assert Keypoints.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "source": "string", "trial_id": "string", "step": "uint32",
        "names": "sequence<string>", "x": "sequence<double>", "y": "sequence<double>",
        "valid": "sequence<boolean>"}
    assert Trajectory.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "source": "string", "trial_id": "string",
        "keypoint_names": "sequence<string>", "num_steps": "uint32", "time": "sequence<double>",
        "x": "sequence<double>", "y": "sequence<double>", "valid": "sequence<boolean>",
        "dropped_frames": "uint32", "late_frames": "uint32"}
    assert ParameterUpdate.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "iteration": "uint32", "proposer": "string",
        "names": "sequence<string>", "values": "sequence<double>", "units": "sequence<string>",
        "rationale": "string", "confidence": "double", "error_px": "double", "accepted": "boolean"}
    assert Propose.Request.get_fields_and_field_types() == {
        "proposer": "string", "trial_id": "string", "names": "sequence<string>", "apply": "boolean",
        "iterations": "uint32"}
    assert Propose.Response.get_fields_and_field_types() == {
        "accepted": "boolean", "names": "sequence<string>", "values": "sequence<double>",
        "units": "sequence<string>", "rationale": "string", "confidence": "double",
        "error_px": "double", "iteration": "uint32", "message": "string"}
    assert Rollout.Request.get_fields_and_field_types() == {
        "names": "sequence<string>", "values": "sequence<double>", "excitation": "string",
        "commands": "sequence<vid2sid_ros/ExcitationCommand>", "render": "boolean"}
    assert Rollout.Response.get_fields_and_field_types() == {
        "success": "boolean", "message": "string", "trajectory": "vid2sid_ros/Trajectory"}


@pytest.mark.parametrize("type_name", sorted(MESSAGE_FACTORIES))
def test_message_round_trip_over_dds(ros, type_name):
    """Publish one message of each type over real DDS and get the same values back."""
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy

    want = MESSAGE_FACTORIES[type_name]()
    topic = f"/vid2sid_test/{type_name.lower()}"
    qos = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
                     durability=QoSDurabilityPolicy.VOLATILE)
    pub_node = ros.node(f"pub_{type_name.lower()}")
    sub_node = ros.node(f"sub_{type_name.lower()}")
    received = []
    sub_node.create_subscription(type(want), topic, received.append, qos)
    publisher = pub_node.create_publisher(type(want), topic, qos)

    assert ros.spin_until(lambda: publisher.get_subscription_count() > 0, timeout=10), \
        "subscriber never matched the publisher"
    for _ in range(50):  # re-publish until it arrives (discovery may lag the match)
        publisher.publish(want)
        if ros.spin_until(lambda: bool(received), timeout=0.2):
            break
    assert received, f"no {type_name} received over DDS"
    got = received[0]
    assert got is not want
    assert_same_message(got, want)


def test_large_trajectory_round_trip(ros):
    """A realistic trial (600 steps x 3 keypoints) survives the trip bit for bit."""
    want = make_trajectory(num_steps=600, names=("base", "mid", "tip"))
    pub_node = ros.node("pub_big")
    received = []
    ros.node("sub_big").create_subscription(type(want), "/vid2sid_test/big", received.append, 10)
    publisher = pub_node.create_publisher(type(want), "/vid2sid_test/big", 10)
    assert ros.spin_until(lambda: publisher.get_subscription_count() > 0, timeout=10)
    for _ in range(50):
        publisher.publish(want)
        if ros.spin_until(lambda: bool(received), timeout=0.2):
            break
    assert received
    got = received[0]
    assert got.num_steps == 600 and len(got.x) == 600 * 3 and len(got.valid) == 600 * 3
    assert_same_message(got, want)


def _run_hidden_install(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` with the checkout on sys.path but no site-packages (no installed msg/srv)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=60)


def test_clear_error_when_interfaces_not_built():
    proc = _run_hidden_install(
        "import sys\n"
        "from vid2sid_ros._interfaces import require_interfaces, interfaces_available\n"
        "assert not interfaces_available()\n"
        "try:\n"
        "    require_interfaces()\n"
        "except RuntimeError as err:\n"
        "    print(err); sys.exit(3)\n")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    assert lines[0].startswith("vid2sid_ros interfaces are not built: run `make setup`")
    assert "Traceback" not in proc.stdout + proc.stderr


def test_makefile_reports_missing_venv(tmp_path):
    proc = subprocess.run(
        ["make", "-s", "-C", str(REPO_ROOT), "test", "SKIP_SETUP=1", f"VENV={tmp_path / 'no-venv'}"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "is missing: run `make setup` first" in proc.stderr
    assert "Traceback" not in proc.stderr
