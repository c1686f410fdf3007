"""PyElastica tentacle twin: rig contract, rollouts, invariance, identifiability, divergence, water.

Rollouts are kept short (0.5-1 s at 30 Hz); PyElastica's numba kernels come from the
persistent cache (``~/.cache/vid2sid_ros/numba`` or ``$NUMBA_CACHE_DIR``), so only the
very first run on a machine pays the compile time.
"""

import math
import os
import warnings

import numpy as np
import pytest

from vid2sid_ros.core.excitation import Excitation, build_excitation
from vid2sid_ros.core.parameters import ParameterSpecError, load_parameter_set
from vid2sid_ros.sim.base import Twin, TwinError
from vid2sid_ros.sim.elastica_tentacle import (ALLFREE_PARAMETERS_PATH, PARAMETERS_PATH, WATER_PARAMETERS_PATH,
                                               TentacleTwin, default_config, default_water_config, make_rig,
                                               make_water_rig, numba_cache_dir, stable_time_step)
from vid2sid_ros.sim.registry import make_rig as registry_make_rig

ACT = ("tendon",)


def _step(amplitude=0.8, duration=0.5, t_step=0.05, name="step"):
    return build_excitation({"kind": "step", "amplitude": amplitude, "t_step": t_step, "duration": duration,
                             "rate": 30.0, "name": name}, ACT)


@pytest.fixture(scope="module")
def rig():
    return make_rig()


@pytest.fixture(scope="module")
def twin(rig):
    return rig.make_twin()


@pytest.fixture(autouse=True)
def _nominal(twin):
    twin.set_parameters(twin.parameters.nominal())
    yield


def test_rigs_satisfy_the_contract():
    for name, free in (("tentacle", {"youngs_modulus", "damping_constant", "actuation_gain"}),
                       ("tentacle_water", {"drag_normal_coefficient", "added_mass_coefficient"})):
        r = registry_make_rig(name)
        assert r.name == name
        assert set(r.parameters.free_names) == free
        for label in ("train", "holdout"):
            assert r.excitations[label], label
            for e in r.excitations[label]:
                assert e.rate == 30.0 and 2.0 <= e.duration <= 3.0 and e.actuator_names == ACT
        assert r.tracker["kind"] == "centerline" and r.tracker["num_keypoints"] == 10
        t = r.make_twin()
        assert isinstance(t, Twin)
        assert t.keypoint_names == tuple(f"c{k}" for k in range(10))
        assert (t.camera.width, t.camera.height) == (320, 240)
    # density and geometry are measured: frozen / configuration
    assert load_parameter_set(PARAMETERS_PATH)["density"].frozen
    assert not load_parameter_set(ALLFREE_PARAMETERS_PATH)["density"].frozen
    water = load_parameter_set(WATER_PARAMETERS_PATH)
    assert all(water[n].frozen for n in ("youngs_modulus", "damping_constant", "actuation_gain", "density",
                                          "fluid_density", "drag_tangential_coefficient"))


def test_config_overrides_and_errors():
    assert default_config() is not default_config() and default_config()["medium"] == "air"
    assert default_water_config()["medium"] == "water"
    r = make_rig(width=160, height=120, geometry={"n_elements": 16})
    t = r.make_twin()
    assert (t.camera.width, t.camera.height) == (160, 120) and t.geometry.n_elements == 16
    assert t.geometry.length == 0.2  # merged field by field
    assert r.tracker["base_px"] == pytest.approx(list(t.base_px))
    with pytest.raises(TwinError, match="unknown config key"):
        make_rig(stiffness=1.0)
    with pytest.raises(TwinError, match="unknown argument"):
        r.make_twin(colour="red")
    with pytest.raises(TwinError, match="tip_radius"):
        make_rig(geometry={"tip_radius": 0.02})
    with pytest.raises(TwinError, match="expected exactly"):
        TentacleTwin(parameters=WATER_PARAMETERS_PATH, medium="air")


def test_set_parameters_validates(twin):
    with pytest.raises(ParameterSpecError, match="unknown parameter"):
        twin.set_parameters({"stiffness": 1.0})
    with pytest.raises(ParameterSpecError, match="youngs_modulus"):
        twin.set_parameters({"youngs_modulus": -1.0})
    with pytest.raises(ParameterSpecError, match="finite"):
        twin.set_parameters({"damping_constant": math.nan})
    twin.set_parameters({"actuation_gain": 0.03})
    assert twin.get_parameters()["actuation_gain"] == 0.03


def test_time_step_from_material_parameters(twin):
    dl = twin.geometry.element_length
    assert stable_time_step(3e5, 1070.0, dl) == pytest.approx(0.5 * dl * math.sqrt(1070.0 / 3e5))
    period = 1.0 / 30.0
    dt = twin.time_step(period)
    assert dt <= twin.time_step() and period / dt == pytest.approx(round(period / dt))
    twin.set_parameters({"youngs_modulus": 4 * twin.get_parameters()["youngs_modulus"]})
    assert twin.time_step() == pytest.approx(0.5 * dl * math.sqrt(1070.0 / 1.2e6))
    with pytest.raises(TwinError):
        stable_time_step(0.0, 1070.0, dl)


def test_rollout_is_deterministic_and_follows_the_command(twin):
    exc = _step(0.8, 0.6)
    a = twin.rollout(exc, render=True)
    b = twin.rollout(exc)
    assert not a.diverged and a.message == ""
    kp = a.trajectory.keypoints
    assert kp.shape == (18, 10, 2) and a.trajectory.valid.all()
    np.testing.assert_array_equal(kp, b.trajectory.keypoints)
    assert a.frames.shape == (18, 240, 320, 3) and a.frames.dtype == np.uint8
    np.testing.assert_allclose(a.trajectory.time, (np.arange(18) + 1) / 30.0)
    bx, by = twin.base_px
    # at rest the tentacle hangs straight down from the base: the tip at base + length
    rest = twin.rollout(_step(0.0, 0.2)).trajectory.keypoints[-1]
    np.testing.assert_allclose(rest[:, 0], bx, atol=0.05)
    assert rest[-1, 1] == pytest.approx(by + twin.length_px, abs=0.5)
    # positive tendon command curls the tip toward image right (and up), negative to the left
    assert kp[-1, -1, 0] > bx + 20 and kp[-1, -1, 1] < rest[-1, 1] - 2
    neg = twin.rollout(_step(-0.8, 0.6)).trajectory.keypoints
    np.testing.assert_allclose(neg[-1, :, 0] - bx, -(kp[-1, :, 0] - bx), atol=1e-6)  # mirror symmetry
    # nodes stay within reach; the state has the world centreline
    nodes = a.state["centerline"]
    assert nodes.shape == (18, 21, 3)
    np.testing.assert_allclose(nodes[:, 0], 0.0, atol=1e-12)  # clamped base
    assert np.max(np.linalg.norm(nodes, axis=2)) <= twin.geometry.length * 1.001


def test_stepping_matches_rollout(twin):
    exc = _step(0.8, 0.2)
    ref = twin.rollout(exc).trajectory.keypoints
    twin.reset(exc.period)
    for k in range(exc.num_steps):
        twin.step(exc.values[k], exc.period)
        xy, valid = twin.observe()
        assert valid.all()
        np.testing.assert_allclose(xy, ref[k], atol=1e-9)
    assert twin.render().shape == (240, 320, 3)
    with pytest.raises(TwinError, match="period changed"):
        twin.step([0.0], 0.05)
    with pytest.raises(TwinError, match="one finite command"):
        twin.step([0.0, 1.0], exc.period)


def test_joint_scaling_is_invisible_and_the_allfree_spec_is_flagged():
    """Only E/rho and gain/rho are observable: scaling all three leaves the video unchanged,
    and the identifiability check flags the all-free spec but not the shipped one."""
    from vid2sid_ros.calibration.identifiability import (IdentifiabilityWarning, analyse_jacobian,
                                                         finite_difference_jacobian)
    from vid2sid_ros.calibration.objective import TrialObjective, trajectory_vector

    rig = make_rig(parameters=str(ALLFREE_PARAMETERS_PATH))
    t = rig.make_twin()
    exc = build_excitation({"kind": "step", "amplitude": 0.8, "t_step": 0.05, "t_release": 0.5,
                            "duration": 1.0, "rate": 30.0}, ACT)
    nom = rig.parameters.nominal()
    ref = t.rollout(exc).trajectory
    t.set_parameters({k: 1.3 * nom[k] for k in ("youngs_modulus", "actuation_gain", "density")})
    scaled = t.rollout(exc).trajectory
    assert np.max(np.abs(scaled.keypoints - ref.keypoints)) < 1e-6
    t.set_parameters({**nom, "youngs_modulus": 1.3 * nom["youngs_modulus"]})  # not a ratio-preserving change
    assert np.max(np.abs(t.rollout(exc).trajectory.keypoints - ref.keypoints)) > 1.0

    t.set_parameters(nom)
    objective = TrialObjective(t, [exc], [ref], rig.parameters)
    # what check_identifiability does, at its default step (0.01), sharing the rollouts between specs
    J, _, _, E = finite_difference_jacobian(lambda v: objective.evaluate(v)[0], rig.parameters, nom,
                                            lambda e: trajectory_vector(e.sim, [ref]), return_error=True)
    with pytest.warns(IdentifiabilityWarning, match="only their ratios are observable"):
        report = analyse_jacobian(J, rig.parameters, nom, fd_error=E)
    (weak,) = report.weak_directions  # scaling E, gain and density together: all loadings of one sign
    assert set(weak["combination"]) == {"youngs_modulus", "actuation_gain", "density"}
    assert len({np.sign(v) for v in weak["combination"].values()}) == 1
    shipped = load_parameter_set(PARAMETERS_PATH)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        ok = analyse_jacobian(J[:, :3], shipped, nom, fd_error=E[:, :3])
    assert ok.warning is None and ok.condition_number < 20


def test_divergence_is_reported_not_raised(rig):
    t = rig.make_twin(dt_safety=1.0)  # beyond the explicit integrator's stability limit
    res = t.rollout(_step(1.0, 0.5))
    assert res.diverged and "diverged at command step" in res.message
    assert not res.trajectory.valid[-1].any() and np.isnan(res.trajectory.keypoints[-1]).all()


def test_water_drag_and_added_mass_slow_the_tentacle():
    r = make_water_rig()
    t = r.make_twin()
    exc = _step(1.0, 0.5)
    tip = {}
    for label, values in (("nominal", {}), ("drag", {"drag_normal_coefficient": 2.5}),
                          ("mass", {"added_mass_coefficient": 1.8})):
        t.set_parameters({**r.parameters.nominal(), **values})
        res = t.rollout(exc)
        assert not res.diverged
        tip[label] = res.trajectory.keypoints[:, -1, 0] - t.base_px[0]
    assert tip["nominal"][-1] > 10
    assert tip["drag"][-1] < tip["nominal"][-1] - 1       # more drag: slower swing
    assert tip["mass"][5] < tip["nominal"][5] - 0.5       # more added mass: later response
    # the air twin at the same material moves faster than the one in water
    air = make_rig().make_twin().rollout(exc).trajectory.keypoints[:, -1, 0] - t.base_px[0]
    assert air[5] > tip["nominal"][5]


def test_numba_cache_folder_is_persistent():
    assert os.environ["NUMBA_CACHE_DIR"] == str(numba_cache_dir())
    import numba

    assert numba.config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"]


def test_rejects_excitation_for_other_actuators(twin):
    exc = Excitation("two", 30.0, np.zeros((5, 2)), ("a", "b"))
    with pytest.raises(TwinError, match="expected one column"):
        twin.rollout(exc)


def test_sim2sim_camera_trial_uses_the_centreline_tracker():
    # regression: the sim2sim "real" side built a MarkerTracker for every rig and crashed
    # on the tentacle's centreline tracker config (`vid2sid benchmark sim2sim --rig tentacle`)
    from vid2sid_ros.benchmark.sim2sim import make_sim2sim_trial

    rig = registry_make_rig("tentacle")
    rig.excitations = {"train": [build_excitation({"kind": "step", "amplitude": 0.8, "t_step": 0.1,
                                                   "duration": 0.5, "rate": 30.0}, rig.make_twin().actuator_names)],
                       "holdout": []}
    trial = make_sim2sim_trial(rig, rig.parameters.nominal(), seed=1, noise="camera")
    info = trial.meta["tracking"]["step_0.8"]
    assert trial.train[0].names == tuple(f"c{k}" for k in range(len(trial.train[0].names)))
    assert info["invalid_fraction"] < 0.1
    assert info["tracking_error_px_mean"] < 1.0
