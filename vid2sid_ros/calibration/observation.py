"""Re-export of the real-trial type, which now lives on the ground floor (:mod:`vid2sid_ros.core.trial`).

Kept so that ``from vid2sid_ros.calibration.observation import RealTrial`` keeps working;
new code imports :mod:`vid2sid_ros.core.trial`.
"""

from ..core.trial import ObservationError, RealTrial, jsonable, with_current_keys

__all__ = ["RealTrial", "ObservationError", "jsonable", "with_current_keys"]

