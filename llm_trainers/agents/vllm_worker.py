"""A vLLM worker extension that loads full weights pushed by a learner on a CUDA GPU.

vLLM instantiates it inside every worker (``LLM(..., worker_extension_cls=...)``); the engine
calls its methods with ``llm.collective_rpc(name, args=...)``. ``self.model_runner.model`` is
the worker's model, whose ``load_weights`` takes ``(name, tensor)`` pairs in Hugging Face naming.
Its method names must not be the worker's own: vLLM refuses an extension that shadows one (0.32's
workers have an ``update_weights`` of their own). Weights on the CPU do not come this way: tensors
sent as RPC arguments do not survive vLLM's serialisation between processes (they arrive as
lists), so the engine writes them to a file and calls the worker's ``reload_weights``. This
module never imports vLLM itself.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["WeightUpdateExtension"]


class WeightUpdateExtension:
    """Methods mixed into vLLM's worker class."""

    def llm_envs_load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> None:
        """Load ``(name, tensor)`` pairs sent by value (an engine in this process only)."""
        device = next(self.model_runner.model.parameters()).device  # type: ignore[attr-defined]
        self.model_runner.model.load_weights(  # type: ignore[attr-defined]
            weights=[(n, t.to(device)) for n, t in named_tensors]
        )

    def llm_envs_load_weights_ipc(self, handles: list[tuple[str, Any]]) -> None:
        """Load tensors shared through CUDA IPC handles (``reduce_tensor``) by a colocated learner.

        The handle's device index is the learner's; it is replaced by this worker's device.
        """
        device = torch.cuda.current_device()
        weights = []
        for name, (rebuild, args) in handles:
            args = list(args)
            args[6] = device  # the storage device index in torch's CUDA rebuild arguments
            weights.append((name, rebuild(*args)))
        self.model_runner.model.load_weights(weights=weights)  # type: ignore[attr-defined]
        torch.cuda.synchronize()
