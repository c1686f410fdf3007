"""``python -m vid2sid_ros.rigs``: print the rig config key table (the reference of ``docs/rig_config.md``)."""

from .schema import reference_markdown

print(reference_markdown(), end="")
