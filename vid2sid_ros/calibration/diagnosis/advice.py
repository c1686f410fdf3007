"""Plain-language advice: what trial would separate causes a diagnosis could not tell apart, and how to act
on a named one."""

from __future__ import annotations

from typing import Sequence

from .causes import Cause, CommandTransform, FrozenParameter, ModelField

__all__ = ["separating_trial", "how_to_free"]

_REST = ("frames of the robot held still in several poses (a camera or marker error stays at rest, a dynamics "
         "error does not)")
_RULES: tuple[tuple[frozenset, str], ...] = (
    (frozenset({"camera", "offset"}), "a calibration target or poses spread over the image and in depth (a "
                                      "marker offset moves with one keypoint, a camera error with all)"),
    (frozenset({"latency", "timing"}), "a longer trial (a frame-rate error grows with time, a latency does not)"),
    (frozenset({"latency", "rolling_shutter"}), "motion at different image rows (a rolling shutter's delay "
                                                "depends on the row, a latency's does not)"),
    (frozenset({"latency"}), "a broadband chirp (a delay's phase lag grows in proportion to frequency, a dynamics "
                             "error's does not)"),
    (frozenset({"timing"}), "a longer trial (a frame-rate error grows with time)"),
    (frozenset({"friction", "joint"}), "slow and fast motions of the same amplitude (Coulomb friction does not "
                                       "depend on speed, damping grows with it)"),
    (frozenset({"actuator"}), "steps of several amplitudes and both signs, with direction reversals (a dead-zone "
                              "and a bias act at small commands, backlash at reversals, a gain at every amplitude)"),
    (frozenset({"friction"}), "slow and fast motions of the same amplitude (Coulomb friction does not depend on "
                              "speed)"),
    (frozenset({"joint"}), "a chirp across the natural frequency, and steps (inertia moves the resonance, damping "
                           "widens it, stiffness sets the static deflection)"),
    (frozenset({"inertia", "actuator"}), "a known payload on the link, or a static load against the motor (gravity "
                                         "or a spring of known stiffness): motion alone shows only the torque over "
                                         "the inertia, a gain and a mass scale it alike"),
    (frozenset({"inertia", "joint"}), "static poses at several angles against gravity and a chirp across the "
                                      "natural frequency (a link's mass changes the gravity load, a joint's armature "
                                      "or stiffness does not; inertia moves the resonance, damping widens it)"),
)


def separating_trial(causes: Sequence[Cause]) -> str:
    """What excitation would tell ``causes`` apart: the rule of every pair of kinds present, joined (a camera
    error against a dynamics error, then the dynamics kinds among themselves)."""
    kinds = {getattr(c, "category", c.kind) for c in causes}
    if "tracker" in kinds:  # the measurement against the model: filming the twin like the robot checks it
        others = [c for c in causes if c.kind != "tracker"]
        text = "the twin filmed and tracked like the robot (calibration.tracker_bias: true)"
        if len({getattr(c, "category", c.kind) for c in others}) > 1:
            text += " and " + separating_trial(others)
        return text
    if "encoder" in kinds:  # a reading's error against the motion: an independent measure of the joint
        others = [c for c in causes if c.kind != "encoder"]
        text = ("poses held still with the joint angles measured independently (a protractor, a fixture, motion "
                "capture): an encoder's zero or scale error stays at rest, a dynamics error does not")
        return text + (" and " + separating_trial(others) if others else "")
    if kinds == {"inertia", "joint"} and not any(_moves_weight(c) for c in causes):
        return ("motion about several axes at once where the robot has them (a body's inertia acts about every axis "
                "it turns about, a joint's armature only about its own); about one hinge, or parallel hinges, the two "
                "are one effect, and only a measurement of one of them (the link weighed or swung as a pendulum, the "
                "motor's rotor inertia from its data sheet)")
    said: list[str] = []
    if kinds & {"camera", "offset"}:
        said.append(_RULES[0][1] if kinds <= {"camera", "offset"} else _REST)
    rest = kinds - {"camera", "offset"}
    for need, text in sorted(_RULES[1:], key=lambda rule: -len(rule[0])):  # pairs before single kinds
        if need <= rest:
            said.append(text)
            break
    if not said and rest == {"inertia"}:
        said.append("static poses at several angles against gravity (mass and centre of mass change the gravity "
                    "load, a body's inertia alone does not)")
    if not said and kinds == {"frozen"} and len(causes) > 1:
        said.append("no trial of this kind (their effects on the motion are the same combination here; a "
                    "measurement of one of them alone)")
    return " and ".join(said) or ("a trial with a different excitation (another amplitude or frequency band, chosen "
                                  "by experiment design)")


def _moves_weight(cause: Cause) -> bool:
    """Whether a cause changes a body's mass or centre of mass (its gravity load), not only its inertia."""
    if isinstance(cause, ModelField):
        return any(f in ("body_mass", "body_ipos") for f, _, _ in cause.writes)
    t = f"{getattr(getattr(cause, 'spec', None), 'target', '')} {getattr(getattr(cause, 'spec', None), 'name', '')}"
    return any(w in t.lower() for w in ("body_mass", "ipos", "mass"))


def how_to_free(cause: Cause, unit: str = "px") -> str:
    """The action a named cause asks for, in the rig config's terms (``unit``: the measurement's; a joint-state
    or motion-capture recording, not in px, is never called a video)."""
    if isinstance(cause, FrozenParameter):
        return f"free '{cause.spec.name}' (frozen: false in the parameter spec)"
    if cause.kind == "latency":
        return "free the 'latency' nuisance (nuisance: latency: true)"
    if cause.kind == "camera":
        return ("declare the camera field(s) " + ", ".join(cause.fields) + " as free nuisance parameters "
                "(kind: nuisance, target: " + cause.fields[0] + ")")
    if cause.kind == "offset":
        return "free the marker offsets (nuisance: marker_offsets: true)"
    if isinstance(cause, ModelField):
        return "add a parameter with target " + ", ".join(cause.fields)
    if cause.kind == "encoder":
        what = "zero" if getattr(cause, "mode", "offset") == "offset" else "scale (counts per unit)"
        return (f"check the encoder {what} of joint '{getattr(cause, 'joint', '')}' and correct the recording "
                "(no parameter of the twin models a reading's error)")
    if cause.kind == "tracker":
        return "set calibration.tracker_bias: true (the twin filmed and tracked like the robot)"
    if cause.kind == "rolling_shutter":
        return "use a global-shutter camera, or model each keypoint's read time"
    if cause.kind == "timing":
        if unit == "px":
            return ("check the video's time stamps and frame rate (frames were dropped or the rate is not the nominal "
                    "one)")
        return "check the recording's time stamps and rate (samples were dropped or the rate is not the nominal one)"
    if isinstance(cause, CommandTransform):
        return f"model the drive's {cause.mode} (the twin has no parameter for it)"
    return "model it (the twin has no parameter for it)"
