"""The rig: ONE config file per robot (schema, loader, built-in rigs, trials).

- :func:`load_rig` (:mod:`.loader`): a config file, a built-in rig name or a mapping -> :class:`Rig`.
- :mod:`.schema`: the table of every key (type, unit, default, meaning); ``docs/rig_config.md``.
- :func:`build_real_trial` (:mod:`.trials`): a rig's trials -> the :class:`RealTrial` a calibration fits.
- ``builtin/``: the built-in rigs ``finger``, ``tentacle``, ``tentacle_water``, ``pendulum`` as configs.
"""

from ..core.rig import Rig, TrialSpec, UnknownRigError
from .loader import (ALLOW_CODE_ENV, BUILTIN_RIGS, CodeRefusedError, available_rigs, code_allowed, load_rig,
                     read_config)
from .schema import KEYS, RigConfigError, reference_markdown
from .trials import build_real_trial

__all__ = ["Rig", "TrialSpec", "UnknownRigError", "load_rig", "BUILTIN_RIGS", "available_rigs", "code_allowed",
           "ALLOW_CODE_ENV", "CodeRefusedError", "RigConfigError", "KEYS", "reference_markdown", "read_config",
           "build_real_trial"]
