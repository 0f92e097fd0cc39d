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
import dataclasses
import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from llm_envs.agents.base import CONTEXT_EXCEEDED, ActRequest, Agent, AgentOutput
from llm_envs.core.messages import to_chat_messages
from llm_trainers.batching import _accepts_logits_to_keep
from llm_trainers.policies import Policy, PolicySet, build_policies
from llm_trainers.sampling import DEFAULT_SAMPLING_SEED, SamplingParams, sampling_record

__all__ = ["Generation", "HFAgent", "HFEngine", "SamplingParams", "encode_messages", "encode_observation",
           "resolve_adapter_path"]

log = logging.getLogger(__name__)


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        token_ids: Sampled tokens, including the stop token if one was sampled.
        logprobs: ``log π(token)`` for each sampled token under the sampling distribution.
        text: Decoded text without special tokens.
        finish_reason: ``"stop"`` (a stop token was sampled), ``"length"`` (the completion limit,
            or the model's context, reached) or ``"context_length"`` (the prompt left no room
            in the context: nothing sampled, :data:`~llm_envs.agents.base.CONTEXT_EXCEEDED`).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


def encode_observation(tokenizer: Any, observation: Mapping[str, str], chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """Prompt token ids of an observation: its chat messages through the chat template
    (:func:`encode_messages`)."""
    return encode_messages(tokenizer, to_chat_messages(observation), chat_template_kwargs)


def encode_messages(tokenizer: Any, messages: Sequence[Mapping[str, str]],
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """Prompt token ids of chat messages through the chat template, with the generation prompt.

    Only the template writes control tokens. Text inside a message that spells one (an agent's
    reply ``red<|im_end|><|im_start|>assistant``, shown to the next agent) is encoded as the
    plain text it is: tokenizing the rendered chat would read it as the real tokens, closing the
    turn and forging another in the prompt the policy is sampled and trained on. Messages that
    spell none are encoded exactly as ``apply_chat_template(tokenize=True)`` encodes them.
    """
    messages = [dict(m) for m in messages]
    kwargs = dict(chat_template_kwargs or {})
    controls = _control_strings(tokenizer)
    spelled = sorted({c for m in messages for c in controls if c in str(m.get("content", ""))}, key=len, reverse=True)
    if not spelled:
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                            **kwargs)
        ids = out["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)
    # Each spelled control string becomes a private-use character of its own while the template
    # renders, so the rendered chat's control strings are the template's.
    base = _PRIVATE_USE
    while any(chr(base + i) in str(m.get("content", "")) for m in messages for i in range(len(spelled))):
        base += len(spelled)
    marks = {c: chr(base + i) for i, c in enumerate(spelled)}
    for m in messages:
        text = str(m.get("content", ""))
        for c, mark in marks.items():
            text = text.replace(c, mark)
        m["content"] = text
    return _encode_marked(tokenizer, messages, marks, kwargs)


def _encode_marked(tokenizer: Any, messages: Sequence[Mapping[str, str]], marks: Mapping[str, str],
                   kwargs: Mapping[str, Any]) -> list[int]:
    """The chat rendered, then cut at its control strings (as the tokenizer cuts at added
    tokens), each piece between them encoded with special tokens read as text once every mark
    is put back as the control string it stands for. Without marks: the ids
    ``apply_chat_template(tokenize=True)`` gives (tests/trainers/test_hf_engine.py)."""
    rendered = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False, **kwargs)
    ids: list[int] = []
    for piece, control in _split_at(rendered, _control_strings(tokenizer)):
        for c, mark in marks.items():
            piece = piece.replace(mark, c)
        if piece:
            ids += tokenizer(piece, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        if control is not None:
            ids.append(int(tokenizer.convert_tokens_to_ids(control)))
    return ids


#: The first of the private-use characters (plane 15) that stand for spelled control tokens.
_PRIVATE_USE = 0xF0000


def _control_strings(tokenizer: Any) -> list[str]:
    """The texts of the tokenizer's special added tokens (the ones ``split_special_tokens`` reads
    as text): the chat template's control tokens among them."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found = {str(t.content) for t in decoder.values() if getattr(t, "special", False) and str(t.content)}
    found.update(t for t in getattr(tokenizer, "all_special_tokens", []) if t)
    return sorted(found)


def _split_at(text: str, controls: Sequence[str]) -> list[tuple[str, str | None]]:
    """``text`` cut at every occurrence of a control string (the longest where several start at
    one place): ``(piece before it, control)`` pairs, the last with control ``None``."""
    import re

    pattern = re.compile("|".join(re.escape(c) for c in sorted(controls, key=len, reverse=True)))
    out: list[tuple[str, str | None]] = []
    start = 0
    for hit in pattern.finditer(text):
        out.append((text[start:hit.start()], hit.group()))
        start = hit.end()
    out.append((text[start:], None))
    return out


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
        batching: ``"continuous"`` (default: a finished sequence's slot goes to a waiting prompt
            at once, see :meth:`_generate_continuous`) or ``"static"`` (``model.generate`` per
            chunk of ``max_batch_size``: every chunk lasts as long as its longest completion).
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
        batching: str = "continuous",
    ) -> None:
        if batching not in ("continuous", "static"):
            raise ValueError(f"batching must be 'continuous' or 'static', got {batching!r}")
        self.policies = policies
        self.bf16 = bf16
        self.batching = batching
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
        context = context_length(pol.model)
        fits = [i for i, p in enumerate(flat) if fits_context(p, context)]
        budgets = [min(params.max_new_tokens, context - len(flat[i])) if context else params.max_new_tokens for i in fits]
        sampled: list[Generation] = []
        if self.batching == "continuous":
            sampled = self._generate_continuous(pol, [flat[i] for i in fits], params, budgets)
        else:
            step = max(1, self.max_batch_size)
            for start in range(0, len(fits), step):
                chunk = [flat[i] for i in fits[start : start + step]]
                sampled.extend(self._generate_chunk(pol, chunk, params, budgets[start : start + step]))
        results = outside_context(len(flat), fits, sampled, context, pol.name)
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
                        chat_template_kwargs=self.chat_template_kwargs, bf16=self.bf16, batching=self.batching)

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
            # Pinned here as well as by `_model_defaults_off` (which hides the model's own
            # generation_config during the call, so that none of its other knobs, min_p,
            # suppress_tokens, no_repeat_ngram_size, min_new_tokens..., reaches the sampler).
            "repetition_penalty": 1.0,
            "num_beams": 1,
            "bos_token_id": None,
        }
        if not greedy:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
        return GenerationConfig(**kwargs)

    def _sampling_context(self, pol: Policy) -> Any:
        """fork_rng seeded from the engine's generator, and bf16 autocast when asked."""
        seed = int(self.rng.integers(0, 2**63 - 1))
        device = pol.device
        devices = [device] if device.type == "cuda" else []
        stack = contextlib.ExitStack()
        stack.enter_context(torch.random.fork_rng(devices=devices))
        torch.manual_seed(seed)
        if self.bf16:
            stack.enter_context(torch.autocast(device_type=device.type, dtype=torch.bfloat16))
        return stack

    def _finish(self, pol: Policy, ids: list[int], lps: list[float], stop: set[int], budget: int) -> Generation:
        ids, lps = ids[:budget], lps[:budget]  # (a static batch decodes to its longest budget)
        length, reason = len(ids), "length"
        for j, t in enumerate(ids):
            if t in stop:
                length, reason = j + 1, "stop"
                break
        self.generated_tokens += length
        return Generation(ids[:length], lps[:length], pol.tokenizer.decode(ids[:length], skip_special_tokens=True), reason)

    @torch.no_grad()
    def _generate_chunk(self, pol: Policy, prompts: list[list[int]], params: SamplingParams,
                        budgets: list[int]) -> list[Generation]:
        """Static batching: one ``model.generate`` call for the whole chunk (it lasts as long as
        its longest completion). Log-probs come from :class:`SampledLogprobs`, one step at a time."""
        from transformers import LogitsProcessorList

        input_ids, attention = _left_pad(prompts, pol.tokenizer.pad_token_id)
        width = input_ids.shape[1]
        stop_ids = self._stop_ids(pol, params)
        config = self._generation_config(pol, dataclasses.replace(params, max_new_tokens=max(budgets)), stop_ids)
        recorder = SampledLogprobs(params.temperature)
        with pol.activated() as model, self._sampling_context(pol), _model_defaults_off(model):
            out = model.generate(input_ids=input_ids.to(pol.device), attention_mask=attention.to(pol.device),
                                 generation_config=config, logits_processor=LogitsProcessorList([recorder]))
        new_tokens = out.sequences[:, width:]
        picked = recorder.finish(new_tokens).cpu()
        stop = set(stop_ids)
        return [self._finish(pol, new_tokens[i].tolist(), picked[i].tolist(), stop, budgets[i]) for i in range(len(prompts))]

    @torch.no_grad()
    def _generate_continuous(self, pol: Policy, prompts: list[list[int]], params: SamplingParams,
                             budgets: list[int]) -> list[Generation]:
        """Continuous batching: at most ``max_batch_size`` sequences decode together; a sequence
        leaves the batch the step it ends (its rows are cut out of the KV cache), and waiting
        prompts take the freed slots (prefilled, then joined to the cache with left padding).
        One step's logits exist at a time; a sequence's log-probs (given its tokens) and its
        greedy tokens do not depend on which others share its batch (up to float rounding), its
        sampled tokens do: one generator draws for all the rows of a step."""
        stop = set(self._stop_ids(pol, params))
        device = pol.device
        pad = pol.tokenizer.pad_token_id
        results: list[Generation | None] = [None] * len(prompts)
        waiting = list(range(len(prompts)))
        limit = max(1, self.max_batch_size)
        batch: _DecodeBatch | None = None
        with pol.activated() as model, self._sampling_context(pol):
            logits_to_keep = _accepts_logits_to_keep(model)
            while waiting or batch is not None:
                free = limit - (batch.size if batch is not None else 0)
                # Refill when a quarter of the slots (or every waiting prompt) can join: a prefill
                # and a cache merge per single freed slot would cost more than they save.
                if waiting and free > 0 and (batch is None or free >= min(len(waiting), max(1, limit // 4))):
                    if batch is None or batch.can_merge():
                        take, waiting = waiting[:free], waiting[free:]
                        joined = _DecodeBatch.prefill(model, [prompts[i] for i in take], take, pad, device,
                                                      logits_to_keep)
                        batch = joined if batch is None else batch.merge(joined)
                assert batch is not None
                tokens, logps = _sample_step(batch.next_logits, params)
                done = batch.append(tokens, logps, stop, budgets)
                for row in done:
                    i = batch.request[row]
                    results[i] = self._finish(pol, batch.tokens[row], batch.logps[row], stop, budgets[i])
                batch = batch.keep([r for r in range(batch.size) if r not in set(done)])
                if batch is not None:
                    batch.forward(model, logits_to_keep)
        return [r for r in results if r is not None]

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



# ---------------------------------------------------------------------------- sampling helpers
def context_length(model: Any) -> int | None:
    """The most tokens ``model`` has positions for (its config's ``max_position_embeddings``,
    ``n_positions`` or ``max_sequence_length``), or ``None`` where its config names none."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def fits_context(prompt: Sequence[int], context: int | None) -> bool:
    """Whether ``prompt`` leaves room for at least one new token in a context of ``context``
    tokens (``None``: no limit known)."""
    return context is None or len(prompt) < context


def outside_context(count: int, fits: Sequence[int], sampled: Sequence[Generation], context: int | None,
                    policy: str) -> list[Generation]:
    """All ``count`` generations in order: ``sampled`` at the indices ``fits``, and an empty one
    (finish reason :data:`~llm_envs.agents.base.CONTEXT_EXCEEDED`) for every prompt that left no
    room in the context. Beyond its context a model with rotary positions extrapolates (one with
    learned positions fails), and what it sampled there would be trained on as the policy's;
    an empty answer is the environment's to judge, and a trainer has no token of it to train."""
    results: list[Generation] = [Generation([], [], "", CONTEXT_EXCEEDED) for _ in range(count)]
    for i, generation in zip(fits, sampled):
        results[i] = generation
    if len(fits) < count:
        log.warning("%d prompt(s) of policy %r left no room in its context of %s tokens: answered empty "
                    "(finish_reason %r)", count - len(fits), policy, context, CONTEXT_EXCEEDED)
    return results


@contextlib.contextmanager
def _model_defaults_off(model: Any) -> Any:
    """Hide the generation_config that every module of ``model`` carries (a PEFT wrapper's and
    the model's under it) for one ``generate`` call: transformers fills each field the call's
    config leaves unset from it, so a checkpoint's ``min_p``, ``suppress_tokens``,
    ``no_repeat_ngram_size`` or ``min_new_tokens`` reshaped what static batching sampled while
    the engine reported, and the trainer scored, the plain softmax."""
    from transformers import GenerationConfig

    hidden = [m for m in model.modules() if isinstance(getattr(m, "generation_config", None), GenerationConfig)]
    saved = [m.generation_config for m in hidden]
    try:
        for m in hidden:
            m.generation_config = GenerationConfig()
        yield
    finally:
        for m, config in zip(hidden, saved):
            m.generation_config = config


def _left_pad(prompts: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of prompts left-padded to the longest."""
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
        attention[i, width - len(p) :] = 1
    return input_ids, attention


def reported_logprobs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(z / τ)`` over the vocabulary (τ ≤ 0, greedy, uses τ = 1): the distribution
    whose log-probabilities the engine reports and the learner recomputes
    (:func:`llm_trainers.batching.completion_logprobs`); top-p/top-k truncation is not part of it."""
    tau = temperature if temperature > 0 else 1.0
    return torch.log_softmax(logits.float() / tau, dim=-1)


class SampledLogprobs:
    """A ``transformers`` logits processor that records ``log softmax(z_t / τ)[token_t]`` of the
    sampled tokens as generation proceeds, holding one step's log-probabilities at a time
    (instead of ``output_logits=True``, which keeps ``[batch, steps, vocab]`` floats).

    ``generate`` runs custom processors before its temperature and top-k/top-p warpers, so the
    scores seen here are the model's logits ``z_t``; the token sampled from step *t* is the last
    input id at step *t + 1*, and :meth:`finish` reads the last step's from the output.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.pending: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.pending is not None:
            self.picked.append(self.pending.gather(-1, input_ids[:, -1:].to(self.pending.device)).squeeze(-1))
        self.pending = reported_logprobs(scores, self.temperature)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """``[batch, steps]`` log-probs of ``new_tokens`` (the generated part of the sequences)."""
        if self.pending is not None and len(self.picked) < new_tokens.shape[1]:
            last = new_tokens[:, len(self.picked) : len(self.picked) + 1].to(self.pending.device)
            self.picked.append(self.pending.gather(-1, last).squeeze(-1))
        self.pending = None
        if not self.picked:
            return torch.zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self.picked, dim=1).float()


def _sample_step(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row from ``logits [B, V]``: greedy at τ = 0, else from the tempered softmax
    restricted to the top-k tokens and to the smallest set of most likely tokens whose mass
    reaches top-p. Returns the tokens and their :func:`reported_logprobs`."""
    logp = reported_logprobs(logits, params.temperature)
    if params.temperature <= 0:
        tokens = logp.argmax(dim=-1)
    else:
        masked = logp
        if params.top_k and params.top_k < logp.shape[-1]:
            kth = logp.topk(params.top_k, dim=-1).values[:, -1:]
            masked = masked.masked_fill(masked < kth, float("-inf"))
        if params.top_p < 1.0:
            sorted_logp, order = masked.sort(dim=-1, descending=True)
            probs = sorted_logp.softmax(dim=-1)
            before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
            drop_sorted = before >= params.top_p  # the first token is always kept
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            masked = masked.masked_fill(drop, float("-inf"))
        tokens = torch.multinomial(masked.softmax(dim=-1), 1).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def _cache_argument(model: Any) -> str:
    """The forward argument that takes the KV cache: ``cache`` (transformers ≥ 5.2x) or
    ``past_key_values`` (before; now deprecated)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
    except (TypeError, ValueError):
        return "past_key_values"


def _output_cache(out: Any) -> Any:
    cache = out.get("cache") if hasattr(out, "get") else None
    return cache if cache is not None else out.past_key_values


class _DecodeBatch:
    """The sequences decoding together: their KV cache, attention mask, positions, and what each
    has sampled so far. Rows are requests; ``request[row]`` is the request's index."""

    def __init__(self, cache: Any, attention: torch.Tensor, positions: torch.Tensor, next_logits: torch.Tensor,
                 request: list[int]) -> None:
        self.cache = cache
        self.attention = attention  # [B, cache length (+ the token about to be fed)]
        self.positions = positions  # [B] position id of the next token to feed
        self.next_logits = next_logits  # [B, V] logits for the next token
        self.request = request
        self.tokens: list[list[int]] = [[] for _ in request]
        self.logps: list[list[float]] = [[] for _ in request]

    @property
    def size(self) -> int:
        return len(self.request)

    @classmethod
    def prefill(cls, model: Any, prompts: list[list[int]], request: list[int], pad: int, device: torch.device,
                logits_to_keep: bool) -> _DecodeBatch:
        input_ids, attention = _left_pad(prompts, pad)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if logits_to_keep else {}
        out = model(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                    position_ids=positions.to(device), use_cache=True, **kwargs)
        return cls(_output_cache(out), attention.to(device), attention.sum(-1).to(device),
                   out.logits[:, -1, :].float(), list(request))

    def append(self, tokens: torch.Tensor, logps: torch.Tensor, stop: set[int], budgets: Sequence[int]) -> list[int]:
        """Record this step's samples; return the rows that are finished (a stop token, or the
        request's budget of new tokens, ``budgets[request]``, reached)."""
        self.last = tokens
        done = []
        for row, (t, lp) in enumerate(zip(tokens.tolist(), logps.tolist())):
            self.tokens[row].append(t)
            self.logps[row].append(lp)
            if t in stop or len(self.tokens[row]) >= budgets[self.request[row]]:
                done.append(row)
        return done

    def keep(self, rows: list[int]) -> _DecodeBatch | None:
        """This batch restricted to ``rows`` (None when empty): cache rows cut out in place."""
        if not rows:
            return None
        if len(rows) < self.size:
            index = torch.as_tensor(rows, device=self.attention.device)
            self.cache.batch_select_indices(index)
            self.attention = self.attention[index]
            self.positions = self.positions[index]
            self.last = self.last[index]
            self.request = [self.request[r] for r in rows]
            self.tokens = [self.tokens[r] for r in rows]
            self.logps = [self.logps[r] for r in rows]
        return self

    def forward(self, model: Any, logits_to_keep: bool) -> None:
        """Feed every row its last sampled token; the next step's logits."""
        ones = torch.ones((self.size, 1), dtype=self.attention.dtype, device=self.attention.device)
        self.attention = torch.cat([self.attention, ones], dim=-1)
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if logits_to_keep else {}
        kwargs[_cache_argument(model)] = self.cache
        out = model(input_ids=self.last[:, None].to(self.attention.device), attention_mask=self.attention,
                    position_ids=self.positions[:, None], use_cache=True, **kwargs)
        self.cache = _output_cache(out)
        self.positions = self.positions + 1
        self.next_logits = out.logits[:, -1, :].float()

    def can_merge(self) -> bool:
        """Whether new rows can join: every cache layer is a plain growing key/value cache."""
        layers = getattr(self.cache, "layers", None)
        return bool(layers) and all(type(layer).__name__ == "DynamicLayer" and layer.keys is not None
                                    for layer in layers)

    def merge(self, other: _DecodeBatch) -> _DecodeBatch:
        """Append ``other``'s rows: the shorter cache is left-padded (masked) to the longer."""
        length, other_length = self.attention.shape[1], other.attention.shape[1]
        width = max(length, other_length)
        for mine, theirs in zip(self.cache.layers, other.cache.layers):
            for name in ("keys", "values"):
                a, b = getattr(mine, name), getattr(theirs, name)
                a = torch.nn.functional.pad(a, (0, 0, width - a.shape[-2], 0))
                b = torch.nn.functional.pad(b, (0, 0, width - b.shape[-2], 0))
                setattr(mine, name, torch.cat([a, b], dim=0))
        self.attention = torch.cat([torch.nn.functional.pad(self.attention, (width - length, 0)),
                                    torch.nn.functional.pad(other.attention, (width - other_length, 0))], dim=0)
        self.positions = torch.cat([self.positions, other.positions])
        self.next_logits = torch.cat([self.next_logits, other.next_logits])
        self.request += other.request
        self.tokens += other.tokens
        self.logps += other.logps
        return self
