"""A vLLM worker extension that loads the full weights a learner pushes.

vLLM instantiates it inside every worker (``LLM(..., worker_extension_cls=...)``); the engine
calls its methods with ``llm.collective_rpc(name, args=...)``. ``self.model_runner.model`` is
the worker's model, whose ``load_weights`` takes ``(name, tensor)`` pairs in Hugging Face naming.
Its method names must not be the worker's own: vLLM refuses an extension that shadows one (0.32's
workers have an ``update_weights`` of their own). Weights from a learner on the CPU travel as a
file: tensors sent as RPC arguments do not survive vLLM's serialisation between processes (they
arrive as lists), so the engine writes one safetensors file and sends its folder. This module never
imports vLLM itself.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["WeightUpdateExtension"]


class WeightUpdateExtension:
    """Methods mixed into vLLM's worker class."""

    def llm_envs_reload_weights(self, folder: str) -> None:
        """Reload every weight from the safetensors files of ``folder`` (Hugging Face names), then
        tie the output head to the input embedding again where the model ties them.

        The worker's ``reload_weights`` (vLLM's in-place reload, which also redoes the CPU
        backend's weight packing; the model's plain ``load_weights`` cannot write into packed
        layers) skips a tied head, whose packed copy (CPU backend) then keeps the old embedding:
        after an update of SmolLM2's embedding the engine sampled from a head the learner no
        longer had (log-probs off by 0.18). The head is re-tied and re-packed here.
        """
        self.reload_weights(weights_path=folder)  # type: ignore[attr-defined]
        model = self.model_runner.model  # type: ignore[attr-defined]
        config = getattr(model, "config", None)
        head = getattr(model, "lm_head", None)
        embed = getattr(getattr(model, "model", None), "embed_tokens", None)
        if getattr(config, "tie_word_embeddings", False) and head is not None and embed is not None:
            if head.weight is not embed.weight and head.weight.shape == embed.weight.shape:
                head.weight = embed.weight
            # The CPU backend multiplies by a packed copy of the head's weight, made once after
            # loading; the reload skipped the (tied, so absent) head and left that copy stale.
            method = getattr(head, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(head)

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
