"""A small user rig for video tests: a one-link MJCF arm with a red marker on its tip, filmed by one camera.

The arm is a 0.3 m capsule (0.3 kg) on a hinge about y (``shoulder``, damping 0.05 N·m·s/rad,
one motor ``m``), timestep 5 ms; the free parameter is the shoulder's damping (0.01-0.2
N·m·s/rad, nominal 0.05); the keypoint ``tip`` is a red sphere marker on the site 0.33 m out;
the camera looks along +y at the arm; the tracker follows red (OpenCV HSV hue 170-10).

Used by ``test/test_video_memory_bounded.py``, ``test/test_tracking_sources.py`` and
``bench/bench_video_calibrate_memory.py``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["RED", "BLUE", "arm_xml", "rig_text", "write_rig"]

#: OpenCV HSV ranges (lower, upper) as YAML lists: the red marker (hue wraps through 0), the blue upper arm
RED, BLUE = ("[170, 100, 60]", "[10, 255, 255]"), ("[100, 100, 60]", "[130, 255, 255]")


def arm_xml(rgba: str = "0.1 0.2 0.9 1") -> str:
    """The arm's MJCF; ``rgba`` is the upper arm's colour (blue by default)."""
    return f"""<mujoco model="arm">
  <option timestep="0.005"/>
  <worldbody>
    <light pos="0 -1 2" dir="0 0.5 -1"/>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3" rgba="{rgba}"/>
      <site name="tip" pos="0.33 0 0"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="shoulder" gear="1"/></actuator>
</mujoco>
"""


def rig_text(*, source: str, excitation: str, trial_excitation: str = "swing", width: int = 96, height: int = 72,
             fovy: float = 40, look_x: float = 0.25, marker_radius: float = 0.025,
             hue: tuple[str, str] = RED, trial_extra: str = "", name: str | None = None) -> str:
    """The rig config's text up to its ``trials`` line (model ``arm.xml``; add ``calibration`` etc. after it).

    Args:
        source: the trial's source as YAML flow text, e.g. ``"{sim2sim: {seed: 1}}"`` or ``"{video: clip.mp4}"``.
        excitation: the ``swing`` excitation's fields as YAML flow text (without braces),
            e.g. ``"kind: sine, amplitude: 0.6, frequency: 1, duration: 2, rate: 30"``.
        trial_excitation: the excitation the trial names (``swing`` or ``none``).
        width, height: camera image size, px; fovy: vertical field of view, degrees.
        look_x: x (m) of the camera's position (1 m in front, along -y) and of the point it looks at.
        marker_radius: the tip marker's radius, m.
        hue: the tracker's HSV range (:data:`RED` or :data:`BLUE`).
        trial_extra: more fields of the trial, e.g. ``", split: {train_fraction: 0.75}"``.
        name: the rig's name (``rig:``), none by default.
    """
    return ((f"rig: {name}\n" if name else "")
            + "model: arm.xml\n"
            "parameters: {damping: {unit: N*m*s/rad, lower: 0.01, upper: 0.2, nominal: 0.05, "
            "target: 'dof_damping[shoulder]'}}\n"
            "keypoints: {tip: m_tip}\n"
            f"markers: [{{name: m_tip, site: tip, rgba: [0.9, 0.1, 0.1, 1], radius: {marker_radius:g}}}]\n"
            f"camera: {{width: {width}, height: {height}, fovy: {fovy:g}, pose: {{position: [{look_x:g}, -1.0, 0], "
            f"look_at: [{look_x:g}, 0, 0]}}}}\n"
            f"tracker: {{markers: [{{name: tip, hsv_lower: {hue[0]}, hsv_upper: {hue[1]}}}]}}\n"
            f"excitations: {{swing: {{{excitation}}}}}\n"
            f"trials: [{{name: run1, source: {source}, excitation: {trial_excitation}{trial_extra}}}]\n")


def write_rig(folder: Path, text: str, *, rig_file: str = "rig.yaml", rgba: str = "0.1 0.2 0.9 1") -> Path:
    """Write ``arm.xml`` (:func:`arm_xml` with ``rgba``) and ``text`` as ``rig_file`` into ``folder``.

    Returns:
        the rig config's path.
    """
    folder = Path(folder)
    (folder / "arm.xml").write_text(arm_xml(rgba))
    path = folder / rig_file
    path.write_text(text)
    return path
