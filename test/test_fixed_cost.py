"""The fixed cost of a calibration: no heavy import for the chirp, every phase's wall and CPU time and every
rollout (charged and diagnostic) in result.json."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vid2sid_ros.core.excitation import linear_chirp


@pytest.mark.parametrize("f0, f1, t1, phi", [(0.2, 3.0, 4.0, -90.0), (1.0, 0.5, 2.5, 0.0), (0.0, 7.3, 1.0, 33.0)])
def test_linear_chirp_is_scipys_bit_for_bit(f0, f1, t1, phi):
    from scipy.signal import chirp

    t = np.arange(0, 301) / 75.0
    np.testing.assert_array_equal(linear_chirp(t, f0, t1, f1, phi), chirp(t, f0=f0, t1=t1, f1=f1, method="linear",
                                                                         phi=phi))


def test_building_the_finger_rig_does_not_import_scipy_signal():
    code = ("import sys\nfrom vid2sid_ros.sim.mujoco_finger import make_rig\nrig = make_rig()\n"
            "assert rig.excitations['train'], 'no excitation'\nprint('scipy.signal' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__)
                                                                              .resolve().parents[1])})
    assert out.stdout.strip() == "False", out.stderr
