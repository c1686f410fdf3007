"""Residual diagnosis: which cause, if any, explains what the free parameters leave — and can it be told apart?

A calibration that reaches a small training error has not thereby found the *true*
physics: a frozen parameter that is off, a link heavier than modelled, a dead-zone in the
drive, a camera latency or a camera that is not where the config says are absorbed by a
compensating combination of the free parameters, and the fit still looks good. What is
left has a shape, and several causes may fit that shape equally well.

:func:`diagnose` therefore *compares* candidate causes (:mod:`.causes`, registered in
:data:`~.causes.CAUSE_FAMILIES`):

============================ ======================================================================
family                       candidates (each one scalar, 0 = the calibrated twin)
============================ ======================================================================
``frozen``                   every frozen physics parameter of the spec (and frozen ``camera.*``)
``body`` (MuJoCo)            every body's mass (with its inertia), inertia, centre of mass x/y/z
``joint`` (MuJoCo)           every joint's armature, damping, stiffness, frictionloss; tendon
                             frictionloss — those no single-target free parameter sets
``command``                  per actuator: gain, bias, dead-zone, backlash (command transforms);
                             with two or more actuators, a dead-zone and backlash in every drive
``timing``                   latency (when not already free), dropped frames / frame rate,
                             rolling shutter (image measurements)
``camera_pose``              the camera's position and orientation (twins with ``move_camera``,
                             when the spec has no ``camera.*`` parameter)
``camera_intrinsics``        focal lengths fx, fy (scale), principal point cx, cy (image measurements)
``marker``                   a constant offset per keypoint coordinate (when not already free)
``tracker``                  the tracker's own bias measured on renders of the twin (a real video
                             whose bias is not applied: ``calibration.tracker_bias`` unset)
============================ ======================================================================

and :mod:`.compare` scores them: one linearised probe each, then a refit of the best few
together with the free parameters, a likelihood-ratio test against the noise level (estimated
from successive differences of the residual), a tie test between the best causes, and — where the
local refits would leave the residual unexplained — refits from afar that let the free parameters travel
back from where they absorbed an error. The
result is ``named`` (one cause, or one kind of cause, explains the residual clearly better
than the rest, and explains it whole), ``indistinguishable`` (several of different kinds — or a
camera's pose and its intrinsics — explain it equally, with the trial that would separate them;
none is recommended), ``unexplained`` (structure no candidate explains, or the best explains only
part of: the model is too simple here, or wrong in more than one place), ``unchecked`` (nothing
beyond the noise, but nominal values the trials cannot check: a caveat listing them) or ``none``.
A named cause's remedy is checked before it is recommended: refitted with it free on the training data and scored on held-out data
(holdout trials, else the last 30 % of every trial). Nothing already free is a candidate.

What the residual cannot show is said too: :mod:`.consider` regresses every candidate's probe column
on the free parameters' columns (the consider analysis of orbit determination) and raises a
*caveat* — not a warning — when a plausible error in a candidate would move an identified value
beyond its 95 % interval while leaving the fit as good; every free parameter also gets a
consider-widened interval (``Diagnosis.consider``).

The probes and refits are diagnostics: their rollouts are reported in ``Diagnosis.rollouts``,
never charged to the calibration's budget. The decision constants are
:data:`~.result.THRESHOLDS`; ``bench/bench_diagnosis.py`` measures how often the verdict is
right.
"""

from .causes import CAUSE_FAMILIES, Cause, candidate_causes
from .core import diagnose
from .result import THRESHOLDS, Diagnosis, Finding

__all__ = ["Finding", "Diagnosis", "diagnose", "THRESHOLDS", "Cause", "CAUSE_FAMILIES", "candidate_causes"]
