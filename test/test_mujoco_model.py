"""sim/mujoco_model.py + the user twin's MuJoCo render: MJCF/URDF, config markers, the real camera.

Every model and mesh here is written by the test (small OBJ meshes, an MJCF, a URDF arm).
The render is checked against :class:`PinholeCamera.project` pixel by pixel.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vid2sid_ros.core.camera import PinholeCamera
from vid2sid_ros.core.excitation import Excitation
from vid2sid_ros.core.parameters import ParameterSet
from vid2sid_ros.sim.mujoco_model import ModelError, build_model, parse_markers
from vid2sid_ros.sim.user_model import UserModelError, UserModelTwin

BOX_FACES = [(0, 2, 1), (0, 3, 2), (4, 5, 6), (4, 6, 7), (0, 1, 5), (0, 5, 4),
             (1, 2, 6), (1, 6, 5), (2, 3, 7), (2, 7, 6), (3, 0, 4), (3, 4, 7)]


def box_vertices(half) -> np.ndarray:
    hx, hy, hz = half
    return np.array([[-hx, -hy, -hz], [hx, -hy, -hz], [hx, hy, -hz], [-hx, hy, -hz],
                     [-hx, -hy, hz], [hx, -hy, hz], [hx, hy, hz], [-hx, hy, hz]], float)


def write_obj(path, vertices, faces=BOX_FACES):
    """A Wavefront OBJ mesh (1-based faces)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in vertices]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")
    return path


def _spec(*entries) -> ParameterSet:
    return ParameterSet.from_dict({"parameters": [dict(e) for e in entries]}, source="<test>")


_DUMMY = {"name": "damping", "unit": "N*m*s/rad", "lower": 0.0, "upper": 1.0, "nominal": 0.1,
          "target": "dof_damping[hinge]"}

MJCF = """
<mujoco model="meshbox">
  <compiler angle="radian" meshdir="meshes"/>
  <visual><global offwidth="320" offheight="240"/><quality offsamples="0"/></visual>
  <asset>
    <mesh name="slab" file="slab.obj"/>
    <material name="green" rgba="0 1 0 1" emission="1" specular="0" shininess="0"/>
  </asset>
  <worldbody>
    <body name="arm" pos="0.1 0.05 0.3" quat="0.9 0.1 0.3 0.2">
      <joint name="hinge" type="hinge" axis="0 0 1"/>
      <geom name="slab" type="mesh" mesh="slab" material="green" pos="0.02 0 0.01"/>
      <site name="tip" pos="0.4 0.0 0.0"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture()
def mesh_model(tmp_path):
    write_obj(tmp_path / "meshes" / "slab.obj", box_vertices((0.16, 0.08, 0.04)))
    (tmp_path / "meshbox.xml").write_text(MJCF)
    return tmp_path / "meshbox.xml"


CAM = PinholeCamera(320, 240, fx=290.0, fy=300.0, cx=150.3, cy=127.6, position=(-0.9, 0.4, 0.8),
                    roll=0.05, pitch=0.45, yaw=-0.35)


def _still(twin, steps=1, trial="t"):
    return Excitation("still", 30.0, np.zeros((steps, max(len(twin.actuator_names), 1))),
                      twin.actuator_names or ("u0",), meta={"trial": trial})


def _mask(frame, channel):
    f = frame.astype(int)
    others = [c for c in range(3) if c != channel]
    return (f[..., channel] > 128) & (f[..., others[0]] < 0.3 * f[..., channel]) & \
        (f[..., others[1]] < 0.3 * f[..., channel])


def _centroid(mask):
    ys, xs = np.nonzero(mask)
    assert xs.size > 0, "nothing of that colour rendered"
    return np.array([xs.mean(), ys.mean()])


def test_mesh_geom_renders_where_the_camera_model_projects_it(mesh_model):
    twin = UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY), keypoints={"tip": "tip"}, camera=CAM)
    res = twin.rollout(_still(twin), render=True)   # one row: the initial state, rendered before any step
    twin._reset("t")                                # the same state in twin.data, for the mesh pose
    frame = res.frames[0]
    rendered = _mask(frame, 1)
    # silhouette of the mesh predicted by core/camera.py: convex hull of its projected vertices
    g = twin.model.geom("slab").id
    d = twin.data
    verts = twin.model.mesh_vert[twin.model.mesh_vertadr[0]:twin.model.mesh_vertadr[0] + twin.model.mesh_vertnum[0]]
    world = d.geom_xpos[g] + verts @ d.geom_xmat[g].reshape(3, 3).T
    px = CAM.project(world)
    predicted = np.zeros(rendered.shape, np.uint8)
    cv2.fillConvexPoly(predicted, cv2.convexHull(np.round(px * 16).astype(np.int32)), 1, cv2.LINE_8, shift=4)
    predicted = predicted.astype(bool)
    iou = (rendered & predicted).sum() / (rendered | predicted).sum()
    assert rendered.sum() > 400 and iou > 0.93, (rendered.sum(), iou)
    assert np.linalg.norm(_centroid(rendered) - _centroid(predicted)) < 0.5
    # the keypoint (a site) is projected by the same camera
    assert np.allclose(res.trajectory.keypoints[0, 0], CAM.project(res.state["keypoints_world"][0, 0]))


def _markers():
    return [{"name": "red_dot", "site": "tip", "rgba": [1, 0, 0, 1], "radius": 0.02},
            {"name": "blue_dot", "body": "arm", "rgba": [0, 0, 1, 1], "radius": 0.02, "pos": [-0.3, 0, 0.0]}]


@pytest.mark.parametrize("distortion", [(0.0,) * 5, (-0.3, 0.08, 0.002, -0.001, 0.0)])
def test_config_markers_render_at_their_projected_pixel(mesh_model, distortion):
    cam = PinholeCamera(**{**CAM.__dict__, "distortion": distortion})
    twin = UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY), camera=cam, markers=_markers(),
                         keypoints={"red": "red_dot", "blue": "blue_dot"})
    res = twin.rollout(_still(twin), render=True)
    for j, channel in ((0, 0), (1, 2)):
        err = np.linalg.norm(_centroid(_mask(res.frames[0], channel)) - res.trajectory.keypoints[0, j])
        assert err < 1.0, (j, err)
    # the markers are massless, collision-free decorations
    g = twin.model.geom("vid2sid_marker_red_dot").id
    assert twin.model.geom_contype[g] == 0 and twin.model.geom_conaffinity[g] == 0
    plain = UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY), camera=cam, keypoints={"tip": "tip"})
    assert np.isclose(plain.model.body_mass.sum(), twin.model.body_mass.sum())


def test_camera_pose_nuisance_moves_projection_and_render_together(mesh_model):
    yaw = {"name": "cam_yaw", "unit": "rad", "lower": -0.6, "upper": 0.0, "nominal": -0.35, "kind": "nuisance",
           "target": "camera.yaw"}
    cz = {"name": "cam_z", "unit": "m", "lower": 0.5, "upper": 1.0, "nominal": 0.8, "kind": "nuisance",
          "target": "camera.z"}
    twin = UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY, yaw, cz), camera=CAM, markers=_markers()[:1],
                         keypoints={"red": "red_dot"})
    before = twin.rollout(_still(twin), render=True)
    twin.set_parameters({"cam_yaw": -0.25, "cam_z": 0.7})
    after = twin.rollout(_still(twin), render=True)
    moved = np.linalg.norm(after.trajectory.keypoints[0, 0] - before.trajectory.keypoints[0, 0])
    assert moved > 20
    assert np.linalg.norm(_centroid(_mask(after.frames[0], 0)) - after.trajectory.keypoints[0, 0]) < 1.0
    with pytest.raises(UserModelError, match="unknown camera field 'origin_x'"):
        UserModelTwin(model=mesh_model, camera=CAM, keypoints={"tip": "tip"},
                      parameters=_spec(_DUMMY, {**yaw, "target": "camera.origin_x"}))


def test_marker_or_keypoint_naming_a_missing_site_is_one_line(mesh_model):
    with pytest.raises(UserModelError) as err:
        UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY), camera=CAM, keypoints={"tip": "tip"},
                      markers=[{"name": "m", "site": "tipp"}], source="rig.yaml")
    assert str(err.value).startswith("rig.yaml:markers[0].site: no site named 'tipp'") and "did you mean tip" \
        in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserModelError) as err:
        UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY), camera=CAM, keypoints={"end": "tool0"},
                      source="rig.yaml")
    assert str(err.value).startswith("rig.yaml:keypoints.end: 'tool0' is neither a site nor a body")
    with pytest.raises(ModelError, match=r"rig.yaml:markers\[0\].radius: expected a radius > 0"):
        parse_markers([{"name": "m", "site": "tip", "radius": -1}], source="rig.yaml")
    with pytest.raises(ModelError, match=r"rig.yaml:markers\[0\].colour: unknown key"):
        parse_markers([{"name": "m", "site": "tip", "colour": [1, 0, 0, 1]}], source="rig.yaml")


URDF = """<?xml version="1.0"?>
<robot name="two_link">
  <link name="base_link">
    <visual><geometry><mesh filename="package://two_link_description/meshes/base.obj"/></geometry>
      <material name="grey"><color rgba="0.6 0.6 0.6 1"/></material></visual>
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="upper">
    <visual><origin xyz="0.1 0 0"/><geometry><mesh filename="meshes/link.obj"/></geometry>
      <material name="orange"><color rgba="1 0.5 0 1"/></material></visual>
    <inertial><origin xyz="0.1 0 0"/><mass value="0.3"/>
      <inertia ixx="0.0005" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="fore">
    <visual><origin xyz="0.1 0 0"/><geometry><mesh filename="meshes/link.obj"/></geometry></visual>
    <inertial><origin xyz="0.1 0 0"/><mass value="0.2"/>
      <inertia ixx="0.0003" iyy="0.0007" izz="0.0007" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="tool0"/>
  <joint name="shoulder" type="revolute"><parent link="base_link"/><child link="upper"/>
    <origin xyz="0 0 0.05"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="5" velocity="5"/>
    <dynamics damping="0.02" friction="0.01"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="fore"/>
    <origin xyz="0.2 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="5" velocity="5"/>
    <dynamics damping="0.01" friction="0.005"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="fore"/><child link="tool0"/><origin xyz="0.2 0 0"/></joint>
</robot>
"""


@pytest.fixture()
def urdf_arm(tmp_path):
    pkg = tmp_path / "two_link_description"
    write_obj(pkg / "meshes" / "base.obj", box_vertices((0.05, 0.05, 0.025)))
    write_obj(pkg / "urdf" / "meshes" / "link.obj", box_vertices((0.1, 0.02, 0.02)))
    (pkg / "urdf" / "arm.urdf").write_text(URDF)
    return pkg / "urdf" / "arm.urdf"


ARM_ACTUATORS = [{"name": "shoulder_motor", "joint": "shoulder", "gear": 1.0},
                 {"name": "elbow_motor", "joint": "elbow", "gear": 1.0}]


def test_urdf_arm_with_meshes_actuators_and_a_kept_fixed_link(urdf_arm):
    built = build_model(urdf_arm, actuators=__import__("vid2sid_ros.sim.mujoco_model", fromlist=["x"])
                        .parse_actuators(ARM_ACTUATORS), camera=CAM)
    m = built.model
    assert m.nmesh == 2 and m.nu == 2 and m.body("tool0").id > 0          # visuals kept, tool0 not fused
    assert np.allclose(m.dof_damping, [0.02, 0.01]) and np.allclose(m.dof_frictionloss, [0.01, 0.005])
    # the same model from a robot_description string (meshes relative to the given directory)
    again = build_model({"robot_description": urdf_arm.read_text()}, base=urdf_arm.parent)
    assert again.model.nmesh == 2 and again.model.nbody == m.nbody


def test_urdf_arm_twin_is_driven_and_rendered(urdf_arm):
    cam = PinholeCamera(320, 240, 280, 280, 159.5, 119.5, position=(0.15, -0.9, 0.7), roll=0.0, pitch=0.6,
                        yaw=1.5708)
    gain = {"name": "shoulder_gain", "unit": "N*m", "lower": 0.2, "upper": 2.0, "nominal": 1.0,
            "target": "actuator_gear[shoulder_motor,0]"}
    twin = UserModelTwin(model=urdf_arm, parameters=_spec(gain), camera=cam, actuators=ARM_ACTUATORS[::-1],
                         keypoints={"tool": "tool_dot"},
                         markers=[{"name": "tool_dot", "body": "tool0", "rgba": [1, 0, 0, 1], "radius": 0.015,
                                   "pos": [0.03, 0, 0]}])
    assert twin.actuator_names == ("elbow_motor", "shoulder_motor")      # the config's column order
    u = np.zeros((20, 2))
    u[:, 1] = 0.05                                                       # shoulder only (friction 0.01)
    res = twin.rollout(Excitation("push", 30.0, u, twin.actuator_names), render=True)
    q = res.state["qpos"]
    assert q[-1, 0] > 0.05 and abs(q[-1, 1]) < abs(q[-1, 0])             # the shoulder moved
    twin.set_parameters({"shoulder_gain": 2.0})
    q2 = twin.rollout(Excitation("push", 30.0, u, twin.actuator_names)).state["qpos"]
    assert q2[-1, 0] > 1.5 * q[-1, 0]                                    # the gain is a model field
    last = res.frames[-1]
    assert np.linalg.norm(_centroid(_mask(last, 0)) - res.trajectory.keypoints[-1, 0]) < 1.0
    f = last.astype(int)
    orange = (f[..., 0] > 80) & (f[..., 1] > 0.35 * f[..., 0]) & (f[..., 1] < 0.75 * f[..., 0]) & \
        (f[..., 2] < 0.3 * f[..., 0])
    assert orange.sum() > 200                                            # the upper-arm mesh is visible
    twin.close()


def test_urdf_mujoco_cannot_compile_is_one_line_with_its_message(tmp_path):
    bad = tmp_path / "broken.urdf"
    bad.write_text(URDF.replace('<child link="fore"/>', '<child link="forearm"/>').replace(
        "package://two_link_description/meshes/base.obj", "base.obj").replace("meshes/link.obj", "link.obj"))
    write_obj(tmp_path / "base.obj", box_vertices((0.05, 0.05, 0.02)))
    write_obj(tmp_path / "link.obj", box_vertices((0.1, 0.02, 0.02)))
    with pytest.raises(ModelError) as err:
        build_model(bad)
    msg = str(err.value)
    assert msg.startswith(f"{bad}: MuJoCo cannot") and "URDF" in msg and "\n" not in msg
    missing_mesh = tmp_path / "nomesh.urdf"
    missing_mesh.write_text(URDF)
    with pytest.raises(ModelError) as err:
        build_model(missing_mesh)
    assert str(err.value).startswith(str(missing_mesh)) and "base.obj" in str(err.value)
    with pytest.raises(ModelError, match=r"rig.yaml:model: model file not found"):
        build_model(tmp_path / "nope.urdf", source="rig.yaml")


def test_per_trial_initial_states(mesh_model):
    free = {"name": "t2_angle", "unit": "rad", "lower": -1.0, "upper": 1.0, "nominal": 0.4, "kind": "nuisance",
            "target": "init.qpos[hinge]@t2"}
    twin = UserModelTwin(model=mesh_model, parameters=_spec(_DUMMY, free), camera=CAM, keypoints={"tip": "tip"},
                         trial_init={"t1": {"qpos[hinge]": -0.3}})
    q = {t: twin.rollout(_still(twin, trial=t)).state["qpos"][0, 0] for t in ("t1", "t2", "t3")}
    assert np.allclose([q["t1"], q["t2"], q["t3"]], [-0.3, 0.4, 0.0])
    # a rig config's trial carries its fixed init and time offset in the excitation's meta
    exc = Excitation("t4", 30.0, np.zeros((3, 1)), ("u0",), meta={"trial": "t4", "init": {"qpos[hinge]": 0.2},
                                                                   "time_offset": 0.0})
    assert np.isclose(twin.rollout(exc).state["qpos"][0, 0], 0.2)
    twin.set_parameters({"t2_angle": -0.7})
    assert np.isclose(twin.rollout(_still(twin, trial="t2")).state["qpos"][0, 0], -0.7)
    with pytest.raises(UserModelError, match="expected '@TRIAL'"):
        UserModelTwin(model=mesh_model, camera=CAM, keypoints={"tip": "tip"},
                      parameters=_spec(_DUMMY, {**free, "target": "init.qpos[hinge]@ t 2"}))


def test_rig_config_errors_name_the_config_and_key(tmp_path, urdf_arm):
    """Through the one rig loader: URDF compile error, CameraInfo with a wrong-sized matrix, a marker
    naming a missing site: each one line naming the file and key, nothing else."""
    import yaml

    from vid2sid_ros.rigs import RigConfigError, load_rig

    cfg = {"rig": "arm", "model": str(urdf_arm), "actuators": ARM_ACTUATORS,
           "parameters": {"g": {"unit": "N*m", "lower": 0.5, "upper": 2.0, "nominal": 1.0,
                                "target": "actuator_gear[shoulder_motor,0]"}},
           "keypoints": {"tool": "tool_dot"},
           "markers": [{"name": "tool_dot", "body": "tool0", "rgba": [1, 0, 0, 1], "radius": 0.015}],
           "camera": {"fovy": 50, "pose": {"position": [0.5, -0.5, 0.5], "look_at": [0.2, 0, 0.05]}}}

    def load(name, **change):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({**cfg, **change}))
        with pytest.raises(RigConfigError) as err:
            load_rig(p)
        msg = str(err.value)
        assert msg.startswith(f"{p}:") and "\n" not in msg, msg
        return msg

    broken = tmp_path / "broken.urdf"
    broken.write_text(urdf_arm.read_text().replace('<child link="fore"/>', '<child link="forearm"/>'))
    msg = load("urdf", model=str(broken))
    assert f"{broken}: MuJoCo cannot load this URDF" in msg and "joint parent or child missing" in msg
    info = tmp_path / "cam.yaml"
    info.write_text(yaml.safe_dump({"image_width": 320, "image_height": 240, "distortion_model": "plumb_bob",
                                    "camera_matrix": {"rows": 3, "cols": 3, "data": [300.0, 0, 160, 0, 300, 120]}}))
    msg = load("caminfo", camera={"camera_info": "cam.yaml", "pose": {"position": [0.5, -0.5, 0.5],
                                                                       "look_at": [0, 0, 0]}})
    assert "camera.camera_info" in msg and f"{info}:camera_matrix: expected a 3x3 matrix" in msg
    msg = load("marker", markers=[{"name": "tool_dot", "site": "tool_site"}])
    assert "markers[0].site: no site named 'tool_site'" in msg
    msg = load("actuator", actuators=[{"name": "m", "joint": "shouldr"}])
    assert "actuators[0].joint: no joint named 'shouldr'" in msg and "did you mean shoulder" in msg


def test_stepping_matches_the_rollout_with_a_pinhole_camera(urdf_arm):
    """The ROS lockstep graph steps the twin one command at a time: same keypoints, same frames."""
    from vid2sid_ros.sim.stepping import NativeStepper, make_stepper

    twin = UserModelTwin(model=urdf_arm, camera=CAM, actuators=ARM_ACTUATORS, keypoints={"tool": "tool_dot"},
                         parameters=_spec({"name": "d", "unit": "N*m*s/rad", "lower": 0.001, "upper": 0.1,
                                           "nominal": 0.02, "target": "dof_damping[shoulder]"}),
                         markers=[{"name": "tool_dot", "body": "tool0", "rgba": [1, 0, 0, 1], "radius": 0.015}])
    u = np.zeros((12, 2))
    u[:, 0] = 0.1
    exc = Excitation("push", 30.0, u, twin.actuator_names)
    ref = twin.rollout(exc, render=True)
    stepper = make_stepper(twin)
    assert isinstance(stepper, NativeStepper)
    stepper.reset()
    rows = [stepper.step(u[k], exc.period, render=(k == 9)) for k in range(12)]
    assert np.allclose(np.stack([r.keypoints for r in rows]), ref.trajectory.keypoints, atol=1e-9)
    assert np.array_equal(rows[9].frame, ref.frames[9])
    twin.close()


def test_make_twin_width_height_resizes_a_pinhole_rig(tmp_path, mesh_model):
    """Regression: ``rig.make_twin(width=, height=)`` of a user rig with a pinhole ``camera:`` went into the
    (unused) legacy projection block: the render stayed at the camera's 320x240. Now the image is the size
    asked, the view is kept (intrinsics scaled, PinholeCamera.resized) and render and keypoints still agree;
    an intrinsic nuisance (camera.fx) stays in the config camera's pixels."""
    import yaml

    from vid2sid_ros.rigs import load_rig

    cfg = {"rig": "meshbox", "model": str(mesh_model),
           "parameters": {"damping": {k: v for k, v in _DUMMY.items() if k != "name"},
                          "focal": {"unit": "px", "lower": 250.0, "upper": 350.0, "nominal": 290.0,
                                    "kind": "nuisance", "target": "camera.fx"}},
           "keypoints": {"red": "red_dot"}, "markers": _markers()[:1],
           "camera": {"width": 320, "height": 240, "fx": 290.0, "fy": 300.0, "cx": 150.3, "cy": 127.6,
                      "distortion": [-0.2, 0.05, 0.0, 0.0, 0.0],
                      "pose": {"position": [-0.9, 0.4, 0.8], "rpy": [0.05, 0.45, -0.35]}}}
    path = tmp_path / "rig.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rig = load_rig(path)
    small = rig.make_twin()
    res_s = small.rollout(_still(small), render=True)
    for size in ((640, 480), (480, 200)):
        big = rig.make_twin(width=size[0], height=size[1])
        sx, sy = size[0] / 320, size[1] / 240
        assert (big.camera.width, big.camera.height) == size
        assert big.camera.fx == pytest.approx(290.0 * sx) and big.camera.cy == pytest.approx(128.1 * sy - 0.5)
        res_b = big.rollout(_still(big), render=True)
        assert res_b.frames.shape[1:] == (size[1], size[0], 3)
        # the same view: the keypoint lands on the scaled pixel (pixel edges at -0.5) ...
        expected = (res_s.trajectory.keypoints[0, 0] + 0.5) * (sx, sy) - 0.5
        assert np.allclose(res_b.trajectory.keypoints[0, 0], expected, atol=1e-6)
        # ... and the rendered marker is where that keypoint says
        assert np.linalg.norm(_centroid(_mask(res_b.frames[0], 0)) - res_b.trajectory.keypoints[0, 0]) < 1.0
    # a camera.fx nuisance value is in the configured camera's pixels, scaled with the image
    big = rig.make_twin(width=640)
    big.set_parameters({"focal": 310.0})
    assert (big.camera.width, big.camera.height) == (640, 240) and big.camera.fx == pytest.approx(620.0)
    assert big.camera.fy == pytest.approx(300.0)
    with pytest.raises(UserModelError) as err:
        rig.make_twin(width=0)
    assert "camera" in str(err.value) and "width" in str(err.value) and "\n" not in str(err.value)


def test_the_root_element_decides_urdf_or_mjcf_not_a_comment_before_it(tmp_path):
    """Was: a URDF whose leading comment mentions <mujoco> (the shipped urdf_arm's does) was parsed as MJCF from a
    robot_description string (3 bodies, no geoms instead of 5 and 3); an MJCF whose comment mentions <robot> was
    parsed as URDF."""
    from pathlib import Path

    urdf = Path(__file__).resolve().parents[1] / "examples" / "rigs" / "urdf_arm" / "arm2.urdf"
    text = urdf.read_text()
    assert text.find("<mujoco") < text.find("<robot")  # the comment names the extension first
    from_file = build_model(urdf).model
    from_text = build_model({"robot_description": text}, base=urdf.parent).model
    assert (from_text.nbody, from_text.ngeom, from_text.nmesh) == (from_file.nbody, from_file.ngeom,
                                                                    from_file.nmesh) == (5, 3, 3)
    mjcf = tmp_path / "m.xml"
    mjcf.write_text('<?xml version="1.0"?>\n<!-- not a <robot name="x"> but MJCF -->\n<mujoco model="m"><worldbody>'
                    '<body name="b"><joint name="j" type="hinge"/><geom size="0.1"/></body></worldbody></mujoco>\n')
    assert build_model(mjcf).model.body("b").id == 1
