"""A CPU fake of the parts of vLLM's offline API that :class:`llm_trainers.agents.vllm.VLLMEngine` uses.

It follows vLLM's documented shapes and behaviour, not whatever the engine happens to call, and it
computes for real: the model is loaded with transformers from the path given to ``LLM``, tokens
are sampled with torch, and the log-probabilities returned are the model's. What is modelled:

* ``LLM(model, **kwargs)``: every keyword goes into ``EngineArgs`` (an unknown one is a
  ``TypeError``, as in vLLM); ``max_model_len`` above the model's ``max_position_embeddings``,
  a ``max_lora_rank`` outside vLLM's allowed set or an unknown ``logprobs_mode`` is a
  ``ValueError``. ``dtype="auto"`` keeps the checkpoint's dtype (float32 for the tiny models).
* ``LLM.generate(prompts, sampling_params, *, use_tqdm, lora_request)``: prompts as
  ``{"prompt_token_ids": [...]}`` (``TokensPrompt``) or strings; one ``SamplingParams`` or a list
  (one per prompt); one ``LoRARequest``, ``None`` or a list (one per prompt). Each request has its
  own generator seeded with ``SamplingParams.seed`` (``seed + i`` for child ``i`` of an ``n > 1``
  request, as vLLM's ``ParentRequest``), else the engine's seeded generator. Returns
  ``RequestOutput``\\ s whose ``outputs[i]`` are ``CompletionOutput(token_ids, logprobs, text,
  finish_reason, stop_reason, cumulative_logprob)``; ``logprobs`` is one ``{token_id: Logprob}``
  per position with the sampled token plus the top ``SamplingParams.logprobs``;
  ``prompt_logprobs`` is ``[None, {...}, ...]``. Sampling: temperature (< 1e-5 is greedy), top-k,
  top-p; the engine's ``logprobs_mode`` picks raw (before any processing) or processed (after
  temperature and top-k/top-p) values. Stops at the tokenizer's and generation config's EOS and
  at ``stop_token_ids`` (the stop token is part of ``token_ids``), at ``max_tokens`` and at
  ``max_model_len``.
* LoRA (``enable_lora=True``): an adapter directory is read with peft's loaders
  (``adapter_config.json`` + weights) and applied as ``y += scaling · B(A(x))`` on each served
  module, as vLLM's LoRA layers do. Adapters are cached **by ``lora_int_id``** (an LRU of
  ``max_cpu_loras`` or ``max_loras`` entries): a request naming a cached id is served the cached
  weights whatever its ``lora_path`` says, unless ``LLMEngine.add_lora`` reloads it with
  ``load_inplace=True`` (where ``LoRARequest`` has that field). ``LLMEngine.remove_lora`` evicts.
  Adapter module names are matched against the served model's module paths; a module the model
  does not have under that exact path is silently ignored (vllm#34186), while an unknown module
  *type* is an error. ``FakeVLLM(module_prefix="language_model.")`` serves the model under a
  wrapper prefix, as vLLM's multimodal wrappers do, which reproduces that silent no-op.
* Prefix caching (``enable_prefix_caching=True``): the KV cache of a prompt (all but its last
  token) is kept, keyed by the LoRA **name** and the tokens, as vLLM's block hashes are, and reused
  by later requests with the same key — until ``reset_prefix_cache()`` (or ``sleep``). Requests
  with ``prompt_logprobs`` neither read nor write it.
* ``collective_rpc(method, timeout=None, args=(), kwargs=None)`` calls ``method`` on the worker,
  whose class mixes in ``worker_extension_cls`` (a qualified name) as vLLM does; the worker's
  ``reload_weights(weights_iterator=None, weights_path=None)`` reads a folder's safetensors files
  (as vLLM's does) and, like ``model_runner.model.load_weights(weights)``, takes Hugging Face-named ``(name, tensor)`` pairs,
  copies them into the served weights and raises ``KeyError`` on an unknown name.
* ``sleep(level)`` / ``wake_up(tags)`` (``enable_sleep_mode=True`` required): a sleeping engine
  refuses requests, weight updates and adapter loads; level 1 keeps the weights, level 2 discards
  them (generation raises until new weights are loaded).

Every call is recorded in ``LLM.events`` for assertions. Install with :func:`install`.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import itertools
import sys
import types
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["FakeVLLM", "install"]

SAMPLING_EPS = 1e-5
MAX_TEMP = 1e-2
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
LOGPROBS_MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")


# ---------------------------------------------------------------------------- output structures
@dataclass
class Logprob:
    """``vllm.logprobs.Logprob``."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    """``vllm.outputs.CompletionOutput``."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    lora_request: Any = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """``vllm.outputs.RequestOutput``."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: list[dict[int, Logprob] | None] | None
    outputs: list[CompletionOutput]
    finished: bool
    lora_request: Any = None
    num_cached_tokens: int = 0


# ---------------------------------------------------------------------------- requests
@dataclass
class SamplingParams:
    """``vllm.SamplingParams`` (the fields the engine may use; others are refused)."""

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if 0 < self.temperature < MAX_TEMP:
            self.temperature = max(self.temperature, MAX_TEMP)  # vLLM warns and clamps
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if self.top_k == -1:
            self.top_k = 0
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be greater than or equal to 0, got {self.min_tokens}.")
        if self.logprobs is not None and self.logprobs < -1:
            raise ValueError(f"logprobs must be non-negative or -1, got {self.logprobs}.")
        if self.prompt_logprobs is not None and self.prompt_logprobs < -1:
            raise ValueError(f"prompt_logprobs must be non-negative or -1, got {self.prompt_logprobs}.")
        if self.seed == -1:
            self.seed = None
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop_token_ids is None:
            self.stop_token_ids = []
        if self.temperature < SAMPLING_EPS:  # greedy: the truncation knobs are reset
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS


def _lora_request_class(load_inplace: bool) -> type:
    """``vllm.lora.request.LoRARequest``, with the ``load_inplace`` field (newer vLLM) or without."""
    fields: list[Any] = [("lora_name", str), ("lora_int_id", int), ("lora_path", str, field(default="")),
                         ("base_model_name", "str | None", field(default=None))]
    if load_inplace:
        fields.append(("load_inplace", bool, field(default=False)))

    def __post_init__(self: Any) -> None:
        if self.lora_int_id < 1:
            raise ValueError(f"id must be > 0, got {self.lora_int_id}")
        if not self.lora_path:
            raise ValueError("lora_path cannot be empty")

    # vLLM compares and hashes LoRA requests by name
    namespace = {
        "__post_init__": __post_init__,
        "__eq__": lambda self, other: isinstance(other, type(self)) and self.lora_name == other.lora_name,
        "__hash__": lambda self: hash(self.lora_name),
        "adapter_id": property(lambda self: self.lora_int_id),
        "name": property(lambda self: self.lora_name),
        "path": property(lambda self: self.lora_path),
    }
    return dataclasses.make_dataclass("LoRARequest", fields, namespace=namespace, eq=False)


_ENGINE_ARG_FIELDS: list[tuple[str, Any, Any]] = [
    ("model", str, dataclasses.MISSING),
    ("tokenizer", "str | None", None),
    ("seed", "int | None", 0),
    ("dtype", str, "auto"),
    ("gpu_memory_utilization", float, 0.9),
    ("max_model_len", "int | None", None),
    ("enable_prefix_caching", "bool | None", None),
    ("enforce_eager", bool, False),
    ("enable_sleep_mode", bool, False),
    ("enable_lora", bool, False),
    ("max_loras", int, 1),
    ("max_lora_rank", int, 16),
    ("max_cpu_loras", "int | None", None),
    ("worker_extension_cls", str, ""),
    ("max_logprobs", int, 20),
    ("tensor_parallel_size", int, 1),
    ("trust_remote_code", bool, False),
    ("disable_log_stats", bool, True),
    ("served_model_name", "str | list[str] | None", None),
]


def _engine_args_class(logprobs_mode: bool) -> type:
    """``vllm.EngineArgs``, with ``logprobs_mode`` (vLLM >= 0.10.2) or without."""
    fields = [(n, t, field(default=d)) if d is not dataclasses.MISSING else (n, t) for n, t, d in _ENGINE_ARG_FIELDS]
    if logprobs_mode:
        fields.append(("logprobs_mode", str, field(default="raw_logprobs")))
    return dataclasses.make_dataclass("EngineArgs", fields)


# ---------------------------------------------------------------------------- the worker
class _ServedModel:
    """``worker.model_runner.model``: the served weights, loaded from Hugging Face-named tensors."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        # Parameter objects captured before any LoRA hook: the served base weights.
        self._params = dict(llm._model.named_parameters(remove_duplicate=False))
        self._tied = bool(getattr(llm._model.config, "tie_word_embeddings", False))

    def parameters(self) -> Any:
        return iter(self._params.values())

    def named_parameters(self) -> Any:
        return iter(self._params.items())

    @torch.no_grad()
    def load_weights(self, weights: Any) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            if name == "lm_head.weight" and self._tied:
                continue  # vLLM skips the tied head
            param = self._params[name]  # KeyError on an unknown name, as vLLM's loaders
            if tuple(param.shape) != tuple(tensor.shape):
                raise AssertionError(f"{name}: shape {tuple(tensor.shape)} != served {tuple(param.shape)}")
            param.copy_(tensor.to(param.device, param.dtype))
            loaded.add(name)
        self._llm._weights_valid = True
        self._llm.events.append(("load_weights", sorted(loaded)))
        return loaded


class _WorkerBase:
    def __init__(self, llm: LLM) -> None:
        self.model_runner = types.SimpleNamespace(model=_ServedModel(llm))
        self.device = torch.device("cpu")
        self.rank = 0

    def reload_weights(self, weights_iterator: Any = None, weights_path: str | None = None,
                       is_checkpoint_format: bool = True) -> None:
        """``Worker.reload_weights``: every weight again, from ``(name, tensor)`` pairs or from the
        ``*.safetensors`` files of the folder ``weights_path``."""
        if weights_path is not None:
            from safetensors.torch import load_file

            weights_iterator = [item for f in sorted(Path(weights_path).glob("*.safetensors"))
                                for item in load_file(str(f)).items()]
        self.model_runner.model.load_weights(list(weights_iterator))


def _resolve_qualname(qualname: str) -> type:
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _worker_class(extension: str) -> type:
    if not extension:
        return _WorkerBase
    ext = _resolve_qualname(extension)
    for attr in vars(ext):
        if not attr.startswith("__") and hasattr(_WorkerBase, attr):
            raise ValueError(f"Worker class already has an attribute {attr}, which conflicts with the worker "
                             f"extension class {ext}.")
    return type("Worker", (_WorkerBase, ext), {})


# ---------------------------------------------------------------------------- LoRA
@dataclass
class _LoadedLoRA:
    lora_int_id: int
    name: str
    path: str
    scaling: float
    weights: dict[str, tuple[torch.Tensor, torch.Tensor]]  # served module path -> (A [r, in], B [out, r])


class _EngineHandle:
    """``LLM.llm_engine``: the adapter registry (``add_lora``, ``remove_lora``, ``list_loras``)."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm

    def add_lora(self, lora_request: Any) -> bool:
        self._llm._require_awake("add_lora")
        self._llm.events.append(("add_lora", lora_request.lora_name, lora_request.lora_int_id,
                                 lora_request.lora_path, bool(getattr(lora_request, "load_inplace", False))))
        self._llm._activate_lora(lora_request)
        return True

    def remove_lora(self, lora_id: int) -> bool:
        self._llm.events.append(("remove_lora", lora_id))
        return self._llm._lora_cache.pop(lora_id, None) is not None

    def list_loras(self) -> set[int]:
        return set(self._llm._lora_cache)

    def pin_lora(self, lora_id: int) -> bool:
        return lora_id in self._llm._lora_cache

    def reset_prefix_cache(self, device: Any = None) -> bool:
        return self._llm.reset_prefix_cache(device)


# ---------------------------------------------------------------------------- LLM
class LLM:
    """``vllm.LLM`` (offline engine), computing on the CPU with transformers."""

    _fake: FakeVLLM  # set on the class that install() makes

    def __init__(self, model: str, **kwargs: Any) -> None:
        fake = self._fake
        args = fake.EngineArgs(model=model, **kwargs)  # TypeError on an unknown argument
        self.args = args
        self.events: list[tuple[Any, ...]] = []
        if not 0.0 < args.gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {args.gpu_memory_utilization}")
        self.logprobs_mode = getattr(args, "logprobs_mode", None) or fake.default_logprobs_mode
        if self.logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"Invalid logprobs_mode {self.logprobs_mode!r}; choose one of {LOGPROBS_MODES}")
        if args.enable_lora:
            if args.max_lora_rank not in MAX_LORA_RANKS:
                raise ValueError(f"max_lora_rank ({args.max_lora_rank}) must be one of {MAX_LORA_RANKS}.")
            if args.max_loras < 1:
                raise ValueError(f"max_loras ({args.max_loras}) must be >= 1.")
            if args.max_cpu_loras is not None and args.max_cpu_loras < args.max_loras:
                raise ValueError("max_cpu_loras must be >= max_loras")

        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        config = AutoConfig.from_pretrained(model, trust_remote_code=args.trust_remote_code)
        derived = getattr(config, "max_position_embeddings", None)
        if args.max_model_len is not None and derived is not None and args.max_model_len > derived:
            raise ValueError(f"User-specified max_model_len ({args.max_model_len}) is greater than the derived "
                             f"max_model_len (max_position_embeddings={derived} in model's config.json).")
        self.max_model_len = args.max_model_len or derived or 2048
        dtype = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16, "half": torch.float16, "float": torch.float32}[args.dtype]
        load_kwargs: dict[str, Any] = {}
        if dtype is not None:
            kw = "dtype" if "dtype" in inspect.signature(AutoModelForCausalLM.from_pretrained).parameters else "torch_dtype"
            load_kwargs[kw] = dtype
        self._model = AutoModelForCausalLM.from_pretrained(model, **load_kwargs).eval()
        for p in self._model.parameters():
            p.requires_grad_(False)
        self._tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or model)
        self._vocab_size = int(self._model.get_output_embeddings().weight.shape[0])
        eos: list[int] = []
        for x in (self._tokenizer.eos_token_id, getattr(self._model.generation_config, "eos_token_id", None)):
            if x is not None:
                eos.extend(x if isinstance(x, (list, tuple)) else [x])
        self._eos_ids = set(int(i) for i in eos)
        self._generator = torch.Generator().manual_seed(int(args.seed or 0))
        self._counter = itertools.count()
        self._prefix_cache: dict[tuple[Any, ...], Any] = {}
        self._sleeping = False
        self._weights_valid = True
        # LoRA: served module paths (under the fake's mount prefix) and one hook per linear module
        self._lora_cache: OrderedDict[int, _LoadedLoRA] = OrderedDict()
        self._active_lora: _LoadedLoRA | None = None
        self._module_path: dict[int, str] = {}
        if args.enable_lora:
            for name, module in self._model.named_modules():
                if isinstance(module, nn.Linear):
                    self._module_path[id(module)] = fake.module_prefix + name
                    module.register_forward_hook(self._lora_hook)
        self._worker = _worker_class(args.worker_extension_cls)(self)
        self.llm_engine = _EngineHandle(self)
        fake.llms.append(self)

    # ------------------------------------------------------------------ public API
    def get_tokenizer(self, lora_request: Any = None) -> Any:
        return self._tokenizer

    def generate(self, prompts: Any, sampling_params: Any = None, *, use_tqdm: bool = True,
                 lora_request: Any = None, priority: Any = None) -> list[RequestOutput]:
        self._require_awake("generate")
        if not self._weights_valid:
            raise RuntimeError("the weights were discarded by sleep(level=2) and not reloaded")
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        prompts = list(prompts)
        num = len(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, list) and len(sampling_params) != num:
            raise ValueError("The lengths of prompts and params must be the same.")
        if isinstance(lora_request, list) and len(lora_request) != num:
            raise ValueError("The lengths of prompts and lora_request must be the same.")
        params = [sampling_params[i] if isinstance(sampling_params, Sequence) else sampling_params for i in range(num)]
        loras = [lora_request[i] if isinstance(lora_request, Sequence) else lora_request for i in range(num)]
        token_lists = []
        for prompt, sp, lr in zip(prompts, params, loras):
            if not isinstance(sp, SamplingParams):
                raise TypeError(f"expected vllm.SamplingParams, got {type(sp).__name__}")
            if lr is not None and not self.args.enable_lora:
                raise ValueError(f"Got lora_request {lr} but LoRA is not enabled!")
            if sp.logprobs is not None and sp.logprobs > self.args.max_logprobs:
                raise ValueError(f"Requested sample logprobs of {sp.logprobs}, which is greater than max allowed: "
                                 f"{self.args.max_logprobs}")
            ids = self._prompt_ids(prompt)
            if not ids:
                raise ValueError("The decoder prompt cannot be empty")
            if max(ids) >= self._vocab_size or min(ids) < 0:
                raise ValueError(f"Token id {max(ids)} is out of vocabulary")
            if len(ids) > self.max_model_len:
                raise ValueError(f"The decoder prompt (length {len(ids)}) is longer than the maximum model "
                                 f"length of {self.max_model_len}.")
            token_lists.append(ids)
        self.events.append(("generate", {
            "lora_names": [None if lr is None else lr.lora_name for lr in loras],
            "lora_ids": [None if lr is None else lr.lora_int_id for lr in loras],
            "seeds": [sp.seed for sp in params],
            "n": [sp.n for sp in params],
            "prompt_logprobs": [sp.prompt_logprobs for sp in params],
            "prompts": [list(t) for t in token_lists],
        }))
        return [self._run(ids, sp, lr) for ids, sp, lr in zip(token_lists, params, loras)]

    def reset_prefix_cache(self, device: Any = None) -> bool:
        self.events.append(("reset_prefix_cache",))
        self._prefix_cache.clear()
        return True

    def collective_rpc(self, method: Any, timeout: float | None = None, args: tuple[Any, ...] = (),
                       kwargs: dict[str, Any] | None = None) -> list[Any]:
        self._require_awake("collective_rpc")
        name = method if isinstance(method, str) else getattr(method, "__name__", repr(method))
        self.events.append(("collective_rpc", name))
        fn = getattr(self._worker, method) if isinstance(method, str) else (lambda *a, **k: method(self._worker, *a, **k))
        return [fn(*args, **(kwargs or {}))]

    def sleep(self, level: int = 1) -> None:
        if not self.args.enable_sleep_mode:
            raise ValueError("Sleep mode is not enabled in the model config")
        if level not in (1, 2):
            raise ValueError(f"unsupported sleep level {level}")
        self.reset_prefix_cache()  # LLM.sleep resets the prefix cache; the KV cache is discarded
        self.events.append(("sleep", level))
        self._sleeping = True
        if level == 2:
            self._weights_valid = False

    def wake_up(self, tags: list[str] | None = None) -> None:
        if tags is not None and not set(tags) <= {"weights", "kv_cache"}:
            raise ValueError(f"unknown wake_up tags {tags}")
        self.events.append(("wake_up", tags))
        self._sleeping = False

    # ------------------------------------------------------------------ helpers for tests
    def calls(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]

    @property
    def lora_cache(self) -> dict[int, _LoadedLoRA]:
        return dict(self._lora_cache)

    # ------------------------------------------------------------------ internals
    def _require_awake(self, what: str) -> None:
        if self._sleeping:
            raise RuntimeError(f"{what} while the engine sleeps: call wake_up() first")

    def _prompt_ids(self, prompt: Any) -> list[int]:
        if isinstance(prompt, str):
            return list(self._tokenizer(prompt)["input_ids"])
        if isinstance(prompt, dict) and "prompt_token_ids" in prompt:
            return [int(t) for t in prompt["prompt_token_ids"]]
        if isinstance(prompt, dict) and "prompt" in prompt:
            return list(self._tokenizer(prompt["prompt"])["input_ids"])
        raise TypeError(f"unsupported prompt {type(prompt).__name__}: use a string or a TokensPrompt")

    # LoRA
    def _activate_lora(self, req: Any) -> _LoadedLoRA:
        """LRUCacheWorkerLoRAManager.add_adapter: load unless cached by id (or forced in place)."""
        cached = self._lora_cache.get(req.lora_int_id)
        if cached is None or getattr(req, "load_inplace", False):
            lora = self._load_lora(req)  # validate first, then evict
            self._lora_cache.pop(req.lora_int_id, None)
            capacity = self.args.max_cpu_loras or self.args.max_loras
            while len(self._lora_cache) + 1 > capacity:
                self._lora_cache.popitem(last=False)
            self._lora_cache[req.lora_int_id] = lora
            self.events.append(("load_lora", req.lora_name, req.lora_int_id, req.lora_path))
            return lora
        self._lora_cache.move_to_end(req.lora_int_id)
        return cached

    def _load_lora(self, req: Any) -> _LoadedLoRA:
        from peft import LoraConfig
        from peft.utils import load_peft_weights

        path = Path(req.lora_path)
        if not (path / "adapter_config.json").is_file():
            raise ValueError(f"Loading lora {req.lora_name} failed: No adapter found for {req.lora_path}")
        if not any((path / f).is_file() for f in ("adapter_model.safetensors", "adapter_model.bin")):
            raise ValueError(f"{req.lora_path} doesn't contain tensors")
        config = LoraConfig.from_pretrained(str(path))
        if config.r > self.args.max_lora_rank:
            raise ValueError(f"LoRA rank {config.r} is greater than max_lora_rank {self.args.max_lora_rank}.")
        if getattr(config, "use_dora", False):
            raise ValueError("vLLM does not yet support DoRA.")
        if config.bias != "none":
            raise ValueError("Adapter bias cannot be used without bias_enabled.")
        if config.modules_to_save:
            raise ValueError("vLLM only supports modules_to_save being None.")
        tensors = load_peft_weights(str(path), device="cpu")
        modules: dict[str, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            name = key[len("base_model.model."):] if key.startswith("base_model.model.") else key
            module, _, part = name.rpartition(".lora_")
            if part not in ("A.weight", "B.weight"):
                raise ValueError(f"{key} is unsupported LoRA weight")
            modules.setdefault(module, {})[part[0]] = value
        supported = {p.rpartition(".")[2] for p in self._module_path.values()}
        unexpected = sorted({m.rpartition(".")[2] for m in modules} - supported)
        if unexpected:
            raise ValueError(f"While loading {req.lora_path}, expected target modules in {sorted(supported)} but "
                             f"received {unexpected}. Please verify that the loaded LoRA module is correct")
        served = set(self._module_path.values())
        weights = {}
        for module, ab in modules.items():
            if module not in served:
                continue  # silently not applied: vllm#34186
            weights[module] = (ab["A"], ab["B"])
        scaling = config.lora_alpha / (config.r ** 0.5 if config.use_rslora else config.r)
        return _LoadedLoRA(req.lora_int_id, req.lora_name, req.lora_path, float(scaling), weights)

    def _lora_hook(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> Any:
        lora = self._active_lora
        if lora is None:
            return None
        ab = lora.weights.get(self._module_path[id(module)])
        if ab is None:
            return None
        a, b = ab
        x = inputs[0]
        return output + lora.scaling * ((x @ a.to(x.dtype).T) @ b.to(x.dtype).T)

    # generation
    @torch.no_grad()
    def _run(self, ids: list[int], sp: SamplingParams, lr: Any) -> RequestOutput:
        self._active_lora = self._activate_lora(lr) if lr is not None else None
        try:
            prompt_lps = self._prompt_logprobs(ids, sp.prompt_logprobs) if sp.prompt_logprobs is not None else None
            key = (None if lr is None else lr.lora_name, tuple(ids[:-1]))
            use_cache = bool(self.args.enable_prefix_caching) and sp.prompt_logprobs is None
            cached = 0
            if use_cache and key in self._prefix_cache:
                prefix_kv, cached = self._prefix_cache[key], len(ids) - 1
            else:
                prefix_kv = self._forward(ids[:-1], None)[1] if len(ids) > 1 else None
                if use_cache and prefix_kv is not None:
                    self._prefix_cache[key] = copy.deepcopy(prefix_kv)
            outputs = []
            for i in range(sp.n):
                seed = None if sp.seed is None else sp.seed + i
                gen = torch.Generator().manual_seed(seed) if seed is not None else self._generator
                kv = copy.deepcopy(prefix_kv)
                outputs.append(self._sample_one(i, ids, kv, sp, gen, lr))
        finally:
            self._active_lora = None
        return RequestOutput(str(next(self._counter)), None, list(ids), prompt_lps, outputs, True, lr, cached)

    def _forward(self, ids: Sequence[int], kv: Any) -> tuple[torch.Tensor, Any]:
        out = self._model(input_ids=torch.tensor([list(ids)]), past_key_values=kv, use_cache=True)
        return out.logits[0], out.past_key_values

    def _sample_one(self, index: int, prompt: list[int], kv: Any, sp: SamplingParams, gen: torch.Generator,
                    lr: Any) -> CompletionOutput:
        logits, kv = self._forward(prompt[-1:], kv)
        last = logits[-1]
        stop_ids = set(sp.stop_token_ids or [])
        limit = sp.max_tokens if sp.max_tokens is not None else self.max_model_len - len(prompt)
        tokens: list[int] = []
        entries: list[dict[int, Logprob]] = []
        cumulative = 0.0
        finish, stop_reason = "length", None
        while True:
            token, row = self._sample_token(last.float(), sp, gen)
            tokens.append(token)
            cumulative += float(row[token])
            if sp.logprobs is not None:
                entries.append(self._logprob_entry(row, token, sp.logprobs))
            if len(tokens) >= sp.min_tokens:
                if token in self._eos_ids and not sp.ignore_eos:
                    finish = "stop"
                    break
                if token in stop_ids:
                    finish, stop_reason = "stop", token
                    break
            if len(tokens) >= limit or len(prompt) + len(tokens) >= self.max_model_len:
                break
            logits, kv = self._forward([token], kv)
            last = logits[-1]
        text = self._tokenizer.decode(tokens, skip_special_tokens=sp.skip_special_tokens) if sp.detokenize else ""
        return CompletionOutput(index, text, tokens, cumulative if sp.logprobs is not None else None,
                                entries if sp.logprobs is not None else None, finish, stop_reason, lr)

    def _sample_token(self, logits: torch.Tensor, sp: SamplingParams, gen: torch.Generator) -> tuple[int, torch.Tensor]:
        """Sample one token; return it and the row of values reported for this position."""
        raw = torch.log_softmax(logits, dim=-1)
        if sp.greedy:
            token = int(torch.argmax(logits))
            processed_logits = logits
        else:
            z = logits / sp.temperature
            z = _apply_top_k_top_p(z, sp.top_k, sp.top_p)
            probs = torch.softmax(z, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=gen))
            processed_logits = z
        mode = self.logprobs_mode
        if mode == "raw_logprobs":
            row = raw
        elif mode == "raw_logits":
            row = logits
        elif mode == "processed_logits":
            row = processed_logits
        else:
            row = torch.log_softmax(processed_logits, dim=-1)
        return token, row

    def _logprob_entry(self, row: torch.Tensor, token: int, top: int) -> dict[int, Logprob]:
        def lp(t: int) -> Logprob:
            rank = 1 + int((row > row[t]).sum())
            return Logprob(float(row[t]), rank, self._tokenizer.decode([t]))

        entry = {token: lp(token)}
        k = row.numel() if top == -1 else top
        if k > 0:
            for t in torch.topk(row, min(k, row.numel())).indices.tolist():
                entry.setdefault(int(t), lp(int(t)))
        return entry

    def _prompt_logprobs(self, ids: list[int], top: int) -> list[dict[int, Logprob] | None]:
        logits, _ = self._forward(ids, None)
        rows = torch.log_softmax(logits.float(), dim=-1)
        out: list[dict[int, Logprob] | None] = [None]
        for pos in range(1, len(ids)):
            out.append(self._logprob_entry(rows[pos - 1], ids[pos], top))
        return out


def _apply_top_k_top_p(logits: torch.Tensor, k: int, p: float) -> torch.Tensor:
    """vLLM's PyTorch top-k / top-p masking (the kept tokens' logits, -inf elsewhere)."""
    if k <= 0 and p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(descending=False)
    if 0 < k < logits.numel():
        threshold = sorted_logits[logits.numel() - k]
        sorted_logits = sorted_logits.masked_fill(sorted_logits < threshold, float("-inf"))
    if p < 1.0:
        probs = sorted_logits.softmax(dim=-1)
        cumulative = probs.cumsum(dim=-1)
        mask = cumulative <= 1 - p
        mask[-1] = False  # at least one token
        sorted_logits = sorted_logits.masked_fill(mask, float("-inf"))
    return torch.empty_like(logits).scatter_(0, order, sorted_logits)


# ---------------------------------------------------------------------------- installation
class FakeVLLM:
    """One installation of the fake: its module objects, options and the engines it made.

    Args:
        load_inplace: ``LoRARequest`` has the ``load_inplace`` field (vLLM >= 0.11) or not.
        logprobs_mode: ``EngineArgs`` has ``logprobs_mode`` (vLLM >= 0.10.2) or not.
        default_logprobs_mode: What an engine reports when none is set (vLLM's default:
            ``raw_logprobs``).
        module_prefix: Prefix of the served model's module paths (``"language_model."`` mimics a
            multimodal wrapper, under which a causal-LM peft adapter silently does nothing).
    """

    def __init__(self, *, load_inplace: bool = False, logprobs_mode: bool = True,
                 default_logprobs_mode: str = "raw_logprobs", module_prefix: str = "") -> None:
        self.load_inplace = load_inplace
        self.default_logprobs_mode = default_logprobs_mode
        self.module_prefix = module_prefix
        self.llms: list[LLM] = []
        self.EngineArgs = _engine_args_class(logprobs_mode)
        self.LoRARequest = _lora_request_class(load_inplace)
        self.LLM = type("LLM", (LLM,), {"_fake": self, "__module__": "vllm"})
        self.modules = self._modules()

    def _modules(self) -> dict[str, types.ModuleType]:
        def module(name: str, **attrs: Any) -> types.ModuleType:
            m = types.ModuleType(name)
            m.__dict__.update(attrs)
            return m

        request = module("vllm.lora.request", LoRARequest=self.LoRARequest)
        lora = module("vllm.lora", request=request, __path__=[])
        outputs = module("vllm.outputs", RequestOutput=RequestOutput, CompletionOutput=CompletionOutput)
        logprobs = module("vllm.logprobs", Logprob=Logprob)
        sampling = module("vllm.sampling_params", SamplingParams=SamplingParams)
        inputs = module("vllm.inputs", TokensPrompt=dict)
        root = module("vllm", __path__=[], __version__="0.0.0+fake", LLM=self.LLM, SamplingParams=SamplingParams,
                      EngineArgs=self.EngineArgs, RequestOutput=RequestOutput, CompletionOutput=CompletionOutput,
                      TokensPrompt=dict, lora=lora, outputs=outputs, logprobs=logprobs, sampling_params=sampling,
                      inputs=inputs)
        return {"vllm": root, "vllm.lora": lora, "vllm.lora.request": request, "vllm.outputs": outputs,
                "vllm.logprobs": logprobs, "vllm.sampling_params": sampling, "vllm.inputs": inputs}

    def install(self, monkeypatch: Any) -> FakeVLLM:
        for name, mod in self.modules.items():
            monkeypatch.setitem(sys.modules, name, mod)
        return self

    def events(self, kind: str | None = None) -> list[tuple[Any, ...]]:
        """Every engine's recorded events (of one kind), in creation order."""
        return [e for llm in self.llms for e in llm.events if kind is None or e[0] == kind]


def install(monkeypatch: Any, **options: Any) -> FakeVLLM:
    """Install a fresh fake as ``vllm`` (and the submodules the engine imports) for one test."""
    return FakeVLLM(**options).install(monkeypatch)


def install_in_process() -> None:
    """Install a fake as ``vllm`` for the whole process: the setup hook of a Ray worker that hosts a
    :class:`~llm_trainers.distributed.engines.EngineWorker` in a test (``runtime_env=
    {"worker_process_setup_hook": "tests.trainers.fake_vllm.install_in_process"}``)."""
    sys.modules.update(FakeVLLM().modules)
