"""Registry of proposers: a name -> ``"module:Class"``, imported lazily.

``make_proposer("reasoner")``, ``make_proposer("cmaes", seed=3)``,
``make_proposer("gemini", model="gemini-2.5-pro")``... Keyword arguments go to the
class constructor. Importing this module imports no optional backend (google-genai,
scikit-optimize, cmaes are loaded when their proposer is built).
"""

from __future__ import annotations

import importlib
from typing import Any

from .proposer import Proposer

__all__ = ["PROPOSERS", "make_proposer", "available_proposers", "accepts_option", "proposer_class",
           "UnknownProposerError",
           "BASELINE_NAMES", "PEER_NAMES"]

#: proposer name -> "module:Class"
PROPOSERS: dict[str, str] = {
    "reasoner": "vid2sid_ros.calibration.proposers.reasoner:Reasoner",
    "random": "vid2sid_ros.calibration.proposers.baselines:RandomSearch",
    "nelder-mead": "vid2sid_ros.calibration.proposers.baselines:NelderMead",
    "golden-cd": "vid2sid_ros.calibration.proposers.baselines:GoldenCoordinateDescent",
    "bo": "vid2sid_ros.calibration.proposers.baselines:BayesianOptimization",
    "bo-tpe": "vid2sid_ros.calibration.proposers.baselines:BayesianOptimizationTPE",
    "cmaes": "vid2sid_ros.calibration.proposers.baselines:CMAES",
    "gemini": "vid2sid_ros.calibration.proposers.vlm.gemini:GeminiProposer",
    "openai-compatible": "vid2sid_ros.calibration.proposers.vlm.openai_compat:OpenAICompatibleProposer",
    "least-squares": "vid2sid_ros.calibration.proposers.peers:LeastSquaresPeer",
    "mujoco-sysid": "vid2sid_ros.calibration.proposers.peers:MujocoSysidPeer",
}

#: the paper's five black-box baselines
BASELINE_NAMES = ("random", "nelder-mead", "golden-cd", "bo", "cmaes")

#: the strongest peers: general least-squares solvers on the same residual vector
PEER_NAMES = ("least-squares", "mujoco-sysid")


class UnknownProposerError(KeyError):
    """The proposer name is not registered; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


def available_proposers() -> list[str]:
    """Registered proposer names."""
    return list(PROPOSERS)


def _proposer_class(name: str):
    if name not in PROPOSERS:
        from ...core.names import did_you_mean

        raise UnknownProposerError(f"unknown proposer {name!r}{did_you_mean(name, PROPOSERS)}; valid proposers: "
                                   f"{', '.join(PROPOSERS)}")
    module, cls = PROPOSERS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"proposer {name!r} needs {module}, which failed to import: {err}") from err
    return getattr(mod, cls)


def proposer_class(name: str) -> type:
    """The class registered as proposer ``name`` (imported on first use).

    Raises:
        UnknownProposerError: an unknown name (with the closest registered one). ImportError: its module.
    """
    return _proposer_class(name)


def accepts_option(name: str, option: str) -> bool:
    """True if proposer ``name``'s constructor takes keyword ``option`` (e.g. ``fallback``).

    Raises:
        UnknownProposerError, ImportError: as :func:`make_proposer`.
    """
    import inspect

    params = inspect.signature(_proposer_class(name)).parameters
    return option in params


def make_proposer(name: str, **kwargs: Any) -> Proposer:
    """Build a registered proposer.

    Args:
        name: a key of :data:`PROPOSERS`.
        kwargs: constructor arguments of that proposer.

    Raises:
        UnknownProposerError: unknown name (lists the valid names).
        ImportError: the proposer's optional dependency is missing (message says which).
    """
    return _proposer_class(name)(**kwargs)
