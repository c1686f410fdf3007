"""The one way the package reads YAML: safe, strict about duplicate keys, one-line errors.

PyYAML's ``safe_load`` silently keeps the LAST value of a key given twice
(``damping: 0.1`` ... ``damping: 0.5``), so a config edited by hand can mean something
other than what its author reads first. :func:`load_yaml` / :func:`loads_yaml` use a
``SafeLoader`` (the C-accelerated one when PyYAML was built with libyaml) whose
mappings refuse a repeated key, naming the file, the line of the repeat and the line
of the first occurrence. YAML merge keys (``<<: *base``) keep their meaning: keys
merged in may be overridden, as the YAML 1.1 merge spec says.

Every error is :class:`YAMLInputError` (a ``ValueError``) with one line:
``<file>:<line>:<column>: <what>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .files import file_problem

__all__ = ["YAMLInputError", "load_yaml", "loads_yaml", "StrictSafeLoader"]

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YAMLInputError(ValueError):
    """A YAML source that cannot be read as written (one line, names source and line)."""


class StrictSafeLoader(_Base):  # type: ignore[misc, valid-type]
    """``yaml.SafeLoader`` whose mappings refuse duplicate keys (merge keys excepted)."""

    def construct_mapping(self, node, deep=False):  # noqa: D102 - PyYAML hook
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # PyYAML itself reports an unhashable key below
                if key in seen:
                    first = seen[key].start_mark.line + 1
                    m = key_node.start_mark
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first given at line {first}); give each key once", m)
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _one_line(err: yaml.YAMLError, source: str) -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if problem and str(problem).startswith("duplicate key"):
        return f"{where}: {problem}"
    what = " ".join(str(x) for x in (context, problem) if x) or str(err).splitlines()[0]
    return f"{where}: not valid YAML: {what}"


def loads_yaml(text: str, *, source: str = "<string>") -> Any:
    """Parse YAML text (safe types only; duplicate keys refused).

    Args:
        text: the YAML document.
        source: name used in messages (a file name, ``"parameter proposer_options"``...).

    Returns:
        The document (None for an empty one).

    Raises:
        YAMLInputError: not valid YAML, or a key given twice in one mapping.
    """
    try:
        return yaml.load(text, Loader=StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise YAMLInputError(_one_line(err, source)) from None


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file with :func:`loads_yaml` (UTF-8).

    Raises:
        FileNotFoundError: ``path`` does not exist. IsADirectoryError: it is a directory.
        YAMLInputError: not UTF-8 text, not valid YAML, or a duplicate key (file:line).
    """
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{p}: is a directory, expected a YAML file")
    why = file_problem(p)
    if why and p.exists():  # a FIFO or a device: reading it could block or never end
        raise FileNotFoundError(f"YAML file {why}")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"YAML file not found: {p}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YAMLInputError(f"{p}: not a UTF-8 text YAML file ({err.reason} at byte {err.start})") from None
    return loads_yaml(text, source=str(p))
