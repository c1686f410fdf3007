"""``load_rig(path_or_name) -> Rig``: the one loader of rig configs.

Every command, launch file and node reads a rig through :func:`load_rig`. It reads the
YAML, validates the WHOLE file against :mod:`vid2sid_ros.rigs.schema` before anything
is built (errors: ``file:key: expected X, got Y (did you mean Z?)``), then builds the
:class:`~vid2sid_ros.core.rig.Rig`: the twin (a model file, a ``robot_description``, or a
built-in twin by name), the parameter spec (plus one nuisance parameter per ``free``
initial-state coordinate of each trial), the tracker, the named excitations and the
trials (each trial source checked by its kind in :mod:`vid2sid_ros.io.sources`), and
finally builds the twin once to check every keypoint, marker and parameter target
against the model.

Names: ``finger``, ``tentacle``, ``tentacle_water``, ``pendulum`` are the built-in rig
configs (:data:`BUILTIN_RIGS`); another built-in twin name (``toy``) is the config
``{rig: NAME, model: {builtin: NAME}}``. A config whose ``rig`` is a built-in rig name and
that gives no ``model`` extends that rig (the legacy calibrate config
``rig: finger`` + ``real:`` + ``calibration:``).

Code: a ``module:function`` reference (as ``path_or_name`` or as the config's ``rig``)
is refused unless ``allow_code=True`` (``--allow-code``) or ``VID2SID_ALLOW_CODE=1``;
the refusal says so and nothing is imported.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

from ..core.excitation import Excitation, ExcitationError, build_excitation, build_excitation_sets
from ..core.files import file_problem
from ..core.names import did_you_mean
from ..core.parameters import SPEC_FIELDS, ParameterSet, ParameterSpec, ParameterSpecError, load_parameter_set
from ..core.rig import Rig, TrialSpec, UnknownRigError
from ..io.sources import SOURCES, SourceContext, SourceError, check_clip_size
from ..share import PACKAGE_DIR, resolve_path
from .schema import RigConfigError, describe_value, validate_tree

__all__ = ["load_rig", "honour_targets", "part_excitations", "BUILTIN_RIGS", "available_rigs", "RigConfigError",
           "CodeRefusedError", "code_allowed",
           "read_config", "ALLOW_CODE_ENV"]

#: built-in rig name -> its config file (the same format as a user's)
BUILTIN_RIGS: dict[str, Path] = {n: PACKAGE_DIR / "rigs" / "builtin" / f"{n}.yaml"
                                 for n in ("finger", "tentacle", "tentacle_water", "pendulum")}

#: environment variable that allows ``module:function`` references (as ``--allow-code``)
ALLOW_CODE_ENV = "VID2SID_ALLOW_CODE"

_CODE_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_INIT_KEY_RE = re.compile(r"^(?P<what>qpos|qvel)\[\s*(?P<joint>[^\],]+?)\s*(?:,\s*(?P<c>\d+)\s*)?\]$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


class CodeRefusedError(RigConfigError):
    """A config names code (``module:function``) and code was not allowed."""


def available_rigs() -> list[str]:
    """Rig names :func:`load_rig` accepts besides files: built-in rig configs, then other built-in twins."""
    from ..sim.registry import BUILTIN_TWINS

    return list(BUILTIN_RIGS) + [n for n in BUILTIN_TWINS if n not in BUILTIN_RIGS]


def code_allowed(allow_code: bool = False) -> bool:
    """True if ``module:function`` references may be imported (the flag, or ``VID2SID_ALLOW_CODE=1``)."""
    return bool(allow_code) or os.environ.get(ALLOW_CODE_ENV, "").strip().lower() in ("1", "true", "yes")


def read_config(path: str | Path) -> tuple[dict[str, Any], str, Path]:
    """Read a rig config YAML: ``(document, file label, directory)``.

    Raises:
        RigConfigError: missing file, not UTF-8, not YAML, not a mapping (one line naming the file).
    """
    p = resolve_path(path, Path.cwd())
    if not p.exists():
        raise RigConfigError(f"rig config not found: {p}" + (f" (built-in rigs: {', '.join(available_rigs())})"
                                                             if "/" not in str(path) else ""))
    from ..core.files import NotARegularFileError, read_regular_file

    try:
        text = read_regular_file(p, max_bytes=64 * 1024 * 1024, what="the rig config").decode("utf-8")
    except UnicodeDecodeError as err:
        raise RigConfigError(f"{p}: not a UTF-8 text YAML file ({err.reason} at byte {err.start})") from None
    except NotARegularFileError as err:  # a FIFO, a device, a directory: refused, never read (never blocks)
        raise RigConfigError(str(err)) from None
    except OSError as err:
        raise RigConfigError(f"{p}: cannot read: {err.strerror or err}") from None
    from ..core.yamlio import YAMLInputError, loads_yaml

    try:
        doc = loads_yaml(text, source=str(p))  # strict: a duplicate key is an error naming file:line
    except YAMLInputError as err:
        raise RigConfigError(str(err).splitlines()[0]) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise RigConfigError(f"{p}: expected a mapping of rig config keys at the top level, got {describe_value(doc)}")
    return dict(doc), str(p), p.parent


def _refuse(ref: str, where: str) -> CodeRefusedError:
    return CodeRefusedError(f"{where}: {ref!r} is a code reference (module:function); loading a rig config never "
                            f"runs code unless you allow it with --allow-code or {ALLOW_CODE_ENV}=1")


def _load_code(ref: str, options: Mapping[str, Any], where: str) -> Rig:
    import importlib

    mod, fn = ref.split(":", 1)
    try:
        factory = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as err:
        raise RigConfigError(f"{where}: rig entry point {ref!r} cannot be loaded: {err}") from None
    rig = factory(**dict(options))
    if not isinstance(rig, Rig):
        raise RigConfigError(f"{where}: rig entry point {ref!r} returned {type(rig).__name__}, not a Rig")
    return rig


def load_rig(path_or_name: str | Path | Mapping[str, Any] | Rig, *, allow_code: bool = False,
             overrides: Mapping[str, Any] | None = None, check_model: bool = True,
             source: tuple[str, str | Path] | None = None) -> Rig:
    """Load a rig: a config file, a built-in rig name, a config mapping, or a Rig (returned as is).

    Args:
        path_or_name: ``my_rig.yaml``, ``finger``, ``{rig: ..., model: ...}`` or a :class:`Rig`.
        allow_code: allow ``module:function`` references (also ``VID2SID_ALLOW_CODE=1``).
        overrides: top-level keys replacing the file's (mappings merged one level deep).
        check_model: build the twin once to check keypoints, markers and targets.
        source: ``(file label, directory)`` of a mapping read elsewhere (messages name the
            file; relative paths resolve against the directory); default ``<config>``, cwd.

    Returns:
        The :class:`Rig`; ``rig.config`` is the validated document (paths resolved),
        ``rig.source`` the file.

    Raises:
        RigConfigError: any problem, one line ``file:key: ...`` (CodeRefusedError for
            refused code); nothing is run or written before the whole file is checked.
    """
    if isinstance(path_or_name, Rig):
        return path_or_name
    if isinstance(path_or_name, Mapping):
        doc = copy.deepcopy(dict(path_or_name))
        file, base = (str(source[0]), Path(source[1])) if source else ("<config>", Path.cwd())
    else:
        s = str(path_or_name)
        if s in BUILTIN_RIGS:
            doc, file, base = read_config(BUILTIN_RIGS[s])
        elif _CODE_RE.match(s) and not Path(s).exists():
            if not code_allowed(allow_code):
                raise _refuse(s, "rig")
            return _load_code(s, dict((overrides or {}).get("rig_options") or {}), "rig")
        else:
            from ..sim.registry import BUILTIN_TWINS

            if s in BUILTIN_TWINS:
                doc, file, base = {"rig": s, "model": {"builtin": s}}, f"<built-in twin {s}>", PACKAGE_DIR
            elif not Path(s).suffix and not Path(s).exists() and "/" not in s:
                raise UnknownRigError(f"unknown rig {s!r}{did_you_mean(s, available_rigs())}; built-in rigs: "
                                      f"{', '.join(available_rigs())}; or give a rig config file (.yaml)")
            else:
                doc, file, base = read_config(s)
    for k, v in dict(overrides or {}).items():
        if isinstance(v, Mapping) and isinstance(doc.get(k), Mapping):
            doc[k] = {**doc[k], **dict(v)}
        else:
            doc[k] = v
    return _build(doc, file, base, allow_code=allow_code, check_model=check_model)


# -- building ------------------------------------------------------------------------------------
def _legacy_trial(doc: dict[str, Any], file: str) -> None:
    """``trial: {video, fps, ...}`` -> ``trials: [{source: {video: ...}, ...}]`` (+ ``tracker``)."""
    t = doc.pop("trial", None)
    if t is None:
        return
    if "trials" in doc:
        raise RigConfigError(f"{file}:trial: give either 'trial' (legacy, one clip) or 'trials', not both")
    t = dict(t)
    if "tracker" in t:
        if "tracker" in doc:
            raise RigConfigError(f"{file}:trial.tracker: the tracker is also given at the top level; keep one")
        doc["tracker"] = t.pop("tracker")
    if not t.get("video"):
        return
    src: dict[str, Any] = {"path": t["video"]}
    for k in ("fps", "repair_frame_timing", "background_region"):
        if k in t:
            src[k] = t[k]
    start = t.get("start_frame", 0) or 0
    stop = None if t.get("max_frames") is None else int(start) + int(t["max_frames"])
    trial: dict[str, Any] = {"name": Path(str(t["video"])).stem, "source": {"video": src},
                             "excitation": t.get("excitation", "none"), "frames": {"start": start, "stop": stop},
                             "split": {"train_fraction": t.get("train_fraction", 0.6)}}
    doc["trials"] = [trial]


def _parameters(value: Any, file: str, base: Path) -> ParameterSet:
    if isinstance(value, str):
        p = resolve_path(value, base)
        why = file_problem(p)
        if why:  # missing, or a FIFO / directory / device (never opened)
            raise RigConfigError(f"{file}:parameters: {why}")
        try:
            return load_parameter_set(p)
        except (ParameterSpecError, FileNotFoundError) as err:
            raise RigConfigError(f"{file}:parameters: {err}") from None
    data = dict(value)
    if "parameters" not in data:  # {name: {unit, lower, ...}}
        entries = []
        for name, spec in data.items():
            if name == "rig":
                continue
            if not isinstance(spec, Mapping):
                raise RigConfigError(f"{file}:parameters.{name}: expected a mapping {{unit, lower, upper, nominal, "
                                     f"target, ...}}, got {describe_value(spec)}")
            unknown = [k for k in spec if k not in SPEC_FIELDS]
            if unknown:  # the key's own path, with the closest field
                raise RigConfigError(f"{file}:parameters.{name}.{unknown[0]}: unknown key"
                                     f"{did_you_mean(unknown[0], SPEC_FIELDS[1:])}; valid keys here: "
                                     f"{', '.join(SPEC_FIELDS[1:])}")
            entries.append({"name": name, **dict(spec)})
        data = {"rig": data.get("rig", ""), "parameters": entries}
    try:
        return ParameterSet.from_dict(data, source=f"{file}:parameters")
    except ParameterSpecError as err:
        raise RigConfigError(str(err)) from None


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def _build(doc: dict[str, Any], file: str, base: Path, *, allow_code: bool, check_model: bool) -> Rig:
    """The rig a validated config describes: its base rig with the config's keys applied; RigConfigError otherwise."""
    _legacy_trial(doc, file)
    validate_tree(doc, file)
    rig_name = doc.get("rig")
    name_str = str(rig_name) if rig_name is not None else Path(file).stem
    rig, doc, model = _base_rig(doc, file, base, name_str, allow_code=allow_code, check_model=check_model)
    user_model = not (model is None or isinstance(model, Mapping) and "builtin" in model)
    rig.name = name_str if rig_name is not None else rig.name
    rig.source = Path(file) if not file.startswith("<") else None
    if doc.get("description"):
        rig.description = " ".join(str(doc["description"]).split())
    if doc.get("parameters") is not None and not user_model:
        _replace_parameters(rig, doc["parameters"], file, base)
    if doc.get("tracker") is not None:
        from ..perception import make_tracker

        try:
            make_tracker(doc["tracker"])
        except ValueError as err:
            raise RigConfigError(f"{file}:tracker: {err}") from None
        rig.tracker = dict(doc["tracker"])
    from ..perception.quality import min_tracked_fraction

    try:  # checked now, used by every trial source when it is read
        min_tracked_fraction(doc, str(file))
    except ValueError as err:
        raise RigConfigError(str(err)) from None
    named = _named_excitations(doc, rig, file, base)
    rig.named_excitations = dict(named)
    rig.keypoints = tuple(doc["keypoints"]) if doc.get("keypoints") else rig.keypoints  # trial sources default to them
    if doc.get("trials"):
        rig.trials = _trials(doc["trials"], rig, named, file, base)
        _trial_parameters(rig, doc["trials"], file)
        rig.excitations = _trial_excitations(rig, file, base)
    _free_parameters(rig, doc, file)
    rig.camera = dict(doc.get("camera") or {})
    for t in rig.trials:  # a clip of another size than the camera's: tracked pixels are not the twin's
        if t.kind == "video":
            try:
                check_clip_size(t.source["video"]["path"], doc, where=f"{t.where}.source.video", base=base)
            except SourceError as err:
                raise RigConfigError(str(err)) from None
    rig.nuisance = dict(doc.get("nuisance") or {})
    rig.calibration = dict(doc.get("calibration") or {})
    rig.proposer = {k: doc[k] for k in ("proposer", "proposer_options", "fallback") if k in doc}
    rig.keypoints = tuple(doc["keypoints"]) if doc.get("keypoints") else rig.keypoints
    if rig.tracker and rig.keypoints:
        _check_tracker_names(rig, file)
    if not rig.parameters.rig:  # an inline spec names no rig: result.yaml and randomization.yaml say this one
        import dataclasses

        rig.parameters = dataclasses.replace(rig.parameters, rig=rig.name)
    resolved = dict(doc)
    resolved["_source"], resolved["_dir"] = file, str(base)
    rig.config = {**dict(rig.config or {}), **resolved}
    if check_model:
        _check_twin(rig, file)
    return rig


def _base_rig(doc: dict[str, Any], file: str, base: Path, name_str: str, *, allow_code: bool,
              check_model: bool) -> tuple[Rig, dict[str, Any], Any]:
    """The rig a config starts from, the config as it applies to it, and its model block.

    The base is a code entry point (``rig: module:function``), a built-in rig this config
    extends (its keys then override the built-in's), or the config's own model.
    """
    from ..sim.registry import BUILTIN_TWINS

    rig_name = doc.get("rig")
    model = doc.get("model")
    base_rig: Rig | None = None
    if isinstance(rig_name, str) and ":" in rig_name:
        if not _CODE_RE.match(rig_name):
            raise RigConfigError(f"{file}:rig: expected a name (letters, digits, _ and -), got {rig_name!r}")
        if not code_allowed(allow_code):
            raise _refuse(rig_name, f"{file}:rig")
        base_rig = _load_code(rig_name, doc.get("rig_options") or {}, f"{file}:rig")
    elif isinstance(rig_name, str) and not _NAME_RE.match(rig_name):
        raise RigConfigError(f"{file}:rig: expected a name (letters, digits, _ and -), got {rig_name!r}")
    elif model is None and isinstance(rig_name, str) and rig_name in BUILTIN_RIGS and \
            Path(file).resolve() != BUILTIN_RIGS[rig_name].resolve():
        # a config extending a built-in rig (legacy calibrate config)
        ext = {k: v for k, v in doc.items() if k not in ("rig", "rig_options")}
        parent_doc, parent_file, parent_base = read_config(BUILTIN_RIGS[rig_name])
        if doc.get("rig_options"):
            m = parent_doc.get("model")
            if isinstance(m, Mapping) and "builtin" in m:
                parent_doc["model"] = {**m, "options": {**dict(m.get("options") or {}), **doc["rig_options"]}}
            else:
                raise RigConfigError(f"{file}:rig_options: rig '{rig_name}' is a model file, it takes no options")
        base_rig = _build(parent_doc, parent_file, parent_base, allow_code=False, check_model=check_model)
        # this file's keys override the built-in rig's
        doc = {**{k: v for k, v in base_rig.config.items() if k in ("description",)}, **ext, "rig": rig_name}
        model = None
    elif model is None and isinstance(rig_name, str) and rig_name in BUILTIN_TWINS:
        model = {"builtin": rig_name}
    if base_rig is None:
        if model is None:
            raise RigConfigError(f"{file}:model: missing (required): an MJCF/URDF file, {{robot_description: ...}} "
                                 f"or {{builtin: {'|'.join(BUILTIN_TWINS)}}}")
        base_rig = _model_rig(doc, model, name_str, file, base)
    return base_rig, doc, model


def _replace_parameters(rig: Rig, block: Any, file: str, base: Path) -> None:
    """Replace a built-in rig's parameter spec by the config's; it must name exactly the rig's parameters."""
    spec = _parameters(block, file, base)
    unknown = [n for n in spec.names if n not in rig.parameters]
    missing = [n for n in rig.parameters.names if n not in spec]
    if unknown or missing:
        raise RigConfigError(f"{file}:parameters: {spec.source} does not match rig '{rig.name}'"
                             + (f"; unknown parameter(s) {unknown}" if unknown else "")
                             + (f"; missing parameter(s) {missing}" if missing else "")
                             + f"; the rig's parameters are {', '.join(rig.parameters.names)}")
    honour_targets(rig, spec, file)
    rig.parameters = spec


def _free_parameters(rig: Rig, doc: Mapping[str, Any], file: str) -> None:
    """Freeze every parameter the config's ``free:`` list (or a trial's ``free_init``) does not name."""
    if doc.get("free") is not None and not doc["free"]:  # an empty list would silently calibrate everything
        raise RigConfigError(f"{file}:free: lists no parameter; name the parameters to calibrate or drop the key")
    if doc.get("free"):
        unknown = [n for n in doc["free"] if n not in rig.parameters]
        if unknown:
            raise RigConfigError(f"{file}:free: unknown parameter {unknown[0]!r}"
                                 f"{did_you_mean(unknown[0], rig.parameters.names)}; parameters: "
                                 f"{', '.join(rig.parameters.names)}")
        keep_free = list(doc["free"]) + [t for tr in rig.trials for t in tr.free_init.values()]
        rig.parameters = rig.parameters.with_frozen(free=keep_free)


def _check_tracker_names(rig: Rig, file: str) -> None:
    """The tracker must report exactly the rig's keypoints (the twin's names), or calibration cannot pair them.

    Raises:
        RigConfigError: ``file:tracker.markers[i].name`` (or ``file:tracker``) naming the
            names that are not keypoints and the keypoints without a marker.
    """
    from ..perception import make_tracker, tracker_names

    try:
        names = tracker_names(make_tracker(rig.tracker))
    except ValueError:
        return  # a tracker without fixed names (checked when it runs)
    keypoints = tuple(rig.keypoints)
    extra = [n for n in names if n not in keypoints]
    missing = [k for k in keypoints if k not in names]
    if not extra and not missing:
        return
    markers = [m.get("name") if isinstance(m, Mapping) else None for m in rig.tracker.get("markers") or []]
    where = f"tracker.markers[{markers.index(extra[0])}].name" if extra and extra[0] in markers else "tracker"
    close = difflib.get_close_matches(extra[0], missing or keypoints, n=1) if extra else []
    raise RigConfigError(
        f"{file}:{where}: the tracker's names must be the rig's keypoints ({', '.join(keypoints)}); "
        + (f"not keypoints: {', '.join(extra)}" if extra else "")
        + ("; " if extra and missing else "") + (f"no marker for: {', '.join(missing)}" if missing else "")
        + (f" (did you mean {close[0]}?)" if close else ""))


def honour_targets(rig: Rig, spec: ParameterSet, src: str) -> None:
    """Make the twin write ``spec``'s targets, or refuse a spec whose targets it would ignore.

    A rig's twin factory binds the rig's own spec; a ``parameters:`` override that only
    changes bounds, nominal values, scales or frozen flags needs nothing more. When a
    ``target`` differs, the twin is rebuilt with ``make_twin(parameters=spec)`` (MuJoCo
    twins parse and write each target, ratios included); a rig whose factory cannot take
    the spec is refused, never silently calibrated with the old targets.

    Raises:
        RigConfigError: naming the config, the spec file, the parameter and both targets.
    """
    changed = [s.name for s in spec if s.target != rig.parameters[s.name].target]
    if not changed:
        return
    n = changed[0]
    what = (f"{src}:parameters: {spec.source}: parameter '{n}' has target {spec[n].target!r}, the rig's is "
            f"{rig.parameters[n].target!r}" + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""))
    orig = rig.make_twin
    try:
        twin = orig(parameters=spec)
    except TypeError:
        twin = None
    except Exception as err:  # noqa: BLE001 - a bad target for this model: one line naming it
        raise RigConfigError(f"{what}: {err}") from None
    honoured = (twin is not None and bool(getattr(twin, "writes_targets", False))
                and all(twin.parameters[c].target == spec[c].target for c in changed))
    close = getattr(twin, "close", None)
    if callable(close):
        close()
    if not honoured:
        raise RigConfigError(f"{what}; rig '{rig.name}' writes its parameters to fixed places and cannot re-target "
                             "them: remove 'target' from the spec (or give the rig's)")

    def make_twin(**kw):
        return orig(**{"parameters": spec, **kw})

    rig.make_twin = make_twin


def _model_rig(doc: Mapping[str, Any], model: Any, name: str, file: str, base: Path) -> Rig:
    """The base rig of ``model``: a built-in twin, or a model file / robot_description."""
    from ..sim.registry import BUILTIN_TWINS, make_rig

    if isinstance(model, Mapping):
        given = [k for k in ("path", "robot_description", "builtin") if k in model]
        if len(given) != 1:
            raise RigConfigError(f"{file}:model: expected exactly one of path, robot_description, builtin, got "
                                 f"{given or list(model)}")
        if "builtin" in model:
            b = model["builtin"]
            if b not in BUILTIN_TWINS:
                raise RigConfigError(f"{file}:model.builtin: unknown built-in twin {b!r}; valid: "
                                     f"{', '.join(BUILTIN_TWINS)}")
            opts = {**dict(doc.get("rig_options") or {}), **dict(model.get("options") or {})}
            try:
                return make_rig(b, **opts)
            except (TypeError, ValueError) as err:  # TwinError/ParameterSpecError/ExcitationError are ValueErrors
                raise RigConfigError(f"{file}:model.options: {' '.join(str(err).split())}") from None
        if model.get("options"):
            raise RigConfigError(f"{file}:model.options: only a built-in twin takes options")
    return _user_model_rig(doc, model, name, file, base)


def _user_model_rig(doc: Mapping[str, Any], model: Any, name: str, file: str, base: Path) -> Rig:
    """A rig around a user's MJCF/URDF model (the twin: :class:`vid2sid_ros.sim.user_model.UserModelTwin`)."""
    for k in ("parameters", "keypoints"):
        if doc.get(k) is None:
            raise RigConfigError(f"{file}:{k}: missing (required for a model file)")
    if isinstance(model, Mapping) and "robot_description" in model:
        from ..sim.mujoco_model import is_urdf_text

        text = model["robot_description"]
        if not isinstance(text, str) or not is_urdf_text(text):  # the root element, as the model loader decides
            raise RigConfigError(f"{file}:model.robot_description: expected URDF XML text (the robot_description "
                                 f"parameter's value, '<robot ...>...</robot>'), got {str(text)[:60]!r}")
        model_path: Path | str | dict[str, str] = {"robot_description": text}  # build_model's text form
        model_key = "model.robot_description"
    else:
        raw = model["path"] if isinstance(model, Mapping) else model
        model_path = resolve_path(raw, base)
        model_key = "model.path" if isinstance(model, Mapping) else "model"
        why = file_problem(model_path)
        if why:  # missing, or a FIFO / directory / device (never opened)
            raise RigConfigError(f"{file}:{model_key}: model " + why)
        if Path(model_path).suffix.lower() not in (".xml", ".mjcf", ".urdf"):
            raise RigConfigError(f"{file}:{model_key}: expected an MJCF (.xml) or URDF (.urdf) file, got "
                                 f"{Path(model_path).name}")
    parameters = _parameters(doc["parameters"], file, base)
    twin_args: dict[str, Any] = {"model_path": model_path, "keypoints": dict(doc["keypoints"]),
                                 "projection": dict(doc.get("projection") or {}),
                                 "max_physics_timestep": float(doc.get("max_physics_timestep", 0.004)), "name": name}
    extra = {"markers": doc.get("markers"), "camera": doc.get("camera"), "actuators": doc.get("actuators"),
             "render": doc.get("render"), "base_dir": base, "source": file}
    twin_args["_extra"] = {k: v for k, v in extra.items() if v}
    if not (twin_args["max_physics_timestep"] > 0):
        raise RigConfigError(f"{file}:max_physics_timestep: expected a number > 0 (s), got "
                             f"{doc.get('max_physics_timestep')!r}")

    def make_twin(**kw: Any) -> Any:
        from ..sim.user_model import build_user_twin

        args = {k: v for k, v in twin_args.items()}
        args["_extra"] = {**args["_extra"], "trial_init": {t.name: dict(t.init) for t in rig.trials if t.init}}
        args["parameters"] = kw.pop("parameters", rig.parameters)
        if "width" in kw or "height" in kw:
            size = {k: kw.pop(k) for k in ("width", "height") if k in kw}
            if "camera" in args["_extra"]:
                # a pinhole camera keeps its view: intrinsics scaled to the size asked (PinholeCamera.resized)
                args["image_size"] = (size.get("width"), size.get("height"))
            else:
                args["projection"] = {**args["projection"], **size}
        bad = [k for k in kw if k not in args]
        if bad:
            raise TypeError(f"make_twin: unknown argument(s) {bad}; valid: parameters, width, height, "
                            f"{', '.join(k for k in args if not k.startswith('_'))}")
        args.update(kw)
        return build_user_twin(**args)

    rig = Rig(name=name, description=" ".join(str(doc.get("description") or "").split()), parameters=parameters,
              excitations={"train": [], "holdout": []}, make_twin=make_twin,
              tracker=dict(doc.get("tracker") or {}), config={})
    return rig


def _named_excitations(doc: Mapping[str, Any], rig: Rig, file: str, base: Path) -> dict[str, Excitation]:
    """``excitations:``: named profiles (returned) or legacy ``{train: [...], holdout: [...]}`` sets (set on the rig)."""
    exc = doc.get("excitations")
    if not exc:
        return {}
    actuators = _actuators(rig, doc)
    named: dict[str, Excitation] = {}
    sets: dict[str, Any] = {}
    for k, v in exc.items():
        if isinstance(v, list):
            sets[k] = [_resolve_csv(e, base) for e in v]
        else:
            try:
                named[k] = build_excitation({"name": k, **_resolve_csv(dict(v), base)}, actuators)
            except ExcitationError as err:
                raise RigConfigError(f"{file}:excitations.{k}: {err}") from None
    if sets:
        try:
            built = build_excitation_sets(sets, actuators)
        except ExcitationError as err:
            raise RigConfigError(f"{file}:{err}") from None
        rig.excitations = {**rig.excitations, **built}
    return named


def _resolve_csv(cfg: Any, base: Path) -> Any:
    if isinstance(cfg, Mapping) and cfg.get("kind") == "csv" and isinstance(cfg.get("path"), str):
        return {**dict(cfg), "path": str(resolve_path(cfg["path"], base))}
    return cfg


def _actuator_name(entry: Any) -> str:
    """An ``actuators`` entry's name: the entry itself (a name), or its ``name`` (a mapping that adds
    an actuator to the model, ``{name, joint, kind, gear}``)."""
    if isinstance(entry, Mapping):
        return str(entry.get("name", ""))
    return str(entry)


def _actuators(rig: Rig, doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The excitation column names: the config's ``actuators`` (names, or the names of the mappings that
    add actuators), else the built-in rig's excitations' columns, else the model's own actuators in the
    model's order (:func:`_model_actuators`), else ``("u0",)``."""
    if doc.get("actuators"):
        return tuple(_actuator_name(a) for a in doc["actuators"])
    for sets in rig.excitations.values():
        for e in sets:
            return tuple(e.actuator_names)
    return (tuple(_actuator_name(a) for a in (rig.config.get("actuators") or ())) or _model_actuators(rig)
            or ("u0",))


def _model_actuators(rig: Rig) -> tuple[str, ...]:
    """The actuator names of the rig's model, in the model's order (``twin.actuator_names`` of a twin made
    for the purpose and closed), for a model with two or more actuators; ``()`` for one actuator (its
    single column keeps the name ``u0``), none, or a twin that cannot be made here (its own check at the
    end of loading reports why)."""
    if "_model_actuators" in vars(rig):  # one twin per rig, however many parts of the config ask
        return vars(rig)["_model_actuators"]
    names: tuple[str, ...] = ()
    make = getattr(rig, "make_twin", None)
    if callable(make):
        try:
            twin = make()
        except Exception:  # noqa: BLE001 - the load's own model check reports a model that does not build
            twin = None
        if twin is not None:
            try:
                names = tuple(getattr(twin, "actuator_names", ()) or ())
                from ..sim.measurement import joint_units

                vars(rig)["_model_joint_units"] = joint_units(getattr(twin, "model", None))
            finally:
                close = getattr(twin, "close", None)
                if callable(close):
                    close()
    vars(rig)["_model_actuator_names"] = names
    vars(rig)["_model_actuators"] = names = names if len(names) >= 2 else ()
    return names


def _check_measured_joints(rig: Rig, where: str, like: Any) -> None:
    """A joint trial's joints are 1-dof (hinge or slide) joints of the model, each in its joint's unit (rad for a
    hinge, m for a slide): a typo or a wrong unit is a one-line error at load, not a failure at the start point.

    Raises:
        RigConfigError: ``WHERE.joints: 'X' is not a hinge or slide joint of the model; ...`` or
            ``WHERE.units: joint 'X' is a hinge (rad), not m``.
    """
    if like is None or getattr(like, "kind", "") != "joints":
        return
    _model_actuators(rig)
    have = dict(vars(rig).get("_model_joint_units") or {})
    if not have:  # not a MuJoCo model, or one that does not build (its own check reports it)
        return
    units = (like.unit,) * len(like.names) if isinstance(like.unit, str) else tuple(like.unit)
    for i, name in enumerate(like.names):
        if name not in have:
            near = difflib.get_close_matches(name, list(have), n=1)
            raise RigConfigError(f"{where}.joints: {name!r} is not a hinge or slide joint of the model"
                                 + (f" (did you mean {near[0]!r}?)" if near else "")
                                 + f"; its joints: {', '.join(have) or 'none'}")
        u = units[i] if i < len(units) else have[name]
        if u != have[name]:
            kind = "hinge" if have[name] == "rad" else "slide"
            raise RigConfigError(f"{where}.units: joint {name!r} is a {kind} (measured in {have[name]}), not {u}")


def _check_recorded_commands(rig: Rig, where: str, recorded: Excitation) -> None:
    """A trial's recorded command columns name exactly the model's actuators (a joint CSV's ``commands``, a
    bag's command topic): an unknown name or a missing actuator is a one-line error at load, never a column
    mapped by its position.

    Raises:
        RigConfigError: ``WHERE: command column(s) name 'X', which is not an actuator of the model; ...``.
    """
    _model_actuators(rig)
    model = tuple(vars(rig).get("_model_actuator_names") or ())
    names = tuple(recorded.actuator_names)
    if not model or not names:  # the model's own check reports a twin that does not build
        return
    unknown = [n for n in names if n not in model]
    if unknown:
        raise RigConfigError(f"{where}: command column(s) name {', '.join(repr(n) for n in unknown)}, which "
                             f"{'is not an actuator' if len(unknown) == 1 else 'are not actuators'} of the model"
                             f"{did_you_mean(unknown[0], model)}; its actuators: {', '.join(model)}")
    missing = [n for n in model if n not in names]
    if missing:
        raise RigConfigError(f"{where}: no command column for actuator(s) {', '.join(missing)}; the recorded "
                             f"commands drive every actuator of the model ({', '.join(model)}): add a column for each")


def _trials(entries: list, rig: Rig, named: Mapping[str, Excitation], file: str, base: Path) -> list[TrialSpec]:
    """The config's ``trials:`` entries as checked trial specs (sources checked by their kind); RigConfigError."""
    out: list[TrialSpec] = []
    seen: set[str] = set()
    actuators = _actuators(rig, rig.config if rig.config.get("actuators") else {"actuators": None})
    for i, t in enumerate(entries):
        w = f"{file}:trials[{i}]"
        name = str(t.get("name") or f"t{i}")
        if not _NAME_RE.match(name):
            raise RigConfigError(f"{w}.name: expected a name (letters, digits, _ and -), got {name!r}")
        if name in seen:
            raise RigConfigError(f"{w}.name: duplicate trial name {name!r}")
        seen.add(name)
        kind, block = _trial_source_block(t["source"], w)
        split = t.get("split", "train")
        if isinstance(split, Mapping):
            frac = split.get("train_fraction", 0.6)
            if not (_num(frac) and 0.0 < frac <= 1.0):
                raise RigConfigError(f"{w}.split.train_fraction: expected a number in (0, 1], got {frac!r}")
            split = float(frac)
        frames = dict(t.get("frames") or {})
        start, stop = frames.get("start", 0) or 0, frames.get("stop")
        if start < 0 or (stop is not None and stop <= start):
            raise RigConfigError(f"{w}.frames: expected 0 <= start < stop, got start={start}, stop={stop}")
        if kind == "sim2sim" and (start or stop is not None):  # the stand-in would silently ignore the window
            raise RigConfigError(f"{w}.frames: a sim2sim trial is as long as its excitation (the stand-in "
                                 f"simulates all of it), got start={start}, stop={stop}; shorten the excitation "
                                 "or use split: {train_fraction: ...}")
        offset = t.get("time_offset", 0.0) or 0.0
        if offset < 0:
            raise RigConfigError(f"{w}.time_offset: expected a number >= 0 (s), got {offset!r}")
        spec = TrialSpec(name=name, source={kind: {}}, frames=(int(start), None if stop is None else int(stop)),
                         time_offset=float(offset), split=split, where=w)
        exc_cfg = t.get("excitation", "none")
        if isinstance(exc_cfg, str) and exc_cfg not in ("none", "free", "free_decay"):
            if exc_cfg not in named:
                raise RigConfigError(f"{w}.excitation: unknown excitation {exc_cfg!r}{did_you_mean(exc_cfg, named)}"
                                     f"; named excitations: {', '.join(named) or 'none (add excitations:)'}")
            spec.excitation = named[exc_cfg]
        elif isinstance(exc_cfg, Mapping):
            try:
                spec.excitation = build_excitation({"name": name, **_resolve_csv(dict(exc_cfg), base)}, actuators)
            except ExcitationError as err:
                raise RigConfigError(f"{w}.excitation: {err}") from None
        _trial_initial_state(spec, dict(t.get("init") or {}), dict(t.get("init_bounds") or {}))
        ctx = SourceContext(where=f"{w}.source.{kind}", base_dir=base, rig=None, trial=spec,
                            keypoints=tuple(rig.keypoints or ()))
        try:
            spec.source = {kind: SOURCES[kind].check(dict(block), ctx)}
        except SourceError as err:
            raise RigConfigError(str(err)) from None
        out.append(spec)
    sims = [t for t in out if t.kind == "sim2sim"]
    if len({repr(sorted((k, v) for k, v in t.source["sim2sim"].items() if k in ("truth", "truth_range", "seed")))
            for t in sims}) > 1:
        raise RigConfigError(f"{sims[1].where}.source.sim2sim: sim2sim trials share one hidden truth; give every "
                             "sim2sim trial the same seed, truth and truth_range")
    return out


def _trial_source_block(source: Mapping[str, Any], w: str) -> tuple[str, dict[str, Any]]:
    """A trial's one source kind and its block (a shorthand expanded, the source's other keys merged in)."""
    src = dict(source)
    kinds = [k for k in src if k in SOURCES]
    if len(kinds) != 1:
        close = difflib.get_close_matches(next(iter(src), ""), list(SOURCES), n=1) if src else []
        raise RigConfigError(f"{w}.source: expected exactly one source kind ({', '.join(SOURCES)}), got "
                             f"{list(src) or 'none'}" + (f" (did you mean {close[0]}?)" if close and not kinds
                                                        else ""))
    kind = kinds[0]
    sk = SOURCES[kind]
    block = src.pop(kind)
    if block is None:
        block = {}
    elif not isinstance(block, Mapping):
        if sk.shorthand is None:
            raise RigConfigError(f"{w}.source.{kind}: expected a mapping, got {describe_value(block)}")
        block = {sk.shorthand: block}
    return kind, {**dict(block), **src}


def _trial_initial_state(spec: TrialSpec, init: Mapping[Any, Any], bounds: Mapping[Any, Any]) -> None:
    """Fill a trial's measured (``spec.init``, rad or m) and free (``spec.free_init``) initial-state coordinates."""
    w, name, split = spec.where, spec.name, spec.split
    for k, v in init.items():
        m = _INIT_KEY_RE.match(str(k))
        if not m:
            raise RigConfigError(f"{w}.init.{k}: expected a key 'qpos[joint]', 'qvel[joint]' or "
                                 "'qpos[joint,component]'")
        if v == "free" and split == "holdout":  # never fitted: no training sample sees it
            raise RigConfigError(f"{w}.init.{k}: a held-out trial's initial state cannot be free (the calibration "
                                 "fits only the training trials, which never see it); give its measured value "
                                 "(a number), or make it a training trial (split: train or {train_fraction: f})")
        if v == "free":
            joint = re.sub(r"\W+", "_", m.group("joint")).strip("_")
            pname = f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}_{m.group('what')}_{joint}" + (
                f"_{m.group('c')}" if m.group("c") else "")
            if pname[0].isdigit():
                pname = f"t{pname}"
            spec.free_init[str(k)] = pname
        elif _num(v):
            spec.init[str(k)] = float(v)
        else:
            raise RigConfigError(f"{w}.init.{k}: expected a number (rad or m; per second for qvel) or 'free', "
                                 f"got {describe_value(v)}")
    for k, b in bounds.items():
        if k not in spec.free_init:
            raise RigConfigError(f"{w}.init_bounds.{k}: no free initial-state coordinate {k!r} in this trial's "
                                 f"init (free: {', '.join(spec.free_init) or 'none'})")
        if not b[0] < b[1]:
            raise RigConfigError(f"{w}.init_bounds.{k}: expected [lower, upper] with lower < upper, got {b!r}")


def _trial_parameters(rig: Rig, entries: list, file: str) -> None:
    """One nuisance parameter per free initial-state coordinate of each trial (target ``init.X@TRIAL``)."""
    added = []
    for t, raw in zip(rig.trials, entries):
        bounds = dict(raw.get("init_bounds") or {})
        for key, pname in t.free_init.items():
            if pname in rig.parameters:
                raise RigConfigError(f"{t.where}.init.{key}: parameter name {pname!r} is already taken")
            is_vel = key.startswith("qvel")
            lo, hi = bounds.get(key, (-10.0, 10.0) if is_vel else (-math.pi, math.pi))
            nominal = min(max(t.init.get(key, 0.0), lo), hi)
            if not lo <= 0.0 <= hi:
                nominal = 0.5 * (lo + hi)
            added.append(ParameterSpec(pname, "rad/s or m/s" if is_vel else "rad or m", float(lo), float(hi),
                                       float(nominal), meaning=f"initial {key} of trial '{t.name}'",
                                       target=f"init.{key}@{t.name}", kind="nuisance"))
    if added:
        p = rig.parameters
        rig.parameters = ParameterSet(tuple(p) + tuple(added), rig=p.rig, source=p.source, extra=dict(p.extra))


def _trial_excitations(rig: Rig, file: str, base: Path) -> dict[str, list[Excitation]]:
    """The rig's excitation sets from its trials: one entry per trial part (train / holdout).

    A trial is driven by the commands ``vid2sid calibrate`` gives its twin
    (:func:`~vid2sid_ros.rigs.trials.split_recording`): the ones recorded with it when its
    source has them (a joint CSV's ``commands`` columns, a bag's command topic; the source's
    ``commands``, read without the measurements), else its configured excitation, else zero
    commands over its recording's length (the source's ``probe``). ``meta`` carries ``trial``,
    ``init``, ``time_offset``, ``part`` and, for a time split, ``scored_from_frame``.
    """
    import numpy as np

    sets: dict[str, list[Excitation]] = {"train": [], "holdout": []}
    actuators = _actuators(rig, rig.config)
    for t in rig.trials:
        kind = t.kind
        ctx = SourceContext(where=f"{t.where}.source.{kind}", base_dir=base, rig=rig, trial=t)
        try:
            recorded = SOURCES[kind].commands(t.source[kind], ctx)
        except SourceError as err:
            raise RigConfigError(str(err)) from None
        try:
            _check_measured_joints(rig, ctx.where, SOURCES[kind].measurement(t.source[kind], ctx))
        except SourceError as err:
            raise RigConfigError(str(err)) from None
        exc = t.excitation
        if recorded is not None:  # what the trial's recording gives calibrate (rigs/trials.py: _fit_excitation)
            _check_recorded_commands(rig, f"{ctx.where}.commands", recorded)
            exc = Excitation(exc.name if exc is not None else recorded.name, recorded.rate, recorded.values,
                             recorded.actuator_names, dict((exc if exc is not None else recorded).meta))
        elif exc is None:
            try:
                probed = SOURCES[kind].probe(t.source[kind], ctx)
            except SourceError as err:
                raise RigConfigError(str(err)) from None
            if probed is None:
                raise RigConfigError(f"{t.where}.excitation: the {kind} source does not tell its length; give the "
                                     "trial an excitation")
            n, rate = probed
            exc = Excitation("free_decay", float(rate), np.zeros((int(n), len(actuators))), actuators,
                             meta={"kind": "free_decay"})
        for label, parts in part_excitations(t, exc).items():
            sets[label] += parts
    if not sets["train"]:
        raise RigConfigError(f"{file}:trials: no training trial (every trial is split: holdout); fit at least one")
    return sets


def part_excitations(t: TrialSpec, exc: Excitation) -> dict[str, list[Excitation]]:
    """The excitations of trial ``t``'s parts for its whole-trial excitation ``exc``.

    ``split: train|holdout``: one excitation named after the trial. ``{train_fraction: f}``:
    ``<trial>_train`` (the first ``round(f T)`` rows) and ``<trial>_holdout`` (all rows,
    ``meta["scored_from_frame"]`` = where scoring starts). ``meta`` also carries ``trial``,
    ``init``, ``time_offset`` and ``part``, which the twin reads to set the trial's initial state.

    Raises:
        RigConfigError: a training fraction that leaves fewer than 2 rows.
    """
    meta = {**dict(exc.meta), "trial": t.name, "init": dict(t.init), "time_offset": t.time_offset}
    sets: dict[str, list[Excitation]] = {"train": [], "holdout": []}
    if isinstance(t.split, float) and t.split < 1.0:
        n_train = int(round(t.split * exc.num_steps))
        if n_train < 2:
            raise RigConfigError(f"{t.where}.split.train_fraction: leaves {n_train} training steps of "
                                 f"{exc.num_steps}")
        sets["train"].append(Excitation(f"{t.name}_train", exc.rate, exc.values[:n_train], exc.actuator_names,
                                        {**meta, "part": "train", "frames": [0, n_train]}))
        sets["holdout"].append(Excitation(f"{t.name}_holdout", exc.rate, exc.values, exc.actuator_names,
                                          {**meta, "part": "holdout", "scored_from_frame": n_train,
                                           "frames": [n_train, exc.num_steps]}))
    else:
        part = "holdout" if t.split == "holdout" else "train"
        sets[part].append(Excitation(t.name, exc.rate, exc.values, exc.actuator_names, {**meta, "part": part}))
    return sets


def _check_twin(rig: Rig, file: str) -> None:
    """Build the twin once: keypoints, markers, anchor and every target must exist in the model."""
    from ..sim.base import TwinError

    try:
        twin = rig.make_twin()
    except TypeError as err:  # a built-in twin's constructor refused an option (model.options, rig_options)
        m = re.search(r"unexpected keyword argument '([^']+)'", str(err))
        if not m:
            raise
        raise RigConfigError(f"{file}:model.options.{m.group(1)}: unknown option of the built-in twin"
                             f"{_twin_option_hint(str(err), m.group(1))}") from None
    except (TwinError, ParameterSpecError, ValueError, OSError) as err:
        msg = " ".join(str(err).split())
        if msg.startswith(f"{file}:"):  # the twin already names file:key (markers, keypoints, camera, actuators)
            raise RigConfigError(msg) from None
        m = re.match(r"^keypoint '([^']+)': (.*)$", msg)
        if m:
            raise RigConfigError(f"{file}:keypoints.{m.group(1)}: {m.group(2)}") from None
        m = re.match(r"^marker '([^']+)': (.*)$", msg)
        if m:
            raise RigConfigError(f"{file}:markers.{m.group(1)}: {m.group(2)}") from None
        m = re.match(r"^parameter 'trial_init\.(.+)': (.*)$", msg)  # a trial's fixed initial state
        if m:
            i = next((k for k, t in enumerate(rig.trials or ()) if t.name == m.group(1)), None)
            where = f"trials[{i}].init" if i is not None else f"trials.{m.group(1)}.init"
            raise RigConfigError(f"{file}:{where}: {m.group(2)}") from None
        m = re.match(r"^parameter '([^']+)': (.*)$", msg)
        if m:
            raise RigConfigError(f"{file}:parameters.{m.group(1)}.target: {m.group(2)}") from None
        m = re.match(r"^(markers|camera|actuators): (.*)$", msg)
        if m:
            raise RigConfigError(f"{file}:{m.group(1)}: {m.group(2)}") from None
        if msg.startswith("anchor"):
            raise RigConfigError(f"{file}:projection.anchor: {msg.removeprefix('anchor: ')}") from None
        if msg.startswith("cannot load") or "compile" in msg.lower():
            raise RigConfigError(f"{file}:model: {msg}") from None
        raise RigConfigError(f"{file}:model: {msg}") from None
    _check_shared_targets(twin, file)
    _check_csv_columns(rig, twin, file)
    _joint_init_bounds(rig, twin)
    close = getattr(twin, "close", None)
    if callable(close):
        close()


def _check_shared_targets(twin: Any, file: str) -> None:
    """Refuse two parameters that write the same model field element (the last one written would win).

    Raises:
        RigConfigError: ``FILE:parameters: 'a' and 'b' both write dof_damping[elbow]; ...``.
    """
    from ..sim.user_model import element_name

    owner: dict[tuple[str, str, tuple[int, ...]], str] = {}
    for name, bindings in (getattr(twin, "_bindings", None) or {}).items():
        for b in bindings:
            if b.kind not in ("model", "option"):
                continue
            key = (b.kind, b.field, tuple(b.index))
            first = owner.setdefault(key, name)
            if first != name:
                element = (element_name(twin.model, b.field, tuple(b.index)) if b.kind == "model"
                           else f"opt.{b.field}" + (f"[{b.index[0]}]" if b.index else ""))
                raise RigConfigError(f"{file}:parameters: '{first}' and '{name}' both write {element}; give each "
                                     "model field one parameter")


def _twin_option_hint(message: str, option: str) -> str:
    """`` (did you mean X?); its options: ...`` for the built-in twin class ``message`` names
    (``ToyArmTwin.__init__() got an unexpected keyword argument ...``), or "" when it cannot be found."""
    import inspect
    import sys

    m = re.match(r"^(\w+)\.__init__\(\)", message)
    cls = next((getattr(mod, m.group(1)) for name, mod in list(sys.modules.items())
                if m and name.startswith("vid2sid_ros.sim.") and isinstance(getattr(mod, m.group(1), None), type)),
               None)
    if cls is None:
        return ""
    params = inspect.signature(cls).parameters
    valid = [p for p, v in params.items() if v.kind in (v.KEYWORD_ONLY, v.POSITIONAL_OR_KEYWORD)
             and p not in ("self", "parameters", "params")]
    return f"{did_you_mean(option, valid)}; its options: {', '.join(valid)}" if valid else ""


def _check_csv_columns(rig: Rig, twin: Any, file: str) -> None:
    """A named CSV excitation's columns must be actuators of the twin (else the twin would map them
    by position, silently, when their count matches).

    Raises:
        RigConfigError: ``file:excitations.NAME.path: CSV: column 'X' is not an actuator ...``.
    """
    acts = tuple(getattr(twin, "actuator_names", ()) or ())
    if not acts:
        return
    for name, e in (rig.named_excitations or {}).items():
        if (e.meta or {}).get("kind") != "csv":
            continue
        bad = [c for c in e.actuator_names if c not in acts]
        if bad:
            raise RigConfigError(f"{file}:excitations.{name}.path: {e.meta.get('path')}: column {bad[0]!r} is not an "
                                 f"actuator of the rig{did_you_mean(bad[0], acts)}; actuators: {', '.join(acts)}; name the command columns after them "
                                 "(plus an optional time column)")


def _joint_init_bounds(rig: Rig, twin: Any) -> None:
    """Unit and default bounds of free initial-state parameters from the model's joint types.

    A hinge is in rad, a slide in m (qvel: rad/s, m/s), also when ``init_bounds`` are given
    (they are kept). Without ``init_bounds``: qpos bounds are the joint's range when limited,
    else [-pi, pi] rad / [-1, 1] m; qvel [-10, 10]. Ball and free joints (and twins without an
    ``MjModel``) keep "rad or m" and [-pi, pi].
    """
    import dataclasses

    model = getattr(twin, "model", None)
    if model is None or not hasattr(model, "jnt_type"):
        return
    import mujoco

    raw = {str(t.get("name") or f"t{i}"): dict(t.get("init_bounds") or {})
           for i, t in enumerate(rig.config.get("trials") or []) if isinstance(t, Mapping)}
    specs = list(rig.parameters.specs)
    changed = False
    for t in rig.trials:
        for key, pname in t.free_init.items():
            m = re.match(r"^(qpos|qvel)\[([^,\]]+)", key)
            if not m or pname not in rig.parameters:
                continue
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, m.group(2).strip())
            if j < 0:
                continue
            jt = int(model.jnt_type[j])
            if jt == int(mujoco.mjtJoint.mjJNT_HINGE):
                unit, lo, hi = "rad", -math.pi, math.pi
            elif jt == int(mujoco.mjtJoint.mjJNT_SLIDE):
                unit, lo, hi = "m", -1.0, 1.0
            else:
                continue
            if m.group(1) == "qvel":
                unit, lo, hi = unit + "/s", -10.0, 10.0
            elif bool(model.jnt_limited[j]):
                lo, hi = (float(v) for v in model.jnt_range[j])
            i = next(k for k, sp in enumerate(specs) if sp.name == pname)
            if key in raw.get(t.name, {}):  # the config's init_bounds win; the unit is still the joint's
                specs[i] = dataclasses.replace(specs[i], unit=unit)
                changed = True
                continue
            nominal = min(max(t.init.get(key, 0.0), lo), hi) if lo <= 0.0 <= hi else 0.5 * (lo + hi)
            specs[i] = dataclasses.replace(specs[i], unit=unit, lower=float(lo), upper=float(hi),
                                           nominal=float(nominal))
            changed = True
    if changed:
        rig.parameters = dataclasses.replace(rig.parameters, specs=tuple(specs))
