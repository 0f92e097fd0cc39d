"""Inference engines as Ray actors, data-parallel: one per GPU (or per tensor-parallel group).

Each :class:`EngineWorker` holds its own copy of the run's policies (built from the same
arguments and seed as the trainer's, so identical at the start) and an
:class:`~llm_trainers.agents.hf.HFEngine` or :class:`~llm_trainers.agents.vllm.VLLMEngine` over
them, exactly the engine of the single-process layout. :class:`DataParallelEngine` is the
trainer's side: it speaks the same engine protocol (``encode``, ``generate_multi``, ``sync``,
``view``, ``state_dict``), cuts each batch of requests into contiguous shards, one per engine,
and sends the weights after an update to every engine:

* L2 (and any LoRA policy): only the adapter tensors travel; each engine loads them into its
  copy, and a vLLM engine then reloads the adapter as it does in one process (peft directory,
  ``LoRARequest`` in place or under a new id, prefix cache reset, first-sync check);
* L1/L3 full fine-tuning: every weight travels once through Ray's object store (one copy per
  node) and a vLLM engine loads it with ``collective_rpc`` into its workers.

Engine ``i`` samples with its own generator (engine 0 with the run's seed, so a one-engine
layout samples exactly what the single-process one does). A dead engine is an error naming it;
the run continues from its last checkpoint with ``--resume``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_trainers.specs import PolicySpec

__all__ = ["DataParallelEngine", "EngineLost", "EngineSpec", "EngineWorker", "engine_seed", "split_evenly"]


class EngineLost(RuntimeError):
    """An inference engine actor died."""


def engine_seed(seed: int, index: int) -> int:
    """Engine ``index``'s sampling seed: the run's seed for engine 0, independent streams else."""
    if index == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


def split_evenly(n: int, parts: int) -> list[range]:
    """``0..n-1`` in ``parts`` contiguous ranges whose sizes differ by at most one (some empty when
    ``n < parts``)."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for p in range(parts):
        size = base + (1 if p < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


@dataclass
class EngineSpec:
    """Everything an engine actor needs to build its engine.

    Attributes:
        kind: ``hf`` or ``vllm``.
        policy: The run's :class:`~llm_trainers.specs.PolicySpec` (``device`` is replaced by
            the actor's own).
        sampling: Default sampling parameters.
        seed: The run's seed (engine ``i`` samples with :func:`engine_seed`).
        max_batch_size: HF engine: sequences per ``generate`` call.
        chat_template_kwargs: Chat-template variables.
        bf16: HF engine autocast (``auto``: on a bf16 GPU).
        vllm: vLLM settings (:class:`~llm_trainers.config.VLLMConfig`).
        tensor_parallel_size: vLLM tensor parallelism (the engine's GPUs).
    """

    kind: str
    policy: PolicySpec
    sampling: Any
    seed: int
    max_batch_size: int = 64
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    bf16: Any = "auto"
    vllm: Any = None
    tensor_parallel_size: int = 1


class EngineWorker:
    """One engine in its own process (a plain class; :class:`DataParallelEngine` makes the actor)."""

    def __init__(self, spec: EngineSpec, index: int) -> None:
        import torch

        self.index = index
        self.spec = spec
        gpu = torch.cuda.is_available()
        # vLLM computes on the GPU itself: its HF copy (tokenizers, adapters to write) stays on the CPU
        device = "cuda" if gpu and spec.kind == "hf" else "cpu"
        self.policies = spec.policy.with_changes(device=device, need_reference=False,
                                                 gradient_checkpointing=False).build()
        seed = engine_seed(spec.seed, index)
        if spec.kind == "hf":
            from llm_trainers.agents.hf import HFEngine

            bf16 = spec.bf16
            if bf16 == "auto":
                bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
            self.engine = HFEngine(self.policies, spec.sampling, seed=seed, max_batch_size=spec.max_batch_size,
                                   chat_template_kwargs=spec.chat_template_kwargs, bf16=bool(bf16))
        else:
            from llm_trainers.agents.vllm import VLLMEngine

            extra = {"tensor_parallel_size": spec.tensor_parallel_size} if spec.tensor_parallel_size > 1 else {}
            self.engine = VLLMEngine(self.policies, spec.sampling, seed=seed, settings=spec.vllm,
                                     chat_template_kwargs=spec.chat_template_kwargs, engine_kwargs=extra)
        self.streams: dict[str, Any] = {"train": self.engine}

    def info(self) -> dict[str, Any]:
        from llm_trainers.distributed.cluster import node_info

        return {**node_info(), "index": self.index, "kind": self.spec.kind}

    def open_stream(self, name: str, seed: int, sampling: Any) -> None:
        """A fresh sampling stream (an engine view) named ``name``: evaluation uses its own."""
        self.streams[name] = self.engine.view(seed=engine_seed(seed, self.index), sampling=sampling)

    def generate_multi(self, requests: Sequence[tuple[str, Sequence[int]]], n: int, sampling: Any = None,
                       stream: str = "train") -> list[list[Any]]:
        return self.streams[stream].generate_multi(requests, n=n, sampling=sampling)

    def load_weights(self, states: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
        """Take the trainable weights of the named policies, then let the engine serve them."""
        for name, state in states.items():
            self.policies[name].load_trainable_state_dict(state)
        return self.engine.sync(list(states))

    def offload(self) -> None:
        offload = getattr(self.engine, "offload", None)
        if offload is not None:
            offload()

    def state_dict(self) -> dict[str, Any]:
        return self.engine.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.engine.load_state_dict(state)

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


class DataParallelEngine:
    """The trainer's handle on :class:`EngineWorker` actors (the rollout engine protocol).

    Args:
        actors: The engine actors, in engine order.
        policies: The trainer's copy of the policies: tokenizers for ``encode``, and the weights
            :meth:`sync` sends.
        sampling: Default sampling parameters.
        chat_template_kwargs: Chat-template variables (as the engines use).
        agent_class: The agent class that exposes one policy of this engine to the runner.
        stream: The actors' sampling stream this handle uses (a view has its own).
    """

    name = "ray"

    def __init__(self, actors: Sequence[Any], policies: Any, sampling: Any,
                 chat_template_kwargs: Mapping[str, Any] | None = None, agent_class: type | None = None,
                 stream: str = "train") -> None:
        from llm_trainers.distributed.cluster import import_ray

        self.ray = import_ray()
        self.actors = list(actors)
        self.policies = policies
        self.sampling = sampling
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.agent_class = agent_class
        self.stream = stream
        self.generated_tokens = 0
        self._owner = stream == "train"

    @classmethod
    def start(cls, spec: EngineSpec, count: int, policies: Any, *, gpus: float, cpus: float,
              cluster: Any = None, timeout_s: float = 600.0) -> DataParallelEngine:
        """Start ``count`` engine actors (GPU engines in one placement group, strategy PACK)."""
        from llm_trainers.distributed.cluster import import_ray

        ray = import_ray()
        actor_cls = ray.remote(EngineWorker)
        options: list[dict[str, Any]] = []
        if gpus > 0 and cluster is not None:
            pg = cluster.placement_group([{"GPU": float(gpus), "CPU": float(cpus)}] * count, "PACK", "engines", timeout_s)
            options = [{"num_gpus": gpus, "num_cpus": cpus, "scheduling_strategy": cluster.in_group(pg, i)}
                       for i in range(count)]
        else:
            options = [{"num_gpus": gpus, "num_cpus": cpus}] * count
        actors = [actor_cls.options(max_restarts=0, **options[i]).remote(spec, i) for i in range(count)]
        if spec.kind == "hf":
            from llm_trainers.agents.hf import HFAgent as agent_class
        else:
            from llm_trainers.agents.vllm import VLLMAgent as agent_class
        engine = cls(actors, policies, spec.sampling, spec.chat_template_kwargs, agent_class)
        engine.infos = engine._gather([a.info.remote() for a in actors], "start")
        return engine

    # ------------------------------------------------------------------ the engine protocol
    def encode(self, policy: str, observation: Mapping[str, str]) -> list[int]:
        from llm_trainers.agents.hf import encode_observation

        return encode_observation(self.policies[policy].tokenizer, observation, self.chat_template_kwargs)

    def generate_multi(self, requests: Sequence[tuple[str, Sequence[int]]], n: int = 1,
                       sampling: Any = None) -> list[list[Any]]:
        """``n`` samples per ``(policy, prompt_ids)``: contiguous shards, one per engine."""
        shards = split_evenly(len(requests), len(self.actors))
        calls = [(e, self.actors[e].generate_multi.remote([requests[i] for i in shard], n, sampling, self.stream))
                 for e, shard in enumerate(shards) if len(shard)]
        rows = [row for part in self._gather([ref for _, ref in calls], "generate") for row in part]
        self.generated_tokens += sum(len(g.token_ids) for row in rows for g in row)
        return rows

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int = 1,
                 sampling: Any = None) -> list[list[Any]]:
        return self.generate_multi([(policy, p) for p in prompts], n=n, sampling=sampling)

    def sync(self, policies: Sequence[str] | None = None) -> dict[str, float]:
        """Send the named policies' trainable weights to every engine (one object-store copy)."""
        names = list(policies if policies is not None else self.policies.names())
        if not names:
            return {}
        t0 = time.perf_counter()
        states = {name: self.policies[name].trainable_state_dict() for name in names}
        size = float(sum(t.numel() * t.element_size() for s in states.values() for t in s.values()))
        ref = self.ray.put(states)
        self._gather([a.load_weights.remote(ref) for a in self.actors], "weight sync")
        return {"weight_push_bytes": size * len(self.actors), "weight_push_s": time.perf_counter() - t0}

    def offload(self) -> None:
        self._gather([a.offload.remote() for a in self.actors], "offload")

    def view(self, seed: int, sampling: Any = None) -> DataParallelEngine:
        """The same engines with a fresh sampling stream (seeded from ``seed``) for evaluation."""
        name = f"view-{seed}"
        params = sampling or self.sampling
        self._gather([a.open_stream.remote(name, seed, params) for a in self.actors], "view")
        return DataParallelEngine(self.actors, self.policies, params, self.chat_template_kwargs, self.agent_class,
                                  stream=name)

    def state_dict(self) -> dict[str, Any]:
        return {"engines": self._gather([a.state_dict.remote() for a in self.actors], "state")}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the engines' sampling streams. A checkpoint of another layout (another engine
        count, or the single-process engine) continues its first stream in engine 0."""
        count = len(self.actors)
        if "engines" in state:
            saved = list(state["engines"])
            states = saved if len(saved) == count else saved[:1] + [None] * (count - 1)
        else:
            states = [dict(state)] + [None] * (count - 1)
        self._gather([a.load_state_dict.remote(s) for a, s in zip(self.actors, states) if s is not None], "restore")

    def close(self) -> None:
        if not self._owner:
            return
        for actor in self.actors:
            try:
                self.ray.get(actor.close.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - a dead engine has nothing to close
                pass
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    def _gather(self, refs: Sequence[Any], what: str) -> list[Any]:
        from ray.exceptions import ActorUnavailableError, RayActorError

        try:
            return self.ray.get(list(refs))
        except (RayActorError, ActorUnavailableError) as exc:
            raise EngineLost(
                f"an inference engine actor was lost during {what}: {type(exc).__name__}: {exc}. The run cannot "
                "go on without its weights; restart it with --resume (it continues from the last checkpoint)."
            ) from exc
