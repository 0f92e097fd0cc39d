"""Sandboxes that fail on demand, and a small environment that runs every action as code.

Two ways to make the *sandbox* fail under an environment (the subject under test is the
environment, the runner or the trainer, never the sandbox):

* :func:`crashing_sandbox`: a real pooled sandbox (the backend ``auto`` picks here) whose worker
  process is SIGKILLed right after it accepted a job, as often as told, and whose result is
  never read (the worker died before sending it): the pool itself reports the run as
  ``RunResult.sandbox_error`` and replaces the worker, exactly as on a real crash;
* :class:`FailingSandbox`: a real sandbox behind a switch that returns, for chosen runs, the
  ``RunResult`` a pool returns when its worker died (cheap and deterministic, for the
  parametrised and end-to-end tests).

:class:`ProgramSumsEnv` is registered only for the duration of a test
(:func:`register_program_sums_env`), so it never joins other modules' parametrisations.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sandboxes
from llm_envs.core import TextEnv
from llm_envs.envs._common import SandboxUser
from llm_envs.verifiers.code import run_program
from sandboxes import Limits, RunResult, Sandbox
from tests.envs.helpers import registered_for_a_test

#: What a pool reports when the worker running a program died (sandboxes/pool.py).
WORKER_DIED = "the worker running this program failed (worker died: killed by the test); it was replaced"


class FailingSandbox(Sandbox):
    """``inner`` (a real sandbox), except that a run comes back as a sandbox failure while
    :attr:`down` is set, for the next :attr:`fail_next` runs, or when ``fail_when(source, stdin)``
    says so. Counts :attr:`runs` and :attr:`failed_runs`. Closing it leaves ``inner`` open."""

    def __init__(self, inner: Sandbox) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.max_concurrency = inner.max_concurrency
        self.down = False
        self.fail_next = 0
        self.fail_when: Callable[[str, str], bool] | None = None
        self.runs = 0
        self.failed_runs = 0
        self._lock = threading.Lock()

    def run(self, source: str, *, stdin: str = "", files: Any = None, limits: Limits | None = None) -> RunResult:
        with self._lock:
            self.runs += 1
            fail = self.down or self.fail_next > 0 or bool(self.fail_when and self.fail_when(source, stdin))
            if self.fail_next > 0 and not self.down:
                self.fail_next -= 1
            self.failed_runs += fail
        if fail:
            return RunResult(
                stdout="", stderr=f"sandbox: {WORKER_DIED}", exit_code=None, backend=self.name, sandbox_error=WORKER_DIED
            )
        return self.inner.run(source, stdin=stdin, files=files, limits=limits)


def crashing_sandbox() -> Any:
    """A real sandbox of the backend ``auto`` uses here (``process`` if that is Docker), with one
    worker; ``sandbox.crashes_left = n`` SIGKILLs the worker (its whole process group) of each
    of the next ``n`` runs right after it accepted the job (the caller closes the sandbox)."""
    from sandboxes.local import LocalSandbox, ProcessSandbox

    base = type(sandboxes.shared_sandbox("auto"))
    if not issubclass(base, LocalSandbox):
        base = ProcessSandbox

    class CrashingSandbox(base):  # type: ignore[misc, valid-type]
        crashes_left = 0
        workers_killed = 0

        def _spawn_worker(self, preload: list[str]) -> Any:
            worker = super()._spawn_worker(preload)
            receive, read_chunk = worker._recv, worker._read_chunk
            lock = threading.Lock()
            crashed = threading.Event()

            def receive_then_crash(deadline: float) -> Any:
                frame = receive(deadline)
                if isinstance(frame, dict) and "accepted" in frame:
                    with lock:
                        crash = self.crashes_left > 0
                        if crash:
                            self.crashes_left -= 1
                            self.workers_killed += 1
                    if crash:  # the job is running: its worker dies under it, as in a real crash
                        # A crash at this point means no result: the worker may have finished a
                        # short job already, and its result may even be in the host's buffer (read
                        # in one chunk with the acknowledgement), so drop whatever it sent after
                        # the acknowledgement (it died before the host could read it), then kill
                        # its whole sandbox. Without this the pool sometimes read a result that
                        # beat the kill, and a crash on every attempt went unnoticed.
                        crashed.set()
                        worker._buffer.clear()
                        os.killpg(worker.proc.pid, signal.SIGKILL)
                        worker.proc.wait()
                return frame

            def read_after_crash(timeout_s: float) -> Any:
                return b"" if crashed.is_set() else read_chunk(timeout_s)  # EOF: the worker is gone

            worker._recv = receive_then_crash
            worker._read_chunk = read_after_crash
            return worker

    return CrashingSandbox(pool_size=1, preload=["json"], heavy_preload=())


# ---------------------------------------------------------------------------------------------
# an environment whose every action is a program
PROGRAM_SUMS_ENV_ID = "llm/SandboxTestProgramSums-v0"
_EVALUATE = "import sys\nprint(eval(sys.stdin.read()))\n"


@dataclass
class ProgramSumsConfig:
    upper: int = 50


class ProgramSumsEnv(SandboxUser, TextEnv):
    """One agent, ``coder``, answers "What is A + B?" with a Python expression; the environment
    evaluates it in the sandbox. Reward 1 if it prints A + B, else 0; one decision per episode."""

    metadata = {**TextEnv.metadata, "name": "sandbox_test_program_sums_v0"}
    config_class = ProgramSumsConfig

    def __init__(self, config: ProgramSumsConfig | None = None, *, render_mode=None, sandbox=None, **overrides):
        self.config = self._build_config(config, overrides)
        self._keep_sandbox(sandbox)
        super().__init__(["coder"], render_mode=render_mode)

    def _shared_resources(self) -> list[Any]:
        return self._sandbox_if_started()

    def _start_episode(self, options):
        self.a = int(self.np_random.integers(0, self.config.upper))
        self.b = int(self.np_random.integers(0, self.config.upper))
        return "coder"

    def _apply_action(self, agent, action):
        result = run_program(self.sandbox, _EVALUATE, stdin=action, limits=Limits(time_s=5, memory_mb=128))
        right = result.ok and result.stdout.strip() == str(self.a + self.b)
        record = self._add_record(agent, action, format_ok=result.ok, parsed={"output": result.stdout[:80]})
        self._credit(record, "answer", float(right))
        self.turn += 1
        self.right = right
        self._end_episode(truncated=False)
        return None

    def _instruction(self, agent):
        return "Answer with a Python expression."

    def _prompt(self, agent):
        return f"What is {self.a} + {self.b}?"

    def _episode_metrics(self):
        return {"success": float(getattr(self, "right", False))}

    def reference_action(self, agent):
        return f"{self.a} + {self.b}"


def register_program_sums_env() -> Iterator[str]:
    """Register :class:`ProgramSumsEnv` under :data:`PROGRAM_SUMS_ENV_ID`; unregister when done."""
    return registered_for_a_test(PROGRAM_SUMS_ENV_ID, f"{__name__}:ProgramSumsEnv", ("coder",),
                                 "sums of two numbers, answered as code", "Test environment of the sandbox-failure tests.")
