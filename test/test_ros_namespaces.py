"""Two namespaced finger stand-in graphs on one ROS domain, calibrated at once, each applying its own result."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy", reason="rclpy comes with `make setup` (.venv)")

#: hidden joint stiffness (N*m/rad) of each stand-in robot; the twins start at the nominal 0.3
HIDDEN = {"robot1": 0.42, "robot2": 0.22}


@pytest.mark.timeout(900)
def test_two_namespaced_graphs_calibrate_side_by_side(tmp_path):
    """(was: absolute names: `-r __ns:=/robot1` moved the nodes but not their topics, so two graphs
    on one domain shared /vid2sid/* and each calibrator saw both robots' trials)"""
    import rclpy
    from rclpy.context import Context

    from vid2sid_ros.nodes.bringup import Bringup
    from vid2sid_ros.nodes.graph_client import GraphClient

    graphs, clients = {}, {}
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        for ns, k in HIDDEN.items():
            graphs[ns] = Bringup("finger_stand_in", namespace=ns, arguments={"run_dir": str(tmp_path / ns)},
                                 overrides={"recorder_node": {"enabled": False},
                                            "tracker_node": {"trial_grace": 20.0},
                                            "stand_in_rig_node": {"hidden.joint_stiffness": k},
                                            "calibrator_node": {"final_identifiability": False}}).start()
            clients[ns] = GraphClient(ctx, "ns_test_client", namespace=ns)
        names = {n for g in graphs.values() for n in g.nodes.values() for n in [n.get_fully_qualified_name()]}
        assert "/robot1/calibrator_node" in names and "/robot2/calibrator_node" in names
        for ns, k in HIDDEN.items():  # the params files apply in a namespace too (their /**/<node> keys)
            assert graphs[ns]["stand_in_rig_node"].hidden == pytest.approx(
                {"joint_stiffness": k, "joint_damping": 0.0065, "joint_friction": 0.0035, "actuator_gain": 12.5,
                 "joint_armature": 0.0004})
        assert graphs["robot1"]["tracker_node"].resolve_topic_name("vid2sid/real/image_raw") == \
            "/robot1/vid2sid/real/image_raw"
        trials = {ns: c.start_trial(timeout=120.0) for ns, c in clients.items()}
        for ns, c in clients.items():
            real, sim = c.wait_trajectories(trials[ns], timeout=120.0)
            assert real.num_steps == sim.num_steps == 60
        # each calibrator holds its own robot's trial only
        import time

        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not all(g["calibrator_node"].real for g in graphs.values()):
            time.sleep(0.1)
        for ns, g in graphs.items():
            assert list(g["calibrator_node"].real) == [trials[ns]]
        # both calibrations at once: each client's request goes out before either is answered
        from vid2sid_ros.srv import Propose

        futures = {}
        for ns, c in clients.items():
            cli = c.node.create_client(Propose, "vid2sid/propose")
            assert cli.wait_for_service(timeout_sec=30.0)
            futures[ns] = cli.call_async(Propose.Request(apply=True, iterations=4, names=["joint_stiffness"]))
        deadline = time.monotonic() + 600.0
        while not all(f.done() for f in futures.values()) and time.monotonic() < deadline:
            for c in clients.values():
                c.executor.spin_once(timeout_sec=0.05)
        assert all(f.done() for f in futures.values())
        applied = {}
        for ns, f in futures.items():
            r = f.result()
            assert r.accepted, (ns, r.message)
            applied[ns] = graphs[ns]["sim_twin_node"].get_parameter("physics.joint_stiffness").value
            assert applied[ns] == pytest.approx(dict(zip(r.names, r.values))["joint_stiffness"])
        # each twin moved from the nominal 0.3 toward its own robot, not the other one
        for ns, k in HIDDEN.items():
            other = next(v for n, v in HIDDEN.items() if n != ns)
            assert abs(applied[ns] - k) < abs(0.3 - k), applied
            assert abs(applied[ns] - k) < abs(applied[ns] - other), applied
    finally:
        for c in clients.values():
            c.close()
        for g in graphs.values():
            g.shutdown()
        rclpy.try_shutdown(context=ctx)
