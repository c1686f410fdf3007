"""A toy rig whose rollouts take ``VID2SID_SLOW_TOY_S`` seconds each (default 0), for signal tests.

Used as ``rig: slow_toy:make_rig`` with ``test/helpers`` on ``PYTHONPATH``: the run is
slow enough to be stopped mid-calibration, and a resume without the variable is fast.
"""

from __future__ import annotations

import os
import time

from vid2sid_ros.sim.toy import ToyArmTwin
from vid2sid_ros.sim.toy import make_rig as make_toy_rig


class SlowToyTwin(ToyArmTwin):
    def rollout(self, excitation, *, render=False):
        time.sleep(float(os.environ.get("VID2SID_SLOW_TOY_S", "0")))
        return super().rollout(excitation, render=render)


def make_rig(**overrides):
    rig = make_toy_rig(**overrides)
    params = rig.parameters
    rig.make_twin = lambda **kw: SlowToyTwin(params, **kw)
    return rig
