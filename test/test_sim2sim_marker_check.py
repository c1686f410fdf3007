"""Camera-noise sim2sim on a model whose render shows none of the tracker's marker colours is refused up front.

The /work/nu double pendulum (sites, grey links, a red/blue/green colour tracker, no `markers:`) ran
`vid2sid benchmark sim2sim` for 4.5 minutes and then failed with "the start point cannot be simulated:
rollout 'chirp': no valid keypoint overlaps the real trial": the stand-in render had nothing to track.
"""

from __future__ import annotations

import pytest

from vid2sid_ros.cli import main

SLIDER = """<mujoco model="slider">
  <option timestep="0.01"/>
  <asset>{asset}</asset>
  <worldbody>
    <light pos="0 -1 2" dir="0 0.5 -1"/>
    <geom name="floor" type="plane" size="2 2 0.1" pos="0 0 -0.2" {floor}/>
    <body name="cart"><joint name="slide" type="slide" axis="1 0 0" damping="1"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1" rgba="{cart} 1"/><site name="mark" pos="0 -0.06 0"/></body>
  </worldbody>
  <actuator><motor name="push" joint="slide" gear="2"/></actuator>
</mujoco>
"""
GREY, RED = "0.8 0.8 0.8", "0.9 0.1 0.1"


def _rig(tmp_path, *, cart=GREY, markers="", asset="", floor='rgba="0.5 0.5 0.5 1"', hue=(170, 10)):
    (tmp_path / "slider.xml").write_text(SLIDER.format(cart=cart, asset=asset, floor=floor))
    path = tmp_path / "rig.yaml"
    path.write_text(
        "model: slider.xml\n"
        "parameters: {damping: {unit: N*s/m, lower: 0.1, upper: 5, nominal: 1, target: 'dof_damping[slide]'}}\n"
        "keypoints: {cart: mark}\n" + markers +
        "camera: {width: 96, height: 72, fovy: 50, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}\n"
        f"tracker: {{markers: [{{name: cart, hsv_lower: [{hue[0]}, 100, 60], hsv_upper: [{hue[1]}, 255, 255]}}]}}\n"
        "excitations: {push: {kind: sine, amplitude: 0.5, frequency: 1, duration: 0.5, rate: 20}}\n"
        "trials: [{name: run1, source: {sim2sim: {}}, excitation: push}]\n")
    return path


def test_benchmark_refuses_camera_noise_before_any_rollout_when_the_model_has_no_marker_colour(tmp_path, capsys):
    out = tmp_path / "bench"
    rig = _rig(tmp_path)
    code = main(["benchmark", "sim2sim", "--rig", str(rig), "--methods", "random", "--seeds", "1", "--budget", "2",
                 "--iterations", "1", "--noise", "camera", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{rig}:tracker.markers[0]: marker 'cart'" in err and "markers: [{name: m_cart, site: mark" in err
    assert "--noise keypoint" in err and "no valid keypoint" not in err
    assert not out.exists()  # refused before OUT is written


def test_the_check_passes_on_markers_or_coloured_geoms_and_names_a_wrong_hue(tmp_path):
    from vid2sid_ros.benchmark.sim2sim import Sim2SimError, check_camera_noise
    from vid2sid_ros.rigs import load_rig

    # a `markers:` sphere in the tracker's colour on the keypoint's site
    check_camera_noise(load_rig(_rig(tmp_path, markers="markers: [{name: m_cart, site: mark, rgba: [0.9, 0.1, 0.1, 1], "
                                                       "radius: 0.02}]\n")))
    check_camera_noise(load_rig(_rig(tmp_path, cart=RED)))  # the model's own red geom
    tex = ('<texture name="t" type="2d" builtin="checker" rgb1="0.9 0.1 0.1" rgb2="0.5 0.5 0.5" width="8" '
           'height="8"/><material name="t" texture="t"/>')
    check_camera_noise(load_rig(_rig(tmp_path, asset=tex, floor='material="t"')))  # a red texel counts
    with pytest.raises(Sim2SimError, match=r"tracker\.markers\[0\]: marker 'cart' \(hue 100\.\.130"):
        check_camera_noise(load_rig(_rig(tmp_path, cart=RED, hue=(100, 130))))  # red geom, blue tracker
