"""One rollout executor: run independent tasks (twin evaluations, benchmark cells) serially,
on threads, on a process pool, or on a Ray cluster, with the same results on every backend.

A task is ``fn(state, item)``: ``fn`` a module-level function, ``item`` a picklable value,
``state`` the object every task of one :meth:`Executor.map` call shares (an objective with its
twin, a benchmark's settings). Each worker gets its own copy of ``state`` once and keeps it for
every later task with the same state object (a twin is built, or copied, once per worker, not
once per rollout):

- ``serial``: every task in this thread, on ``state`` itself (no copy).
- ``threads``: a thread pool; each thread works on its own copy of the state
  (``state.for_worker()`` when the state defines it, else :func:`copy.deepcopy`). MuJoCo
  releases the interpreter lock inside ``mj_step``, so MuJoCo twins (whose rollouts call it many
  times per frame) run concurrently; a twin whose stepping is Python (PyElastica) gains nothing.
  (:func:`~vid2sid_ros.calibration.batch.evaluate_batch` does not use these threads for a MuJoCo
  twin with ``rollout_batch``: it steps the whole batch in one ``mujoco.rollout`` call on the
  executor's ``workers`` C++ threads.)
- ``pool``: worker processes forked from this one (``multiprocessing`` ``fork`` start method):
  each inherits the state as it is when the pool starts (nothing is pickled but items and
  results), and calls ``for_worker()`` once. The pool is kept while the same state is mapped.
- ``ray``: Ray actors (``ray.remote`` classes), one per worker, each built once from the state
  (serialised with cloudpickle by Ray) on ``ray.init(address=...)``; an actor that dies is
  restarted once by Ray itself (``max_restarts=1``, ``max_task_retries=1``). A private Ray binds
  127.0.0.1; usage statistics are off (``RAY_USAGE_STATS_ENABLED=0``) and there is no dashboard.

Results come back in item order whatever order they finish in; ``on_done(index, result)``
is called in the calling thread as each finishes (to persist it at once). A worker process
that dies while a task runs (killed, out of memory, a lost node) is not fatal: the tasks it was
running are retried once, one at a time, on a fresh worker; a task whose worker dies a second time comes back as
a :class:`TaskFailure` and the other tasks carry on. An exception raised by ``fn`` itself is
re-raised by :meth:`Executor.map`, as in a serial loop (``fn`` decides what is a failure). An exception
in the calling thread while tasks run (Ctrl-C, ``on_done`` raising) stops the workers still running
one (``pool``: at the next :meth:`Executor.close` or state change, which terminates the worker
processes and waits until they are gone; ``ray``: at once, killing those actors) before anything else
runs on this executor.

Signals: Ctrl-C is the caller's. A pool worker ignores SIGINT, so a Ctrl-C sent to the whole process
group (as a terminal does) reaches the calling process only, and it stops the workers. Left to a
worker, the interrupt could end it holding the pool's task queue lock, and the pool's shutdown would
then wait forever. A worker takes SIGTERM's default action and dies at once (the pool sees a dead
worker). A worker whose calling process is gone (SIGKILL, a crash) exits within
:data:`PARENT_POLL_S`; it does not finish its task as an orphan, holding the run directory's lock
its resume needs.

Nothing here knows about twins or calibration: the callers pass a function and a state.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import signal
import socket
import threading
import time
from pathlib import Path
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["BACKENDS", "Executor", "ExecutorError", "TaskFailure", "make_executor", "RAY_INSTALL_HINT",
           "RAY_CONNECT_TIMEOUT_S", "PARENT_POLL_S"]

#: the backends :func:`make_executor` accepts
BACKENDS = ("serial", "threads", "pool", "ray")
#: the one line printed when ``ray`` is asked for but not installed
RAY_INSTALL_HINT = ("--executor ray needs Ray, which is not installed: "
                    "pip install -r requirements-ray.txt (or choose --executor serial|threads|pool)")
#: seconds the Ray head named by ``--ray-address`` has to accept a TCP connection on its GCS port before the
#: command stops with one line: ``ray.init`` itself does not give up on a head that does not answer (it retries
#: for many minutes); a running head accepts at once, and 5 s leaves room for a slow network between nodes
RAY_CONNECT_TIMEOUT_S = 5.0


class ExecutorError(ValueError):
    """A bad backend, worker count or Ray address, or Ray missing (one line, names the fix)."""


@dataclass(frozen=True)
class TaskFailure:
    """A task whose worker died on its first run and on its retry.

    Attributes:
        item: the task's item. message: what happened (one line). attempts: runs tried (2).
    """

    item: Any
    message: str
    attempts: int = 2


def _worker_copy(state: Any) -> Any:
    """The copy of ``state`` a worker works on: ``state.for_worker()`` if defined, else a deep copy."""
    build = getattr(state, "for_worker", None)
    return build() if callable(build) else copy.deepcopy(state)


# ---- process-pool worker side (module globals: one state per worker process) ---------------------------

_PROCESS_STATE: list[Any] = [None]

#: how often a pool worker checks that the process that started it is still there, s
PARENT_POLL_S = 0.25


def _process_init(state: Any) -> None:
    """Pool initializer: the signals a worker leaves to its caller (module docstring), the watch on its
    caller, and the forked worker's own copy of the state, built once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's: it stops the pool
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the caller's handler, inherited by the fork
    _exit_with_parent(os.getppid())
    _PROCESS_STATE[0] = _worker_copy(state)


def _exit_with_parent(parent: int) -> None:
    """Start a daemon thread that ends this process (``os._exit``, exit code 1) once its parent ``parent``
    (a pid) is gone, checked every :data:`PARENT_POLL_S` s: an orphan is reparented, so ``getppid`` changes.
    (Not ``PR_SET_PDEATHSIG``: that fires when the *thread* that forked the worker ends, and a pool may be
    started from a thread that ends before the process does.)"""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="vid2sid-parent-watch", daemon=True).start()


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` and its worker processes now, whatever they are doing, and wait until they are gone:
    pending tasks are cancelled, running ones end with their worker (SIGTERM, then SIGKILL after 10 s).
    A worker holding the pool's task queue lock when it ends cannot then stall the shutdown. (Python
    3.11's ProcessPoolExecutor has no public way to stop its workers: its ``_processes`` map is read.)"""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        if proc.is_alive():
            proc.terminate()
    for proc in workers:
        proc.join(timeout=10.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10.0)


def _process_call(fn: Callable[[Any, Any], Any], item: Any) -> Any:
    return fn(_PROCESS_STATE[0], item)


class Executor:
    """Runs ``fn(state, item)`` for many items (module docstring); use :func:`make_executor`.

    Attributes:
        backend: one of :data:`BACKENDS`. workers: concurrent tasks (1 for ``serial``).
        retries: tasks re-run after a worker died, over this executor's life.
    """

    def __init__(self, backend: str, workers: int, ray_address: str | None = None) -> None:
        self.backend = backend
        self.workers = workers
        self.ray_address = ray_address
        self.retries = 0
        self._state: Any = None  # the state the live pool/threads/actors were built from (kept alive: ids stay unique)
        self._generation = 0
        self._threads: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._procs: ProcessPoolExecutor | None = None
        self._actors: list[Any] = []
        self._state_ref: Any = None  # Ray: the state in Ray's object store (a restarted or new actor is built from it)
        self._lock = threading.Lock()

    # -- public -----------------------------------------------------------------------------------------
    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *, state: Any = None,
            on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """``[fn(copy of state, item) for item in items]``, run on this executor's workers.

        Args:
            fn: a module-level function ``(state, item) -> result`` (pickled by reference for
                ``pool``/``ray``); results must be picklable for those backends.
            items: the tasks' inputs, picklable for ``pool``/``ray``.
            state: shared by every task (module docstring: copied once per worker).
            on_done: ``(index, result)`` called in this thread as each task finishes.

        Returns:
            One result per item, in item order; a :class:`TaskFailure` where a worker died twice.

        Raises:
            Whatever ``fn`` raised (the first such task, after the others in flight finished).
        """
        items = list(items)
        if not items:
            return []
        if self.backend == "serial" or self.workers <= 1 and self.backend != "ray":
            out = []
            for i, item in enumerate(items):
                out.append(fn(state, item))
                if on_done is not None:
                    on_done(i, out[-1])
            return out
        self._use_state(state)
        if self.backend == "threads":
            return self._run_bounded(lambda item: self._threads.submit(self._thread_call, fn, item),  # type: ignore[union-attr]
                                     items, on_done, broken=())
        if self.backend == "pool":
            return self._run_pool(fn, items, on_done)
        return self._run_ray(fn, items, on_done)

    def close(self) -> None:
        """Stop the workers (idempotent); the executor can be used again (workers are rebuilt)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        if self._procs is not None:
            _stop_pool(self._procs)  # after an interrupt a task may still run: its worker is stopped
            self._procs = None
        if self._actors:
            import ray

            _ray_kill_and_wait(self._actors, [])
            self._actors = []
        self._state_ref = None
        self._state = None

    def describe(self) -> dict[str, Any]:
        """``{"backend", "workers", "retries"[, "ray_address"]}`` for result files."""
        d: dict[str, Any] = {"backend": self.backend, "workers": self.workers, "retries": self.retries}
        if self.backend == "ray":
            d["ray_address"] = self.ray_address
        return d

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- state and workers ------------------------------------------------------------------------------
    def _use_state(self, state: Any) -> None:
        """(Re)build the workers when ``state`` is not the one they hold."""
        if self._state is state and (self._threads or self._procs or self._actors):
            return
        self.close()
        self._state = state
        self._generation += 1
        if self.backend == "threads":
            self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="vid2sid-exec")
        elif self.backend == "pool":
            self._procs = self._new_pool()
        elif self.backend == "ray":
            self._state_ref, self._actors = _ray_actors(state, self.workers)

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_process_init, initargs=(self._state,))

    def _thread_call(self, fn: Callable[[Any, Any], Any], item: Any) -> Any:
        local = self._local
        if getattr(local, "generation", None) != self._generation:
            with self._lock:  # one copy at a time: deepcopy reads the shared state
                local.state = _worker_copy(self._state)
            local.generation = self._generation
        return fn(local.state, item)

    def _run_pool(self, fn: Callable[[Any, Any], Any], items: list[Any],
                  on_done: Callable[[int, Any], None] | None) -> list[Any]:
        def submit(item: Any) -> Future:
            try:
                return self._procs.submit(_process_call, fn, item)  # type: ignore[union-attr]
            except BrokenProcessPool:  # a worker died between tasks: a fresh pool
                self._procs = self._new_pool()
                return self._procs.submit(_process_call, fn, item)

        return self._run_bounded(submit, items, on_done, broken=(BrokenProcessPool,), rebuild=self._rebuild_pool)

    def _rebuild_pool(self) -> None:
        """A fresh pool after a worker died. The broken pool's surviving workers are stopped and waited
        for first (:func:`_stop_pool`): a task lost with the pool may still be running in one of them
        (holding its run directory's lock, writing its files), and its retry must not start beside it."""
        if self._procs is not None:
            _stop_pool(self._procs)
        self._procs = self._new_pool()

    def _run_bounded(self, submit: Callable[[Any], Future], items: list[Any],
                     on_done: Callable[[int, Any], None] | None, *, broken: tuple,
                     rebuild: Callable[[], None] | None = None) -> list[Any]:
        """At most ``workers`` tasks in flight (so a dead worker can only have been running those);
        a task lost with a broken pool is retried once, alone (so that a second death is its own and
        not that of a task which happened to run beside the culprit), then a :class:`TaskFailure`."""
        results: list[Any] = [None] * len(items)
        attempts = [0] * len(items)
        todo = list(range(len(items)))[::-1]
        flight: dict[Future, int] = {}
        error: BaseException | None = None
        while todo or flight:
            while todo and error is None and len(flight) < self.workers:
                i = todo[-1]
                solo = any(attempts[k] > 1 for k in flight.values())
                if solo or (attempts[i] and flight):  # a retry runs alone: a second death is its own
                    break
                todo.pop()
                attempts[i] += 1
                flight[submit(items[i])] = i
            if not flight:
                break
            done, _ = wait(list(flight), return_when=FIRST_COMPLETED)
            lost = []
            for fut in done:
                i = flight.pop(fut)
                exc = fut.exception()
                if exc is None:
                    results[i] = fut.result()
                    if on_done is not None:
                        on_done(i, results[i])
                elif broken and isinstance(exc, broken):
                    lost.append(i)
                elif error is None:
                    error = exc
            if lost:  # the pool is broken: every task still in flight is lost with it
                for fut, i in list(flight.items()):
                    fut.cancel()
                    lost.append(i)
                flight.clear()
                if rebuild is not None:
                    rebuild()
                for i in sorted(lost, reverse=True):
                    if attempts[i] >= 2:
                        results[i] = TaskFailure(items[i], f"worker died twice while running this task ({exc_line(broken)})")
                        if on_done is not None:
                            on_done(i, results[i])
                    else:
                        self.retries += 1
                        todo.append(i)
        if error is not None:
            raise error
        return results

    def _run_ray(self, fn: Callable[[Any, Any], Any], items: list[Any],
                 on_done: Callable[[int, Any], None] | None) -> list[Any]:
        """At most one task per actor; an actor restarted by Ray (its process died) counts one retry for the task
        it ran next (:meth:`_Worker.run` says so); a task that raised stops new submissions, the others in
        flight finish, then it is re-raised; any other exception here (Ctrl-C, ``on_done`` raising) kills the
        actors still running a task and waits until Ray reports them dead before it propagates, so nothing keeps
        writing a task's files behind the caller (a resumed sweep would otherwise start the same cell beside it)."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        results: list[Any] = [None] * len(items)
        todo = list(range(len(items)))[::-1]
        idle = list(self._actors)
        flight: dict[Any, tuple[int, Any]] = {}
        error: BaseException | None = None
        try:
            while todo or flight:
                while todo and idle and error is None:
                    i, actor = todo.pop(), idle.pop()
                    flight[actor.run.remote(fn, items[i])] = (i, actor)
                if not flight:
                    break
                ready, _ = ray.wait(list(flight), num_returns=1)
                for ref in ready:
                    i, actor = flight.pop(ref)
                    try:
                        restarted, results[i] = ray.get(ref)
                    except RayTaskError as err:  # fn raised: as in a serial loop
                        error = error or err.as_instanceof_cause()
                        idle.append(actor)
                        continue
                    except RayActorError as err:  # died, restarted by Ray, died again on the retry
                        self.retries += 1  # Ray re-ran it once (max_task_retries=1)
                        results[i] = TaskFailure(items[i], f"Ray worker died twice while running this task: "
                                                           f"{str(err).splitlines()[0]}")
                        self._actors.remove(actor)
                        actor = _ray_actor(self._state_ref)  # a fresh actor for the remaining tasks
                        self._actors.append(actor)
                    else:
                        self.retries += int(restarted)
                    if on_done is not None:
                        on_done(i, results[i])
                    idle.append(actor)
        except BaseException:
            busy = [actor for _, actor in flight.values()]
            _ray_kill_and_wait(busy, list(flight))
            self._actors = [a for a in self._actors if all(a is not b for b in busy)]
            self._actors += [_ray_actor(self._state_ref) for _ in busy]  # as many workers as before
            raise
        if error is not None:
            raise error
        return results


def _ray_kill_and_wait(actors: list[Any], refs: list[Any], timeout_s: float = 30.0) -> None:
    """Kill ``actors`` (no restart) and wait until Ray reports each dead (a call on it fails), and each of
    ``refs`` (tasks they were running) with it."""
    import ray

    for a in actors:
        ray.kill(a, no_restart=True)
    for ref in [*refs, *(a.pid.remote() for a in actors)]:
        try:
            ray.get(ref, timeout=timeout_s)
        except Exception:  # noqa: BLE001 - the expected RayActorError (or a timeout: nothing more to wait for)
            pass


def exc_line(kinds: tuple) -> str:
    """Names of the exception kinds that mark a lost worker, for a failure message."""
    return ", ".join(k.__name__ for k in kinds) or "worker lost"


# ---- Ray ----------------------------------------------------------------------------------------------

_RAY_WORKER: list[Any] = [None]


def _ray_actor_class() -> Any:
    """The Ray actor class (built once, on first use: Ray is imported only here)."""
    if _RAY_WORKER[0] is None:
        import ray

        @ray.remote(max_restarts=1, max_task_retries=1)
        class _Worker:
            """Holds one worker's copy of the state; runs tasks on it."""

            def __init__(self, state: Any) -> None:
                self.state = _worker_copy(state)
                # Ray rebuilt this actor after its process died: the next task is the one it was running
                self.restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)

            def run(self, fn: Callable[[Any, Any], Any], item: Any) -> tuple[bool, Any]:
                """``(whether this is the first task since Ray restarted this actor, fn(state, item))``."""
                restarted, self.restarted = self.restarted, False
                return restarted, fn(self.state, item)

            def pid(self) -> int:
                return os.getpid()

        _RAY_WORKER[0] = _Worker
    return _RAY_WORKER[0]


def _ray_actor(state_ref: Any) -> Any:
    return _ray_actor_class().remote(state_ref)


def _ray_actors(state: Any, workers: int) -> tuple[Any, list[Any]]:
    """``(state's object ref, workers actors built from it)``."""
    import ray

    ref = ray.put(state)
    return ref, [_ray_actor(ref) for _ in range(workers)]


def _start_ray(address: str | None) -> None:
    """Connect to (``auto`` / ``HOST:PORT``) or start (None: a local Ray on 127.0.0.1) a Ray cluster.

    A loopback ``HOST`` (``127.0.0.1``, ``localhost``) is kept as it is: Ray on Linux otherwise replaces it with
    the machine's network address, where a head started on the loopback address (docs/executor.md) does not
    listen. Ray's switch for that is ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (read when Ray is imported).
    """
    if address is not None and address.rsplit(":", 1)[0] in ("127.0.0.1", "localhost"):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_INSTALL_HINT) from None
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0":  # Ray was imported before the variable was set
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    # nothing leaves this machine: Ray's usage statistics off (a private Ray also turns them off itself; a
    # cluster started with `ray start` reads its own environment: docs/executor.md), no dashboard
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is None:  # a private local Ray: this machine only, its workers import this copy of vid2sid_ros
        kw["address"] = "local"  # a new Ray here: never a cluster named by RAY_ADDRESS (ray.init reads it for None)
        kw["_node_ip_address"] = "127.0.0.1"
        # Ray runs its workers at niceness 15 by default (its own processes first); here they do the run's
        # work, so they run at this process's priority, as a pool's workers do
        os.environ.setdefault("RAY_worker_niceness", "0")
        here = str(Path(__file__).resolve().parents[2])
        kw["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(
            [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}}
    else:
        head = _ray_head(address)
        if head is not None:
            _check_ray_head(address, head)
        kw["address"] = address
    try:
        ray.init(**kw)
    except (ConnectionError, ValueError, RuntimeError) as err:
        raise ExecutorError(f"--ray-address {address}: cannot connect to a Ray cluster: "
                            f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None


def _ray_head(address: str) -> str | None:
    """The ``HOST:PORT`` that ``ray.init(address=address)`` connects to: ``address`` itself, or for ``auto`` what
    Ray finds (``RAY_ADDRESS`` when set, else the Ray most recently started on this machine); None for ``auto``
    where Ray's lookup is not available (``ray.init`` then decides).

    Raises:
        ExecutorError: ``auto`` and no Ray running on this machine (one line).
    """
    if address != "auto":
        return address
    try:
        from ray._private.services import get_ray_address_from_environment
    except ImportError:  # a Ray without this (private) helper
        return None
    try:
        head = get_ray_address_from_environment(address, None)
    except ConnectionError:
        raise ExecutorError(f"--ray-address {address}: no Ray is running on this machine; start a head with "
                            "'ray start --head --port 6379' first, or leave --ray-address out for a private "
                            "local Ray") from None
    return None if head in (None, "", "auto", "local") else str(head)


def _check_ray_head(address: str, head: str) -> None:
    """Stop at once, in one line, unless ``head`` (``HOST:PORT``, a Ray head's GCS port; ``address`` is what the
    user gave) accepts a TCP connection within :data:`RAY_CONNECT_TIMEOUT_S`.

    Raises:
        ExecutorError: ``head`` is not ``HOST:PORT``, or nothing there accepts a connection in time.
    """
    src = ("" if head == address else " (set by RAY_ADDRESS)" if os.environ.get("RAY_ADDRESS") == head
           else ", the Ray most recently started on this machine")
    host, sep, port = head.split("://", 1)[-1].rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ExecutorError(f"--ray-address: expected auto or HOST:PORT (the GCS port of a Ray head, e.g. "
                            f"127.0.0.1:6379), got {head!r}{src}")
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        why = (f"no answer within {RAY_CONNECT_TIMEOUT_S:g} s" if isinstance(err, TimeoutError)
               else (err.strerror or str(err) or type(err).__name__).lower())
        raise ExecutorError(f"--ray-address {address}: no Ray head answers at {head}{src} ({why}); expected the GCS "
                            "port of a Ray head started with 'ray start --head --port PORT' (6379 by default): "
                            "start it or correct the address, or leave --ray-address out for a private local "
                            "Ray") from None


def make_executor(backend: str = "serial", workers: int | None = None, *, ray_address: str | None = None) -> Executor:
    """An :class:`Executor` (module docstring).

    Args:
        backend: ``serial`` | ``threads`` | ``pool`` | ``ray``.
        workers: concurrent tasks (default: the CPUs this process may use; 1 for ``serial``).
        ray_address: ``ray`` only: ``auto`` (the cluster ``ray start`` made on this machine),
            ``HOST:PORT`` (a cluster's head), or None (start a private local Ray on 127.0.0.1).

    Raises:
        ExecutorError: an unknown backend, ``workers`` < 1, ``ray_address`` without ``ray``,
            or ``ray`` not installed (the message says ``pip install -r requirements-ray.txt``)
            or its cluster unreachable: a head at ``HOST:PORT`` (or found by ``auto``) that does not
            accept a connection within :data:`RAY_CONNECT_TIMEOUT_S` seconds, ``auto`` with no Ray
            running on this machine, or ``ray.init`` failing.
    """
    if backend not in BACKENDS:
        raise ExecutorError(f"--executor: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ExecutorError(f"--workers: expected a whole number >= 1, got {workers!r}")
    if ray_address is not None and backend != "ray":
        raise ExecutorError(f"--ray-address is for --executor ray, not {backend}")
    if backend == "serial":
        return Executor("serial", 1)
    n = workers if workers is not None else max(1, len(os.sched_getaffinity(0)))
    if backend == "ray":
        _start_ray(ray_address)
    return Executor(backend, n, ray_address)
