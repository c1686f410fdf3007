"""Offscreen renderers dropped by the garbage collector must not corrupt another renderer's frame.

Regression: ``OffscreenRenderer.__del__`` freed its GL resources whenever the collector ran, and a
collection can run in the middle of another renderer's ``render`` (between binding its context and
``mjr_render``). The collected renderer made its own context current and destroyed it, so the other
renderer drew into no context and returned its previous frame unchanged: a silently stale image
(seen in the full suite as a segfault in ``mjr_render`` on the spherical-pendulum benchmark).
Run in a subprocess so that a crash fails this test instead of killing the suite.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: a sphere on a slide joint, filmed by a 64 x 48 camera; frame(renderer, x) renders it at x m
PRELUDE = textwrap.dedent('''
    import gc, os
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco, numpy as np
    from vid2sid_ros.sim import mujoco_render as mr
    XML = """<mujoco><visual><global offwidth="64" offheight="48"/></visual><worldbody>
    <light pos="0 0 2"/><camera name="c" pos="0 -1 0.2" xyaxes="1 0 0 0 0 1"/>
    <body><joint name="j" type="slide" axis="1 0 0"/><geom type="sphere" size="0.1" rgba="1 0 0 1"/></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(XML); d = mujoco.MjData(m)
    def frame(r, x):
        d.qpos[0] = x; mujoco.mj_forward(m, d); return r.render(d).copy()
''')

SCRIPT = PRELUDE + textwrap.dedent('''
    ref = mr.OffscreenRenderer(m, 64, 48, "c")
    want = frame(ref, 0.2); ref.close()
    b = mr.OffscreenRenderer(m, 64, 48, "c")
    before = frame(b, 0.0)
    gc.disable()
    a = mr.OffscreenRenderer(m, 64, 48, "c"); frame(a, 0.1)
    a.cycle = a; del a                  # only the cyclic collector can free it
    orig = mujoco.mjv_updateScene
    def update_then_collect(*args):
        orig(*args); gc.collect()       # a collection between binding b's context and mjr_render
    mujoco.mjv_updateScene = update_then_collect
    got = frame(b, 0.2)
    mujoco.mjv_updateScene = orig
    assert not np.array_equal(want, before), "the sphere should move in the image"
    print("stale" if np.array_equal(got, before) else ("ok" if np.array_equal(got, want) else "wrong"))
    print("live", len(mr._LIVE), "pending", len(mr._PENDING))
    b.close()
    c = mr.OffscreenRenderer(m, 64, 48, "c")   # the next safe point frees the collected one
    frame(c, 0.0)
    print("live", len(mr._LIVE), "pending", len(mr._PENDING))
''')


def test_a_renderer_collected_mid_frame_leaves_the_other_frame_intact():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "ok", proc.stdout            # was "stale": b's previous frame returned
    assert lines[1] == "live 2 pending 1"           # a's resources kept until a safe point ...
    assert lines[2] == "live 1 pending 0"           # ... then freed (only the last renderer is left)


THREAD_SCRIPT = PRELUDE + textwrap.dedent('''
    import threading
    ref = mr.OffscreenRenderer(m, 64, 48, "c")
    want = [frame(ref, x) for x in (0.0, 0.2)]
    b = mr.OffscreenRenderer(m, 64, 48, "c"); frame(b, 0.1)
    held = []
    def worker():                          # a renderer made (and left bound) on a thread that then ends
        a = mr.OffscreenRenderer(m, 64, 48, "c"); frame(a, 0.1); held.append(a)
    t = threading.Thread(target=worker); t.start(); t.join()
    held.clear(); gc.collect()             # dropped on the main thread, its context still bound to the ended thread
    got = [frame(b, x) for x in (0.0, 0.2)]
    print("ok" if all(np.array_equal(g, w) for g, w in zip(got, want)) else "wrong")
    print("leaked", len(getattr(mr, "_LEAKED", [None])), "pending", len(mr._PENDING))
''')


def test_a_renderer_of_an_ended_thread_is_never_freed_from_another_thread():
    """A renderer made on a worker thread (the ROS lockstep twin renders on one) and dropped after the
    thread ended: its context cannot be bound elsewhere, so its MjrContext must not be freed from the
    main thread (``mjr_freeContext`` would delete the *current* renderer's GL objects: wrong frames)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run([sys.executable, "-c", THREAD_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "ok", proc.stdout
    assert lines[1] == "leaked 1 pending 0", proc.stdout


#: a model declaring a 3840 x 2160 offscreen buffer (a 4K camera) rendered through a 200 x 150 renderer
SMALL = textwrap.dedent('''
    import os
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco, numpy as np
    from vid2sid_ros.sim import mujoco_render as mr
    XML = """<mujoco><visual><global offwidth="3840" offheight="2160"/><quality offsamples="4"/></visual><worldbody>
    <light pos="0 0 2"/><camera name="c" pos="0 -1 0.2" xyaxes="1 0 0 0 0 1"/>
    <body><joint name="j" type="slide" axis="1 0 0"/><geom type="sphere" size="0.1" rgba="1 0 0 1"/></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(XML); d = mujoco.MjData(m); mujoco.mj_forward(m, d)
    small = mr.OffscreenRenderer(m, 200, 150, "c")
    img = small.render(d)
    print("buffer", small._con.offWidth, small._con.offHeight, "declared", m.vis.global_.offwidth, m.vis.global_.offheight)
    print("red", int((img[..., 0] > 150).sum()))
    small.close()
''')


def test_a_small_renderer_of_a_large_camera_holds_only_its_own_size_of_gl_buffers():
    """Regression: a 200 px thumbnail renderer of a model declaring a 3840 x 2160 offscreen buffer
    allocated the full 4K multisampled buffers (about 600 MB resident) it never drew into; the buffers
    are now its own size and the model's declared size is left as it was."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run([sys.executable, "-c", SMALL], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "buffer 200 150 declared 3840 2160"
    assert int(lines[1].split()[1]) > 0  # the sphere is drawn
