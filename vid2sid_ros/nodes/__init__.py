"""Thin rclpy nodes over the core (one module per node; ``main()`` runs one as its own process).

When a node module is started as a program (``python -m vid2sid_ros.nodes.<node>``: Python
imports this package first, with ``sys.argv[0] == "-m"``), SIGINT/SIGTERM are deferred from
here on, so a signal during the node's imports ends the process cleanly
(:mod:`vid2sid_ros.nodes.startup`). A plain ``import`` leaves the process's signal handlers alone.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:
    from .startup import defer_signals as _defer_signals

    _defer_signals()
