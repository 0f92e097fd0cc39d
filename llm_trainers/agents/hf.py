"""Hugging Face transformers rollout engine and agent (CPU and GPU).

:class:`HFEngine` samples from the policies of a :class:`~llm_trainers.policies.PolicySet`
*in place* — it shares the learner's modules, so a weight update is visible to the next rollout
without any copy ("weight push" costs nothing). Generation is batched with left padding, the
chat template turns an observation into prompt tokens, and the log-probability of every sampled
token is returned, computed from the same logits the sampler used:
``log softmax(z_t / τ)[token]`` (temperature included; top-p/top-k truncation is not part of
the reported log-probability, as with vLLM's ``raw_logprobs`` scaled by temperature).

Sampling is reproducible without touching global state: each call draws a seed from the
engine's own ``numpy.random.Generator`` and runs ``generate`` inside ``torch.random.fork_rng``.

:class:`HFAgent` exposes one policy of the engine through the :class:`llm_envs.agents.Agent`
protocol, with :meth:`HFAgent.sample` for ``n`` candidates per request (tree sampling).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from llm_envs.agents.base import ActRequest, Agent, AgentOutput
from llm_envs.core.messages import to_chat_messages
from llm_trainers.policies import Policy, PolicySet, build_policies
from llm_trainers.sampling import DEFAULT_SAMPLING_SEED, SamplingParams, sampling_record

__all__ = ["Generation", "HFAgent", "HFEngine", "SamplingParams", "encode_observation", "resolve_adapter_path"]


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        token_ids: Sampled tokens, including the stop token if one was sampled.
        logprobs: ``log π(token)`` for each sampled token under the sampling distribution.
        text: Decoded text without special tokens.
        finish_reason: ``"stop"`` (a stop token was sampled) or ``"length"``.
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


def encode_observation(tokenizer: Any, observation: Mapping[str, str], chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """Prompt token ids of an observation: its chat messages through the chat template."""
    messages = to_chat_messages(observation)
    out = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, **dict(chat_template_kwargs or {})
    )
    ids = out["input_ids"]
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def resolve_adapter_path(path: str, adapter_path: str | None) -> tuple[str, str | None]:
    """``(base model, adapter)``: a peft adapter directory given as the model stands for its base
    model (``base_model_name_or_path`` of its ``adapter_config.json``) plus itself. A training
    run's ``final/<policy>`` is such a directory at every level; an older export that nests it
    one level deeper (``final/<policy>/<adapter>``) is accepted under its outer path too."""
    import json
    from pathlib import Path

    config = Path(path) / "adapter_config.json"
    if adapter_path is None and not config.is_file() and Path(path).is_dir():
        # An export written before adapters were moved up (final/<policy>/<adapter>/): the
        # directory holds exactly one adapter directory and no model of its own.
        nested = [d for d in Path(path).iterdir() if (d / "adapter_config.json").is_file()]
        if len(nested) == 1 and not (Path(path) / "config.json").is_file():
            path = str(nested[0])
            config = nested[0] / "adapter_config.json"
    if adapter_path is None and config.is_file():
        base = json.loads(config.read_text()).get("base_model_name_or_path")
        if not base:
            raise ValueError(f"{config} names no base model (base_model_name_or_path)")
        return str(base), str(path)
    return path, adapter_path


class HFEngine:
    """Batched sampling from the policies of a :class:`PolicySet` with ``model.generate``.

    Args:
        policies: The policies (shared with the learner: updates are seen immediately).
        sampling: Default sampling parameters.
        seed: Seed of the engine's own generator.
        max_batch_size: Most sequences (prompts × n) per ``generate`` call.
        chat_template_kwargs: Extra chat-template variables (e.g. ``{"enable_thinking": False}``
            for Qwen3, as the papers ran it).
        bf16: Autocast sampling to bfloat16 (as the learner's passes, so both score alike).
    """

    name = "hf"

    def __init__(
        self,
        policies: PolicySet,
        sampling: SamplingParams | None = None,
        seed: int = 0,
        max_batch_size: int = 64,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        bf16: bool = False,
    ) -> None:
        self.policies = policies
        self.bf16 = bf16
        self.sampling = sampling or SamplingParams()
        self.rng = np.random.default_rng(seed)
        self.max_batch_size = max_batch_size
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.generated_tokens = 0

    # ------------------------------------------------------------------ prompts
    def encode(self, policy: str, observation: Mapping[str, str]) -> list[int]:
        return encode_observation(self.policies[policy].tokenizer, observation, self.chat_template_kwargs)

    # ------------------------------------------------------------------ sampling
    def generate(
        self,
        policy: str,
        prompts: Sequence[Sequence[int]],
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[list[Generation]]:
        """Sample ``n`` completions for each prompt from ``policy``.

        Returns:
            One list of ``n`` :class:`Generation` per prompt, in order.
        """
        params = sampling or self.sampling
        pol = self.policies[policy]
        flat = [list(p) for p in prompts for _ in range(n)]
        results: list[Generation] = []
        step = max(1, self.max_batch_size)
        for start in range(0, len(flat), step):
            results.extend(self._generate_chunk(pol, flat[start : start + step], params))
        return [results[i * n : (i + 1) * n] for i in range(len(prompts))]

    def generate_multi(
        self,
        requests: Sequence[tuple[str, Sequence[int]]],
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[list[Generation]]:
        """Sample ``n`` completions for each ``(policy, prompt_ids)``; one batch per policy."""
        by_policy: dict[str, list[int]] = {}
        for i, (policy, _) in enumerate(requests):
            by_policy.setdefault(policy, []).append(i)
        out: list[list[Generation]] = [[] for _ in requests]
        for policy, idx in by_policy.items():
            rows = self.generate(policy, [requests[i][1] for i in idx], n=n, sampling=sampling)
            for i, row in zip(idx, rows):
                out[i] = row
        return out

    def view(self, seed: int, sampling: SamplingParams | None = None) -> HFEngine:
        """This engine's policies with their own sampling generator (and parameters), e.g. for
        evaluation that must not disturb the training stream."""
        return HFEngine(self.policies, sampling or self.sampling, seed=seed, max_batch_size=self.max_batch_size,
                        chat_template_kwargs=self.chat_template_kwargs, bf16=self.bf16)

    def _stop_ids(self, pol: Policy, params: SamplingParams) -> list[int]:
        eos = pol.tokenizer.eos_token_id
        gen_eos = getattr(getattr(pol.model, "generation_config", None), "eos_token_id", None)
        ids: list[int] = []
        for x in (eos, gen_eos, params.stop_token_ids):
            if x is None:
                continue
            ids.extend(x if isinstance(x, (list, tuple)) else [x])
        return list(dict.fromkeys(int(i) for i in ids))

    def _generation_config(self, pol: Policy, params: SamplingParams, stop_ids: list[int]) -> Any:
        from transformers import GenerationConfig

        greedy = params.temperature <= 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "do_sample": not greedy,
            "eos_token_id": stop_ids,
            "pad_token_id": pol.tokenizer.pad_token_id,
            "return_dict_in_generate": True,
            "output_logits": True,
            # Every knob that a model's own generation_config could set is pinned here, so the
            # sampled distribution is exactly the one the trainer scores.
            "repetition_penalty": 1.0,
            "num_beams": 1,
            "bos_token_id": None,
        }
        if not greedy:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
        return GenerationConfig(**kwargs)

    @torch.no_grad()
    def _generate_chunk(self, pol: Policy, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        tok = pol.tokenizer
        device = pol.device
        width = max(len(p) for p in prompts)
        pad = tok.pad_token_id
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.as_tensor(p)
            attention[i, width - len(p) :] = 1
        stop_ids = self._stop_ids(pol, params)
        config = self._generation_config(pol, params, stop_ids)
        seed = int(self.rng.integers(0, 2**63 - 1))
        devices = [device] if device.type == "cuda" else []
        autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if self.bf16
                    else contextlib.nullcontext())
        with pol.activated() as model, torch.random.fork_rng(devices=devices), autocast:
            torch.manual_seed(seed)
            out = model.generate(
                input_ids=input_ids.to(device), attention_mask=attention.to(device), generation_config=config
            )
        new_tokens = out.sequences[:, width:].cpu()
        temperature = params.temperature if params.temperature > 0 else 1.0
        if out.logits:
            logits = torch.stack(out.logits, dim=1).float() / temperature  # [B, steps, V]
            logp_all = torch.log_softmax(logits, dim=-1)
            steps = min(logp_all.shape[1], new_tokens.shape[1])
            picked = logp_all[:, :steps].gather(-1, new_tokens[:, :steps, None].to(logp_all.device)).squeeze(-1).cpu()
        else:
            picked = torch.zeros_like(new_tokens, dtype=torch.float32)
        stop = set(stop_ids)
        results = []
        for i in range(len(prompts)):
            ids = new_tokens[i].tolist()
            length, reason = len(ids), "length"
            for j, t in enumerate(ids):
                if t in stop:
                    length, reason = j + 1, "stop"
                    break
            ids = ids[:length]
            lps = picked[i, :length].tolist()
            text = tok.decode(ids, skip_special_tokens=True)
            results.append(Generation(ids, lps, text, reason))
            self.generated_tokens += length
        return results

    # ------------------------------------------------------------------ lifecycle
    def sync(self, policies: Sequence[str] | None = None) -> dict[str, float]:
        """Make updated weights visible to sampling: nothing to do (modules are shared)."""
        return {"weight_push_bytes": 0.0}

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "engines" in state:  # a data-parallel layout's checkpoint: continue its first engine's stream
            state = state["engines"][0]
        self.rng.bit_generator.state = state["rng"]


class HFAgent(Agent):
    """One policy of an :class:`HFEngine` behind the :class:`~llm_envs.agents.Agent` protocol.

    ``HFAgent.from_pretrained("Qwen/Qwen3-1.7B")`` builds a stand-alone agent for evaluation.
    Outputs carry ``prompt_token_ids``, ``token_ids`` and ``logprobs`` (token-in/token-out).
    """

    def __init__(self, engine: HFEngine, policy: str, name: str | None = None) -> None:
        self.engine = engine
        self.policy = policy
        self.name = name or f"hf:{policy}"

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        sampling: SamplingParams | None = None,
        device: str = "auto",
        dtype: str = "auto",
        seed: int = DEFAULT_SAMPLING_SEED,
        max_batch_size: int = 64,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        adapter_path: str | None = None,
        threads: int | None = None,
    ) -> HFAgent:
        """A stand-alone agent for any causal LM by path or hub id, optionally with a peft adapter
        (``adapter_path``); ``path`` may itself be an adapter directory (its base model is read
        from ``adapter_config.json``), e.g. ``final/<policy>`` of a training run.

        ``threads``: torch intra-op threads (default: the CPUs this process may use, see
        :mod:`llm_trainers.threads`). ``path`` may be a GGUF file or a packaged model's name
        (:func:`llm_trainers.policies.model_source`)."""
        from llm_trainers.threads import set_torch_threads

        set_torch_threads(threads)
        path, adapter_path = resolve_adapter_path(path, adapter_path)
        policies = build_policies("L1", ["*"], path, policy_map={"*": "shared"}, device=device, dtype=dtype)
        if adapter_path:
            from peft import PeftModel

            pol = policies["shared"]
            pol.model = PeftModel.from_pretrained(pol.model, adapter_path, adapter_name="default")
            pol.adapter = "default"
        engine = HFEngine(policies, sampling, seed=seed, max_batch_size=max_batch_size,
                          chat_template_kwargs=chat_template_kwargs)
        agent = cls(engine, "shared", name=f"hf:{path}")
        agent.seed = int(seed)
        return agent

    def settings(self) -> dict[str, Any]:
        """The default settings plus every effective sampling setting, defaults included
        (temperature, top-p, top-k, completion limit, seed): ``run.json`` shows what was sampled
        with even when no option was given."""
        data = super().settings()
        data["sampling"] = sampling_record(self.engine.sampling, getattr(self, "seed", DEFAULT_SAMPLING_SEED))
        return data

    def sample(self, requests: Sequence[ActRequest], n: int = 1) -> list[list[AgentOutput]]:
        """``n`` candidates per request, all from the same prompt tokens."""
        t0 = time.perf_counter()
        prompts = [self.engine.encode(self.policy, r.observation) for r in requests]
        try:
            gens = self.engine.generate(self.policy, prompts, n=n)
        except (RuntimeError, ValueError) as exc:
            # e.g. out of memory: an infrastructure failure, never an action. Reported per request
            # through AgentOutput.error (llm_envs.agents.base): the runner never plays such an
            # output; the episode is recorded incomplete and a resumed run plays it again.
            return [[AgentOutput(text="", prompt_token_ids=p, error=f"{type(exc).__name__}: {exc}")] * n for p in prompts]
        latency = time.perf_counter() - t0
        return [
            [
                AgentOutput(
                    text=g.text,
                    prompt_token_ids=p,
                    token_ids=g.token_ids,
                    logprobs=g.logprobs,
                    prompt_tokens=len(p),
                    completion_tokens=len(g.token_ids),
                    meta={"finish_reason": g.finish_reason, "policy": self.policy, "batch_latency_s": latency},
                )
                for g in row
            ]
            for p, row in zip(prompts, gens)
        ]

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        return [row[0] for row in self.sample(requests, n=1)]

