"""vLLM rollout engine and agent (GPU), written against vLLM's documented offline API.

* One offline ``vllm.LLM`` per distinct base model. Under L2 all agents' adapters share one
  engine: ``enable_lora=True, max_loras=#adapters``, and a single ``generate`` call carries a
  per-prompt ``lora_request`` list, so every agent's prompts are batched together.
* Token-in/token-out: prompts go in as ``{"prompt_token_ids": [...]}``; the sampled token ids and
  their log-probabilities (``SamplingParams(logprobs=0)``; engine ``logprobs_mode=
  "processed_logprobs"`` where available, so temperature is reflected — and so is top-k/top-p
  truncation, unlike the HF engine) come back.
* Every request carries its own seed (vLLM seeds one generator per request, and child ``i`` of an
  ``n > 1`` request with ``seed + i``): one seed shared by a whole batch would make identical
  prompts — the same problem played by several episodes — sample identical completions.
* After an update (:meth:`VLLMEngine.sync`): under LoRA only the adapters move — each is written
  as a peft directory (tmpfs by default; one private directory per engine) and loaded with a new
  ``LoRARequest`` (in place where vLLM supports ``load_inplace``, else under a fresh id: vLLM
  caches adapters by id and would keep serving the old weights under a reused one). Full
  weights go through ``collective_rpc`` into a worker extension that calls the model's
  ``load_weights`` (CUDA IPC handles when the learner's tensors are on the GPU, plain tensors
  otherwise). The prefix cache is reset after every change (vLLM keys it by adapter name).
* The first sync at which an adapter differs from the base model is checked (the initial one
  too, for a trained adapter loaded for evaluation): vLLM's log-probabilities of a probe sequence
  must be closer to the trained adapter's than to the base model's; a wrong module-name prefix
  would otherwise silently serve the base model (vllm#34186).

``vllm`` is imported lazily: this module imports without it, and constructing an engine raises
an ``ImportError`` that names the ``vllm`` extra.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_envs.agents.base import ActRequest, Agent, AgentOutput
from llm_trainers.agents.hf import Generation, SamplingParams, encode_observation
from llm_trainers.policies import PolicySet

__all__ = ["WORKER_EXTENSION", "VLLMAgent", "VLLMEngine", "vllm_available"]

#: Worker extension class (importable by vLLM's workers) that receives full-weight updates.
WORKER_EXTENSION = "llm_trainers.agents.vllm_worker.WeightUpdateExtension"

#: The values vLLM accepts for ``max_lora_rank`` (it rejects any other).
VLLM_MAX_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def vllm_available() -> tuple[bool, str]:
    """Whether ``import vllm`` works, and why not."""
    try:
        import vllm  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:  # missing, or a CUDA/driver error at import
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def _import_vllm() -> Any:
    try:
        import vllm
    except (ImportError, RuntimeError, OSError) as exc:
        raise ImportError(
            f"the vLLM engine needs vllm ({type(exc).__name__}: {exc}); "
            "install the extra: pip install 'llm-envs[vllm]' (Linux + CUDA GPU)"
        ) from exc
    return vllm


@dataclasses.dataclass
class _Served:
    """How one policy is served: which engine, and which adapter (if any)."""

    policy: str
    engine_key: str
    adapter: str | None = None
    lora_id: int | None = None
    lora_path: str | None = None
    version: int = 0
    checked: bool = False


class VLLMEngine:
    """Batched sampling with vLLM for the policies of a :class:`PolicySet`.

    Args:
        policies: The learner's policies (their weights/adapters are pushed by :meth:`sync`).
        sampling: Default sampling parameters.
        seed: Seed of the engine's generator (a per-call seed is drawn from it).
        settings: :class:`llm_trainers.config.VLLMConfig` (or any object with its fields).
        chat_template_kwargs: Extra chat-template variables.
        engine_kwargs: Extra ``vllm.LLM`` keyword arguments.
    """

    name = "vllm"

    def __init__(
        self,
        policies: PolicySet,
        sampling: SamplingParams | None = None,
        seed: int = 0,
        settings: Any = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        engine_kwargs: Mapping[str, Any] | None = None,
        _shared: dict[str, Any] | None = None,
    ) -> None:
        self.vllm = _import_vllm()
        from llm_trainers.config import VLLMConfig

        self.policies = policies
        self.sampling = sampling or SamplingParams()
        self.rng = np.random.default_rng(seed)
        self.settings = settings or VLLMConfig()
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.engine_kwargs = dict(engine_kwargs or {})
        self.generated_tokens = 0
        if _shared is not None:  # a view: same engines, own generator; the owner closes them
            self.engines, self.served, self._sleeping = _shared["engines"], _shared["served"], _shared["sleeping"]
            self._adapter_root, self._owner = _shared["adapter_root"], False
            return
        self.engines: dict[str, Any] = {}
        self.served: dict[str, _Served] = {}
        self._sleeping: dict[str, bool] = {}
        self._owner = True
        # One private directory per engine: two engines of one process (a trainer and an evaluation
        # agent, both with a policy "shared") must not overwrite or delete each other's adapters,
        # which vLLM may load lazily, at the next request that names them.
        Path(self.settings.adapter_dir).mkdir(parents=True, exist_ok=True)
        self._adapter_root = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=self.settings.adapter_dir))
        try:
            self._build(seed)
        except BaseException:
            shutil.rmtree(self._adapter_root, ignore_errors=True)
            raise

    # ------------------------------------------------------------------ construction
    def _llm_kwargs(self, model_path: str, tokenizer: str, seed: int, gpu_share: float, lora_rank: int | None,
                    max_loras: int) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": model_path,
            "tokenizer": tokenizer,
            "seed": seed,
            "gpu_memory_utilization": gpu_share,
            "max_model_len": s.max_model_len,
            "enable_prefix_caching": s.enable_prefix_caching,
            "enforce_eager": s.enforce_eager,
            "dtype": s.dtype,
            "enable_sleep_mode": s.sleep,
        }
        if lora_rank is not None:
            kwargs.update(enable_lora=True, max_loras=max(1, max_loras),
                          max_lora_rank=_vllm_max_lora_rank(max(s.max_lora_rank, lora_rank)))
        else:
            kwargs.update(worker_extension_cls=WORKER_EXTENSION)
        params = inspect.signature(self.vllm.EngineArgs).parameters if hasattr(self.vllm, "EngineArgs") else {}
        if "logprobs_mode" in params:
            kwargs["logprobs_mode"] = "processed_logprobs"
        kwargs.update(self.engine_kwargs)
        return kwargs

    def _build(self, seed: int) -> None:
        groups: dict[int, list[str]] = {}
        for name in self.policies.names():
            groups.setdefault(id(self.policies[name].model), []).append(name)
        share = self.settings.gpu_memory_utilization / max(1, len(groups))
        for i, names in enumerate(groups.values()):
            pol = self.policies[names[0]]
            key = f"engine{i}"
            adapters = [n for n in names if self.policies[n].adapter is not None]
            rank = None
            if adapters:
                cfg = pol.model.peft_config[pol.adapter]
                rank = int(cfg.r)
            tok_path = getattr(pol.tokenizer, "name_or_path", None) or pol.source
            if not adapters and os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION") is None:
                # full-weight sync sends CUDA IPC handles through collective_rpc
                os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
            self.engines[key] = self.vllm.LLM(**self._llm_kwargs(pol.source, tok_path, seed, share, rank, len(adapters)))
            self._sleeping[key] = False
            for n in names:
                self.served[n] = _Served(n, key, self.policies[n].adapter)
        # adapters start as the learner's initial adapters (LoRA B = 0: the base model)
        self.sync([n for n, s in self.served.items() if s.adapter is not None], _initial=True)

    # ------------------------------------------------------------------ prompts & sampling
    def encode(self, policy: str, observation: Mapping[str, str]) -> list[int]:
        return encode_observation(self.policies[policy].tokenizer, observation, self.chat_template_kwargs)

    def _vllm_sampling(self, params: SamplingParams, n: int, seed: int, **extra: Any) -> Any:
        sp_cls = self.vllm.SamplingParams
        off = 0 if getattr(sp_cls(), "top_k", -1) == 0 else -1
        greedy = params.temperature <= 0
        return sp_cls(
            n=n,
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0 if greedy else params.top_p,
            top_k=off if (greedy or params.top_k <= 0) else params.top_k,
            max_tokens=params.max_new_tokens,
            stop_token_ids=list(params.stop_token_ids) or None,
            logprobs=0,
            seed=seed,
            skip_special_tokens=True,
            **extra,
        )

    def _lora_request(self, served: _Served) -> Any:
        if served.adapter is None:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest(served.policy, served.lora_id, served.lora_path)

    def wake(self) -> None:
        """Wake sleeping engines (sleep mode) before sampling."""
        for key, llm in self.engines.items():
            if self._sleeping.get(key):
                llm.wake_up()
                self._sleeping[key] = False

    def offload(self) -> None:
        """Free the engines' GPU memory for the update (``sleep(level=1)``), if sleep mode is on."""
        if not self.settings.sleep:
            return
        for key, llm in self.engines.items():
            if not self._sleeping.get(key):
                llm.sleep(level=1)
                self._sleeping[key] = True

    def generate_multi(self, requests: Sequence[tuple[str, Sequence[int]]], n: int = 1,
                       sampling: SamplingParams | None = None) -> list[list[Generation]]:
        """``n`` samples per ``(policy, prompt_ids)``; one ``generate`` call per engine."""
        self.wake()
        params = sampling or self.sampling
        by_engine: dict[str, list[int]] = {}
        for i, (policy, _) in enumerate(requests):
            by_engine.setdefault(self.served[policy].engine_key, []).append(i)
        out: list[list[Generation]] = [[] for _ in requests]
        for key, idx in by_engine.items():
            llm = self.engines[key]
            prompts = [{"prompt_token_ids": list(requests[i][1])} for i in idx]
            loras = [self._lora_request(self.served[requests[i][0]]) for i in idx]
            # one seed per request (children of an n > 1 request get seed + 0..n-1): disjoint streams
            base = int(self.rng.integers(0, 2**31 - 1))
            sps = [self._vllm_sampling(params, n, base + j * n) for j in range(len(idx))]
            kwargs: dict[str, Any] = {"use_tqdm": False}
            if any(lr is not None for lr in loras):
                kwargs["lora_request"] = loras
            results = llm.generate(prompts, sps, **kwargs)
            for i, res in zip(idx, results):
                row = []
                for comp in res.outputs:
                    ids = list(comp.token_ids)
                    row.append(Generation(ids, _sampled_logprobs(comp.logprobs, ids), comp.text,
                                          "stop" if comp.finish_reason == "stop" else "length"))
                    self.generated_tokens += len(ids)
                out[i] = row
        return out

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int = 1,
                 sampling: SamplingParams | None = None) -> list[list[Generation]]:
        return self.generate_multi([(policy, p) for p in prompts], n=n, sampling=sampling)

    # ------------------------------------------------------------------ weight push
    def sync(self, policies: Sequence[str] | None = None, _initial: bool = False) -> dict[str, float]:
        """Push the named policies' current weights (adapters, or full weights) to the engines."""
        names = list(policies if policies is not None else self.policies.names())
        if not names:
            return {}
        self.wake()
        t0 = time.perf_counter()
        pushed = 0.0
        touched: set[str] = set()
        for name in names:
            served = self.served[name]
            pol = self.policies[name]
            if served.adapter is not None:
                pushed += self._push_adapter(served, pol)
            elif not _initial:
                pushed += self._push_full(served, pol)
            touched.add(served.engine_key)
        for key in touched:
            self.engines[key].reset_prefix_cache()
        for name in names:  # a no-op while an adapter still equals the base model
            served = self.served[name]
            if served.adapter is not None and not served.checked:
                self._check_adapter(served)
        return {"weight_push_bytes": pushed, "weight_push_s": time.perf_counter() - t0}

    def _push_adapter(self, served: _Served, pol: Any) -> float:
        served.version += 1
        root = self._adapter_root / served.policy
        target = root / f"v{served.version}"
        if target.exists():
            shutil.rmtree(target)
        path = pol.save_pretrained(target)
        from vllm.lora.request import LoRARequest

        fields = _fields_of(LoRARequest)
        llm = self.engines[served.engine_key]
        if "load_inplace" in fields and served.lora_id is not None:
            served.lora_path = str(path)
            llm.llm_engine.add_lora(LoRARequest(served.policy, served.lora_id, str(path), load_inplace=True))
        else:
            old = served.lora_id
            served.lora_id = _next_lora_id(self.served)
            served.lora_path = str(path)
            if old is not None and hasattr(llm.llm_engine, "remove_lora"):
                llm.llm_engine.remove_lora(old)
        previous = root / f"v{served.version - 1}"
        if previous.exists():
            shutil.rmtree(previous, ignore_errors=True)
        return float(sum(f.stat().st_size for f in Path(path).glob("*") if f.is_file()))

    def _push_full(self, served: _Served, pol: Any) -> float:
        llm = self.engines[served.engine_key]
        named = [(n, p.detach()) for n, p in pol.model.named_parameters()]
        total = float(sum(p.numel() * p.element_size() for _, p in named))
        if named and named[0][1].is_cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            handles = [(n, reduce_tensor(p.contiguous())) for n, p in named]
            llm.collective_rpc("update_weights_ipc", args=(handles,))
            torch.cuda.synchronize()
        else:
            llm.collective_rpc("update_weights", args=([(n, p.cpu()) for n, p in named],))
        return total

    def _check_adapter(self, served: _Served) -> None:
        """Raise if vLLM serves the base model where the trained adapter should act."""
        pol = self.policies[served.policy]
        tok = pol.tokenizer
        probe = encode_observation(tok, {"instruction": "Check.", "prompt": "adapter probe 1 2 3"})
        probe = probe + probe[-4:]
        from llm_trainers.batching import completion_logprobs, pack_sequences

        batch = pack_sequences([probe[:1]], [probe[1:]], tok.pad_token_id).to(pol.device)
        with torch.no_grad():
            with pol.activated() as m:
                hf_adapter, _ = completion_logprobs(m, batch)
            with pol.reference() as m:
                hf_base, _ = completion_logprobs(m, batch)
        hf_adapter, hf_base = hf_adapter[0].float().cpu(), hf_base[0].float().cpu()
        gap = float((hf_adapter - hf_base).abs().mean())
        if gap < 1e-3:
            return  # the adapter still equals the base model; check at a later sync
        sp = self.vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        res = self.engines[served.engine_key].generate(
            [{"prompt_token_ids": probe}], sp, lora_request=[self._lora_request(served)], use_tqdm=False
        )[0]
        served_lp = torch.tensor(_prompt_logprobs(res.prompt_logprobs, probe)[1:], dtype=torch.float32)
        d_adapter = float((served_lp - hf_adapter).abs().mean())
        d_base = float((served_lp - hf_base).abs().mean())
        if d_adapter >= d_base:
            raise RuntimeError(
                f"vLLM does not apply adapter {served.policy!r}: its log-probabilities are closer to the base "
                f"model (mean |Δ| {d_base:.4f}) than to the trained adapter ({d_adapter:.4f}). A module-name "
                "mismatch between the peft adapter and the vLLM model makes vLLM silently ignore the adapter; "
                "check model.lora.target_modules (vLLM does not serve LoRA on every module, e.g. lm_head)."
            )
        served.checked = True

    # ------------------------------------------------------------------ lifecycle
    def view(self, seed: int, sampling: SamplingParams | None = None) -> VLLMEngine:
        """Same engines, own generator and sampling parameters (for evaluation)."""
        return VLLMEngine(self.policies, sampling or self.sampling, seed=seed, settings=self.settings,
                          chat_template_kwargs=self.chat_template_kwargs,
                          _shared={"engines": self.engines, "served": self.served, "sleeping": self._sleeping,
                                   "adapter_root": self._adapter_root})

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "engines" in state:  # a data-parallel layout's checkpoint: continue its first engine's stream
            state = state["engines"][0]
        self.rng.bit_generator.state = state["rng"]

    def close(self) -> None:
        """Drop the engines and their adapter files (a view leaves them to the engine it came from)."""
        if not self._owner:
            return
        shutil.rmtree(self._adapter_root, ignore_errors=True)
        self.engines.clear()


def _fields_of(cls: Any) -> set[str]:
    fields = getattr(cls, "__struct_fields__", None)
    if fields is not None:
        return set(fields)
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(inspect.signature(cls).parameters)


def _vllm_max_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that serves adapters of rank ``rank``."""
    for allowed in VLLM_MAX_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds the largest rank vLLM serves ({VLLM_MAX_LORA_RANKS[-1]})")


def _next_lora_id(served: Mapping[str, _Served]) -> int:
    return 1 + max((s.lora_id or 0 for s in served.values()), default=0)


def _sampled_logprobs(logprobs: Any, token_ids: Sequence[int]) -> list[float]:
    """The sampled token's log-probability at each position of a vLLM completion.

    ``logprobs`` is a sequence with one mapping per position, ``{token_id: Logprob}`` (with
    ``logprobs=0`` it holds the sampled token), as documented for ``CompletionOutput``.
    """
    if logprobs is None:
        return [0.0] * len(token_ids)
    out = []
    for pos, tid in enumerate(token_ids):
        entry = logprobs[pos][tid]
        out.append(float(getattr(entry, "logprob", entry)))
    return out


def _prompt_logprobs(prompt_logprobs: Any, token_ids: Sequence[int]) -> list[float]:
    """Log-probabilities of the prompt tokens (the first position has none: 0)."""
    out = []
    for pos, tid in enumerate(token_ids):
        entry = prompt_logprobs[pos] if prompt_logprobs is not None else None
        if entry is None:
            out.append(0.0)
        else:
            value = entry[tid]
            out.append(float(getattr(value, "logprob", value)))
    return out


class VLLMAgent(Agent):
    """One policy of a :class:`VLLMEngine` behind the :class:`~llm_envs.agents.Agent` protocol."""

    def __init__(self, engine: VLLMEngine, policy: str, name: str | None = None) -> None:
        self.engine = engine
        self.policy = policy
        self.name = name or f"vllm:{policy}"

    @classmethod
    def from_pretrained(cls, path: str, *, sampling: SamplingParams | None = None, seed: int = 0,
                        settings: Any = None, adapter_path: str | None = None,
                        chat_template_kwargs: Mapping[str, Any] | None = None) -> VLLMAgent:
        """A stand-alone agent for evaluation: any model by path or hub id (optionally a peft adapter).

        The learner's HF copy is loaded on the CPU only to provide the tokenizer and the adapter.
        """
        from llm_trainers.agents.hf import resolve_adapter_path
        from llm_trainers.policies import build_policies

        path, adapter_path = resolve_adapter_path(path, adapter_path)
        policies = build_policies("L1", ["*"], path, policy_map={"*": "shared"}, device="cpu")
        if adapter_path:
            from peft import PeftModel

            pol = policies["shared"]
            pol.model = PeftModel.from_pretrained(pol.model, adapter_path, adapter_name="shared")
            pol.adapter = "shared"
        engine = VLLMEngine(policies, sampling, seed=seed, settings=settings, chat_template_kwargs=chat_template_kwargs)
        agent = cls(engine, "shared", name=f"vllm:{path}")
        agent.seed = int(seed)
        return agent

    def settings(self) -> dict[str, Any]:
        """The default settings plus every effective sampling setting, defaults included."""
        from llm_trainers.sampling import sampling_record

        data = super().settings()
        data["sampling"] = sampling_record(self.engine.sampling, getattr(self, "seed", 0))
        return data

    def sample(self, requests: Sequence[ActRequest], n: int = 1) -> list[list[AgentOutput]]:
        prompts = [self.engine.encode(self.policy, r.observation) for r in requests]
        try:
            rows = self.engine.generate(self.policy, prompts, n=n)
        except (RuntimeError, ValueError) as exc:
            # An infrastructure failure, never an action: reported through AgentOutput.error,
            # which the runner never plays (the episode is recorded incomplete; see HFAgent).
            return [[AgentOutput(text="", prompt_token_ids=p, error=f"{type(exc).__name__}: {exc}")] * n for p in prompts]
        return [
            [AgentOutput(text=g.text, prompt_token_ids=p, token_ids=g.token_ids, logprobs=g.logprobs,
                         prompt_tokens=len(p), completion_tokens=len(g.token_ids),
                         meta={"finish_reason": g.finish_reason, "policy": self.policy}) for g in row]
            for p, row in zip(prompts, rows)
        ]

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        return [row[0] for row in self.sample(requests, n=1)]

    def close(self) -> None:
        self.engine.close()
