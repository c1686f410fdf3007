"""Declared, typed, documented ROS parameters for the vid2sid nodes.

Each node lists its parameters as :class:`Param` entries (name, default, description,
unit, range or choices). :func:`declare` declares them with a ``ParameterDescriptor``
whose description carries the unit and whose ``floating_point_range`` /
``integer_range`` comes from the bounds, and installs a set-parameters callback that
rejects a change with a message saying expected vs. got (range, choices, finiteness,
read-only). Values are loaded from ``config/*.yaml`` (``ros__parameters`` form) by the
launch files (``parameters=[file]``) or by the in-process bringup (``--params-file``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

__all__ = ["Param", "declare", "values", "ParamValidator", "RIG_CONFIG", "unused_overrides"]


@dataclass(frozen=True)
class Param:
    """One ROS parameter of a node.

    Attributes:
        name: parameter name (dots allowed: ``physics.pip_stiffness``).
        default: default value; its Python type fixes the ROS type (bool, int, float, str,
            list of str / float).
        description: what it does.
        unit: SI unit (``s``, ``Hz``, ``px``, ``N*m/rad``...) or ``""`` for none.
        lower, upper: inclusive numeric bounds (become the descriptor's range).
        choices: allowed string values.
        read_only: cannot change after start-up.
    """

    name: str
    default: Any
    description: str
    unit: str = ""
    lower: float | None = None
    upper: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False

    def descriptor(self) -> ParameterDescriptor:
        text = self.description + (f" [{self.unit}]" if self.unit else "")
        if self.choices:
            text += f" (one of: {', '.join(self.choices)})"
        d = ParameterDescriptor(name=self.name, description=text, read_only=self.read_only)
        if isinstance(self.default, bool):
            return d
        if isinstance(self.default, float) and self.lower is not None and self.upper is not None:
            d.floating_point_range = [FloatingPointRange(from_value=float(self.lower), to_value=float(self.upper),
                                                         step=0.0)]
        elif isinstance(self.default, int) and self.lower is not None and self.upper is not None:
            d.integer_range = [IntegerRange(from_value=int(self.lower), to_value=int(self.upper), step=1)]
        return d

    def check(self, value: Any, *, startup: bool = False) -> str | None:
        """Why ``value`` is not acceptable, or None (``startup``: read-only is not an objection)."""
        if self.read_only and not startup:
            return f"parameter '{self.name}' is read-only (set it in the config file before start-up)"
        if isinstance(value, float) and not math.isfinite(value):
            return f"parameter '{self.name}' must be finite, got {value!r}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.lower is not None and value < self.lower or self.upper is not None and value > self.upper:
                unit = f" {self.unit}" if self.unit else ""
                return f"parameter '{self.name}' = {value!r}{unit} is outside [{self.lower}, {self.upper}]"
        if self.choices and value not in self.choices:
            return f"parameter '{self.name}' = {value!r}; expected one of {', '.join(self.choices)}"
        return None


ParamValidator = Callable[[str, Any], "str | None"]


def declare(node: Node, params: Sequence[Param], *, extra_check: ParamValidator | None = None,
            on_change: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Declare ``params`` on ``node`` and validate every later change.

    Args:
        node: the node.
        params: its parameters.
        extra_check: ``(name, value) -> reason | None`` for cross-field rules.
        on_change: called with ``{name: value}`` of an accepted change (after validation,
            before the new values are visible through ``get_parameter``).

    Raises:
        ValueError: if a value from the config file fails validation at start-up (the
            message names the parameter and the expected range/choices).
    """
    table = {p.name: p for p in params}
    node.declare_parameters("", [(p.name, p.default, p.descriptor()) for p in params])
    for p in params:  # values from the params file are checked once at start-up
        v = node.get_parameter(p.name).value
        why = p.check(v, startup=True)
        if why is None and extra_check is not None:
            why = extra_check(p.name, v)
        if why is not None:
            raise ValueError(f"node '{node.get_name()}': {why}")

    def _callback(changes: list[Parameter]) -> SetParametersResult:
        accepted = {}
        for c in changes:
            p = table.get(c.name)
            if p is None:
                continue  # not ours (e.g. use_sim_time)
            why = p.check(c.value)
            if why is None and extra_check is not None:
                why = extra_check(c.name, c.value)
            if why is not None:
                node.get_logger().warning(f"rejected parameter change: {why}")
                return SetParametersResult(successful=False, reason=why)
            accepted[c.name] = c.value
        if accepted and on_change is not None:
            try:
                on_change(accepted)
            except Exception as err:  # noqa: BLE001 - report, never crash the node
                return SetParametersResult(successful=False, reason=f"{type(err).__name__}: {err}")
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(_callback)


def values(node: Node, params: Iterable[Param] | Iterable[str]) -> dict[str, Any]:
    """Current values ``{name: value}`` of the given parameters."""
    names = [p.name if isinstance(p, Param) else p for p in params]
    return {n: node.get_parameter(n).value for n in names}


#: every node that builds a rig declares this next to ``rig``: a rig config file (the one
#: format of ``docs/rig_config.md``) that, when set, is used instead of the ``rig`` name
RIG_CONFIG = Param("rig_config", "", "rig config file (RIG.yaml, docs/rig_config.md); when set it is used instead "
                   "of 'rig'", read_only=True)



def unused_overrides(node: Node, prefixes: Sequence[str]) -> list[str]:
    """Names of parameter values given to ``node`` (params files, ``-p``, overrides) under
    ``prefixes`` (e.g. ``hidden.``) that it never declared, and therefore ignores (rclpy drops
    undeclared overrides without a word); one warning naming them is logged when there are any.

    A params file written for one rig and used with another (``rig_config:=``) gives such names.
    """
    given = getattr(node, "_parameter_overrides", {}) or {}
    unused = sorted(n for n in given if n.startswith(tuple(prefixes)) and not node.has_parameter(n))
    if unused:
        node.get_logger().warning(
            f"ignored: {', '.join(unused)} (the rig has no such parameter; its parameters: "
            + ", ".join(sorted(n for n in node._parameters if n.startswith(tuple(prefixes)))) + ")")
    return unused
