"""The learner over torch.distributed ranks: FSDP2 per policy, token-mean over the whole step.

Each rank is one process (a Ray actor: :class:`LearnerRank`) on one GPU, or on the CPU with the
gloo backend. A policy lives on a set of ranks (every rank by default; under L3,
``resources.policy_ranks`` puts separate models on separate ranks, and they update
concurrently). Its module is wrapped with FSDP2 (``fully_shard``, each decoder layer then the
root) over a device mesh of those ranks:

* ``learner_sharding: full`` — parameters, gradients and AdamW states are sharded: an 8B model
  trained in full costs 16 bytes × 8B / ranks per GPU instead of 128 GB on every GPU;
* ``learner_sharding: replicate`` — a replicate mesh (FSDP2's HSDP with a shard group of one):
  every rank holds the whole policy and gradients are all-reduced, as DDP does; the right choice
  for LoRA, whose frozen base would otherwise be gathered at every forward pass.

One update of a policy (:class:`ShardedLearner`, the single-process
:class:`~llm_trainers.learner.Learner` with three seams filled in):

.. code-block:: text

    every rank holds the same samples, shuffles with the same generator, cuts the same
    mini-batches (so the optimizer steps are those of one process)
    for each mini-batch:
        N = Σ over the ranks of their action tokens  (all_reduce: the global token count)
        rank r takes samples r, r + R, r + 2R, ...   (R = the policy's ranks)
        micro-batches: as many on every rank (all_reduce MAX; a rank short of data runs a
                       pass with loss × 0, so FSDP's collectives stay matched)
        loss = Σ_t L_t m_t / N  × R                  (FSDP averages gradients over R ranks:
                                                      × R makes the sum, i.e. the gradient of
                                                      the token-mean over the whole step)
        clip the global gradient norm (DTensor-aware), AdamW step on the shards

So one distributed update equals the single-process update on the same samples up to the
order of floating-point sums (tested at world size 2 for L1, L2 and L3).

Checkpoints are **gathered**: a rank returns full tensors (``DTensor.full_tensor``) and the
trainer writes the single-process format (``policies.pt``, ``learner.pt`` with AdamW states
keyed by parameter index), so a run saved with one layout resumes with any other.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from llm_trainers.batching import completion_logprobs, pack_sequences
from llm_trainers.learner import MAX_STATS, Learner, UpdateSample, _chunks, by_length, shuffle_generator
from llm_trainers.policies import PolicySet

__all__ = ["LearnerGroup", "LearnerLost", "LearnerRank", "PolicyGroup", "ShardedLearner", "shard_module"]


class LearnerLost(RuntimeError):
    """A learner rank died; the process group cannot go on."""


@dataclass
class PolicyGroup:
    """The ranks a policy lives on, seen from one of them.

    Attributes:
        ranks: Global ranks, sorted.
        position: This rank's index in ``ranks``.
        group: The process group of ``ranks`` (statistics and token counts).
        mesh: The device mesh FSDP2 shards over.
    """

    ranks: list[int]
    position: int
    group: Any
    mesh: Any

    @property
    def size(self) -> int:
        return len(self.ranks)


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, torch.nn.ModuleList):
        return list(layers)
    return [m for m in base.modules() if type(m).__name__.endswith(("DecoderLayer", "Block"))]


def shard_module(model: torch.nn.Module, mesh: Any) -> torch.nn.Module:
    """FSDP2-wrap ``model`` over ``mesh``: each decoder layer, then the root (in place)."""
    from torch.distributed.fsdp import fully_shard

    for layer in _decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _reshard(model: torch.nn.Module) -> None:
    """Free the gathered weights a forward pass left behind. FSDP2 keeps the root's parameters
    unsharded after a forward pass, expecting the backward pass; after a pass under no_grad none
    comes, and a training forward would then run on those stale gathered copies, whose gradients
    never reach the sharded parameters."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _full(t: Tensor) -> Tensor:
    """A full CPU copy of a (possibly sharded) tensor; a collective for DTensors."""
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().to("cpu", copy=True)


def _shard_like(full: Tensor, param: Tensor) -> Tensor:
    """``full`` laid out as ``param`` is (its shard of it, when ``param`` is a DTensor)."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(param, DTensor):
        return distribute_tensor(full.to(param.device, param.dtype), param.device_mesh, param.placements,
                                 src_data_rank=None)
    return full.to(param.device, param.dtype)


class ShardedLearner(Learner):
    """The learner of one rank (see the module docstring).

    Args:
        policies: This rank's policies (FSDP2 modules).
        groups: Policy → its :class:`PolicyGroup`.
        policy_order: Every policy of the run, in the run's order (shuffling seeds follow it, so
            a rank holding a subset shuffles as the single process does).
        seed: The run's seed.
        **kwargs: The :class:`~llm_trainers.learner.Learner` settings.
    """

    def __init__(self, policies: PolicySet, groups: Mapping[str, PolicyGroup], policy_order: Sequence[str],
                 seed: int = 0, **kwargs: Any) -> None:
        super().__init__(policies, seed=seed, **kwargs)
        self.groups = dict(groups)
        self.generators = {n: shuffle_generator(seed, list(policy_order).index(n)) for n in policies.names()}

    @property
    def share_prompts(self) -> bool:
        """Off: a rank takes every ``size``-th sample of a shuffled mini-batch, which splits a
        tree group's rows over the ranks, and each FSDP forward gathers the weights again."""
        return False

    # ------------------------------------------------------------------ collectives
    def _all_reduce(self, policy: str, values: Sequence[float], op: Any) -> list[float]:
        g = self.groups[policy]
        if g.size == 1:
            return list(values)
        t = torch.tensor(list(values), dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t, op=op, group=g.group)
        return t.cpu().tolist()

    def _comm_device(self) -> torch.device:
        backend = dist.get_backend()
        return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    # ------------------------------------------------------------------ seams of Learner.update
    def _micro_batches(self, policy: str, mini: Sequence[UpdateSample]) -> Iterator[tuple[Sequence[UpdateSample], float]]:
        g = self.groups[policy]
        share = list(mini[g.position :: g.size])
        share = [share[i] for i in by_length([s.prompt_ids for s in share], [s.completion_ids for s in share])]
        micros = list(_chunks(share, self.micro_batch_size)) if share else []
        count = int(self._all_reduce(policy, [len(micros)], dist.ReduceOp.MAX)[0])
        model = self.policies[policy].model
        sync = getattr(model, "set_requires_gradient_sync", None)
        for j in range(count):
            if sync is not None:  # accumulate locally, reduce once with the step's last backward
                sync(j == count - 1)
            if j < len(micros):
                yield micros[j], float(g.size)
            else:
                yield [mini[0]], 0.0

    def _reduce_stats(self, policy: str, sums: dict[str, float]) -> dict[str, float]:
        keys = [k for k in sums if k not in MAX_STATS]
        summed = self._all_reduce(policy, [sums[k] for k in keys], dist.ReduceOp.SUM)
        out = dict(zip(keys, summed))
        maxed = [k for k in sums if k in MAX_STATS]
        out.update(zip(maxed, self._all_reduce(policy, [sums[k] for k in maxed], dist.ReduceOp.MAX)))
        return out

    def _clip(self, params: list[torch.nn.Parameter]) -> float:
        with_grad = [p for p in params if p.grad is not None]
        if not with_grad:
            return 0.0
        max_norm = self.cfg.max_grad_norm
        if max_norm:
            norm = torch.nn.utils.clip_grad_norm_(with_grad, max_norm)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in with_grad])
        return float(_full(norm))

    # ------------------------------------------------------------------ scoring
    @torch.no_grad()
    def logprobs(self, policy: str, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                 reference: bool = False) -> list[Tensor]:
        """This rank's share (samples ``position::size``) of the log-probabilities; the ranks of
        the policy run as many forward passes each (FSDP gathers weights in every one)."""
        pol = self.policies[policy]
        g = self.groups[policy]
        mine = list(range(len(prompts)))[g.position :: g.size]
        chunks = list(_chunks(mine, self.micro_batch_size)) if mine else []
        count = int(self._all_reduce(policy, [len(chunks)], dist.ReduceOp.MAX)[0])
        pad = pol.tokenizer.pad_token_id
        out: list[Tensor] = []
        ctx = pol.reference() if reference else pol.activated()
        with ctx as model:
            for j in range(count):
                idx = chunks[j] if j < len(chunks) else [0]
                batch = pack_sequences([prompts[i] for i in idx], [completions[i] for i in idx], pad).to(pol.device)
                with self._autocast(pol.device):
                    lp, _ = completion_logprobs(model, batch, self.temperature)
                if j < len(chunks):
                    lp = lp.float().cpu()
                    out.extend(lp[row, : len(completions[i])].clone() for row, i in enumerate(idx))
            _reshard(model)
        return out

    # ------------------------------------------------------------------ weights and state
    def trainable_state(self, policy: str) -> dict[str, Tensor]:
        """Full CPU copies of the policy's trainable weights (a collective over its ranks)."""
        return {n: _full(p) for n, p in self.policies[policy].named_trainable_parameters()}

    @torch.no_grad()
    def load_trainable(self, policy: str, state: Mapping[str, Tensor]) -> None:
        params = dict(self.policies[policy].named_trainable_parameters())
        missing = set(params) - set(state)
        if missing:
            raise KeyError(f"weights of policy {policy!r} lack {sorted(missing)[:5]}")
        for n, p in params.items():
            p.copy_(_shard_like(state[n], p))

    @torch.no_grad()
    def load_reference(self, policy: str, state: Mapping[str, Tensor]) -> None:
        """Make ``state`` (a fully fine-tuned policy's weights) its frozen KL reference; nothing
        under LoRA, whose reference is the base model with the adapters off."""
        ref = self.policies[policy].ref_model
        if ref is None or self.policies[policy].adapter is not None:
            return
        params = dict(ref.named_parameters())
        missing = set(params) - set(state)
        if missing:
            raise KeyError(f"reference weights of policy {policy!r} lack {sorted(missing)[:5]}")
        for n, p in params.items():
            p.copy_(_shard_like(state[n], p))

    def state_dict(self) -> dict[str, Any]:
        """The single-process format: AdamW states as full tensors keyed by parameter index."""
        optimizers = {}
        for name, opt in self.optimizers.items():
            sd = opt.state_dict()
            state = {}
            for idx in sorted(sd["state"]):
                state[idx] = {k: (_full(v) if torch.is_tensor(v) and k != "step" else v)
                              for k, v in sd["state"][idx].items()}
            optimizers[name] = {"state": state, "param_groups": sd["param_groups"]}
        return {
            "optimizers": optimizers,
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            "generators": {k: g.get_state() for k, g in self.generators.items()},
            "trained_tokens": self.trained_tokens,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, opt in self.optimizers.items():
            saved = state["optimizers"][name]
            params = [p for group in opt.param_groups for p in group["params"]]
            shaped = {}
            for idx, entry in saved["state"].items():
                p = params[int(idx)]
                shaped[idx] = {k: (_shard_like(v, p) if torch.is_tensor(v) and k != "step" else v)
                               for k, v in entry.items()}
            opt.load_state_dict({"state": shaped, "param_groups": saved["param_groups"]})
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])
        for k, g in self.generators.items():
            g.set_state(state["generators"][k])
        self.trained_tokens = int(state.get("trained_tokens", 0))


class LearnerRank:
    """One learner process (a plain class; :class:`LearnerGroup` makes the Ray actors).

    Args:
        rank: Global rank.
        world_size: Number of ranks.
        threads: torch threads (CPU ranks).
    """

    def __init__(self, rank: int, world_size: int, threads: int = 1) -> None:
        self.rank = rank
        self.world_size = world_size
        torch.set_num_threads(max(1, threads))
        self.learner: ShardedLearner | None = None

    def info(self) -> dict[str, Any]:
        from llm_trainers.distributed.cluster import node_info

        return {**node_info(), "rank": self.rank, "gpu": torch.cuda.is_available()}

    def rendezvous(self) -> str:
        """``ip:port`` for the process group (called on rank 0: a free port on its node)."""
        import socket

        from llm_trainers.distributed.cluster import import_ray

        ip = import_ray().util.get_node_ip_address()
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"{ip}:{port}"

    def init(self, address: str, backend: str, timeout_s: float) -> None:
        if backend == "nccl":
            torch.cuda.set_device(0)  # Ray shows each rank its own GPU as device 0
        dist.init_process_group(backend, init_method=f"tcp://{address}", rank=self.rank, world_size=self.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))

    def build(self, cfg: Any, agents: Sequence[str], model_path: str, rank_sets: Mapping[str, Sequence[int]],
              policy_order: Sequence[str]) -> list[str]:
        """Build this rank's policies (FSDP2-wrapped) and its learner; return the policies it holds."""
        from torch.distributed.device_mesh import DeviceMesh

        from llm_trainers.policies import _default_policy_map
        from llm_trainers.specs import learner_kwargs, policy_spec

        backend = dist.get_backend()
        device_type = "cuda" if backend == "nccl" else "cpu"
        replicate = cfg.resources.learner_sharding == "replicate"
        # Every rank creates every mesh and group, in one order (creation is collective).
        sets: dict[tuple[int, ...], tuple[Any, Any]] = {}
        for policy in policy_order:
            key = tuple(sorted(rank_sets[policy]))
            if key in sets:
                continue
            ranks = torch.tensor(key)
            if replicate:
                mesh = DeviceMesh(device_type, ranks.reshape(-1, 1), mesh_dim_names=("replicate", "shard"))
            else:
                mesh = DeviceMesh(device_type, ranks, mesh_dim_names=("shard",))
            sets[key] = (mesh, dist.new_group(list(key)))
        owned = [p for p in policy_order if self.rank in rank_sets[p]]
        if not owned:
            return []
        spec = policy_spec(cfg, agents, model_path)
        mapping = _default_policy_map(spec.model.level, spec.agents, spec.model.policy_map or None)
        mine = [a for a in spec.agents if mapping[a] in owned]
        policies = spec.with_changes(agents=mine, policy_map={a: mapping[a] for a in mine},
                                     device="cuda" if device_type == "cuda" else "cpu").build()
        groups = {}
        for p in owned:
            key = tuple(sorted(rank_sets[p]))
            mesh, group = sets[key]
            groups[p] = PolicyGroup(list(key), key.index(self.rank), group, mesh)
        wrapped: set[int] = set()
        for p in owned:
            pol = policies[p]
            for module in (pol.model, pol.ref_model):
                if module is not None and id(module) not in wrapped:
                    shard_module(module, groups[p].mesh)
                    wrapped.add(id(module))
        bf16 = cfg.train.bf16
        if bf16 == "auto":
            bf16 = device_type == "cuda" and torch.cuda.is_bf16_supported()
        self.learner = ShardedLearner(policies, groups, policy_order, **learner_kwargs(cfg, bool(bf16)))
        return owned

    # ------------------------------------------------------------------ work
    def logprobs(self, policy: str, data: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]],
                 reference: bool) -> list[Tensor]:
        prompts, completions = data
        return self._learner().logprobs(policy, prompts, completions, reference=reference)

    def update_all(self, samples: Mapping[str, Sequence[UpdateSample]]) -> dict[str, tuple[dict[str, float], Any, int]]:
        """Update this rank's policies named in ``samples``: per policy its metrics, its new
        trainable weights (full tensors, from the policy's first rank only) and the tokens trained."""
        from llm_trainers.distributed.cluster import import_ray

        ray = import_ray()
        learner = self._learner()
        out = {}
        for policy, batch in samples.items():
            if policy not in learner.groups:
                continue
            if isinstance(batch, ray.ObjectRef):  # references nested in a dict are not resolved by Ray
                batch = ray.get(batch)
            before = learner.trained_tokens
            metrics = learner.update(policy, batch)
            state = learner.trainable_state(policy) if batch else None
            first = learner.groups[policy].position == 0
            out[policy] = (metrics, state if first else None, learner.trained_tokens - before)
        return out

    def load(self, weights: Mapping[str, Mapping[str, Tensor]], learner_state: Mapping[str, Any] | None,
             as_reference: bool = False) -> None:
        """Load trainable weights (and with ``as_reference`` make them the frozen KL reference
        of a fully fine-tuned policy: the weights RL starts from) and the learner's state."""
        learner = self._learner()
        for policy, state in weights.items():
            if policy in learner.groups:
                learner.load_trainable(policy, state)
                if as_reference:
                    learner.load_reference(policy, state)
        if learner_state is not None:
            learner.load_state_dict({
                "optimizers": {k: v for k, v in learner_state["optimizers"].items() if k in learner.groups},
                "schedulers": {k: v for k, v in learner_state["schedulers"].items() if k in learner.groups},
                "generators": {k: v for k, v in learner_state["generators"].items() if k in learner.groups},
                "trained_tokens": learner_state.get("trained_tokens", 0),
            })

    def trainable_state(self, policies: Sequence[str]) -> dict[str, dict[str, Tensor]]:
        learner = self._learner()
        return {p: learner.trainable_state(p) for p in policies if p in learner.groups}

    def state_dict(self) -> dict[str, Any]:
        return self._learner().state_dict()

    def owned_first(self) -> list[str]:
        """The policies for which this rank is the first of their ranks."""
        learner = self._learner()
        return [p for p, g in learner.groups.items() if g.position == 0]

    def shutdown(self) -> None:
        self.learner = None
        if dist.is_initialized():
            dist.destroy_process_group()

    def _learner(self) -> ShardedLearner:
        if self.learner is None:
            raise RuntimeError("learner rank not built (LearnerRank.build)")
        return self.learner


class LearnerGroup:
    """The trainer's handle on the learner ranks; the :class:`~llm_trainers.learner.Learner`
    interface (``logprobs``, ``update``, ``update_all``, ``state_dict``, ``load_state_dict``).

    After every update the new trainable weights are copied into ``mirror`` (the trainer's own
    copy of the policies), from which the engines are synced and checkpoints are written.

    Args:
        actors: One :class:`LearnerRank` actor per rank, built.
        rank_sets: Policy → its ranks.
        mirror: The trainer's copy of the policies.
    """

    def __init__(self, actors: Sequence[Any], rank_sets: Mapping[str, Sequence[int]], mirror: PolicySet) -> None:
        from llm_trainers.distributed.cluster import import_ray

        self.ray = import_ray()
        self.actors = list(actors)
        self.rank_sets = {p: sorted(r) for p, r in rank_sets.items()}
        self.mirror = mirror
        self.trained_tokens = 0
        self.infos: list[dict[str, Any]] = []

    @staticmethod
    def launch(resources: Any, *, cluster: Any = None, actor_options: Mapping[str, Any] | None = None) -> list[Any]:
        """Start ``resources.learner_world_size`` rank actors (GPU ranks in one placement group,
        strategy PACK) and form their process group; return the actors."""
        from llm_trainers.distributed.cluster import import_ray

        ray = import_ray()
        r = resources
        world = r.learner_world_size
        backend = r.learner_backend if r.learner_backend != "auto" else ("nccl" if r.gpus_per_learner > 0 else "gloo")
        actor_cls = ray.remote(LearnerRank)
        base = {"num_gpus": r.gpus_per_learner, "num_cpus": r.cpus_per_learner, "max_restarts": 0,
                **dict(actor_options or {})}
        options = [dict(base) for _ in range(world)]
        if r.gpus_per_learner > 0 and cluster is not None:
            pg = cluster.placement_group([{"GPU": float(r.gpus_per_learner), "CPU": float(r.cpus_per_learner)}] * world,
                                         "PACK", "learner", r.startup_timeout_s)
            for i in range(world):
                options[i]["scheduling_strategy"] = cluster.in_group(pg, i)
        threads = max(1, int(r.cpus_per_learner)) if r.gpus_per_learner == 0 else 4
        actors = [actor_cls.options(**options[i]).remote(i, world, threads) for i in range(world)]
        starter = LearnerGroup(actors, {}, None)  # only for its failure handling
        address = starter._gather([actors[0].rendezvous.remote()], "rendezvous")[0]
        starter._gather([a.init.remote(address, backend, r.startup_timeout_s) for a in actors], "process group init")
        return actors

    @classmethod
    def build(cls, actors: Sequence[Any], cfg: Any, agents: Sequence[str], model_path: str,
              mirror: PolicySet) -> LearnerGroup:
        """Build the policies on the ranks (FSDP2) and give them the mirror's trainable weights.
        Ranks can be built again (another config) while their process group lives."""
        from llm_trainers.distributed.placement import policy_rank_sets

        order = mirror.names()
        rank_sets = policy_rank_sets(cfg.model.level, order, len(actors), cfg.resources.policy_ranks or None)
        group = cls(actors, rank_sets, mirror)
        group.infos = group._gather([a.info.remote() for a in actors], "start")
        group._gather([a.build.remote(cfg, list(agents), model_path, rank_sets, order) for a in actors], "build")
        # The ranks build the model's own weights (and draw their own LoRA initialisations where a
        # rank holds a subset of the policies): the mirror's are the run's, a warm start's
        # included, and they are where RL starts, so the KL reference too (a checkpoint's, on a
        # resume, come after: load_state_dict).
        weights = group.ray.put({p: mirror[p].trainable_state_dict() for p in order})
        group._gather([a.load.remote(weights, None, True) for a in actors], "initial weights")
        return group

    @classmethod
    def start(cls, cfg: Any, agents: Sequence[str], model_path: str, mirror: PolicySet, *,
              cluster: Any = None) -> LearnerGroup:
        """:meth:`launch` then :meth:`build`."""
        return cls.build(cls.launch(cfg.resources, cluster=cluster), cfg, agents, model_path, mirror)

    # ------------------------------------------------------------------ the Learner interface
    def logprobs(self, policy: str, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                 reference: bool = False) -> list[Tensor]:
        ranks = self.rank_sets[policy]
        data = self.ray.put((list(map(list, prompts)), list(map(list, completions))))
        parts = self._gather([self.actors[r].logprobs.remote(policy, data, reference) for r in ranks], "scoring")
        out: list[Tensor | None] = [None] * len(prompts)
        for position, part in enumerate(parts):
            for i, lp in zip(range(position, len(prompts), len(ranks)), part):
                out[i] = lp
        return out  # type: ignore[return-value]

    def update(self, policy: str, samples: Sequence[UpdateSample]) -> dict[str, float]:
        return self.update_all({policy: samples})[policy]

    def update_all(self, samples: Mapping[str, Sequence[UpdateSample]]) -> dict[str, dict[str, float]]:
        """Update every named policy; policies on disjoint ranks train at the same time."""
        refs = {p: self.ray.put(list(batch)) for p, batch in samples.items()}
        calls = []
        for rank, actor in enumerate(self.actors):
            mine = {p: refs[p] for p in samples if rank in self.rank_sets[p]}
            if mine:
                calls.append(actor.update_all.remote(mine))
        results = self._gather(calls, "update")
        metrics: dict[str, dict[str, float]] = {}
        for rank_results in results:
            for policy, (stats, _state, tokens) in rank_results.items():
                if policy in metrics:
                    continue  # every rank of a policy reports the same (reduced) figures
                metrics[policy] = stats
                self.trained_tokens += tokens
        for rank_results in results:
            for policy, (_, state, _) in rank_results.items():
                if state is not None:
                    self.mirror[policy].load_trainable_state_dict(state)
        return {p: metrics.get(p, {}) for p in samples}

    def state_dict(self) -> dict[str, Any]:
        """Gathered: each policy's optimizer, schedule and shuffling state from its first rank."""
        parts = self._gather([a.state_dict.remote() for a in self.actors], "checkpoint")
        firsts = self._gather([a.owned_first.remote() for a in self.actors], "checkpoint")
        out: dict[str, Any] = {"optimizers": {}, "schedulers": {}, "generators": {}, "trained_tokens": self.trained_tokens}
        for part, first in zip(parts, firsts):
            for key in ("optimizers", "schedulers", "generators"):
                for policy in first:
                    out[key][policy] = part[key][policy]
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a checkpoint: the mirror's trainable weights (already loaded from it by the
        trainer) and the learner state go to every rank."""
        weights = self.ray.put({p: self.mirror[p].trainable_state_dict() for p in self.mirror.names()})
        ref = self.ray.put(state)
        self._gather([a.load.remote(weights, ref) for a in self.actors], "restore")
        self.trained_tokens = int(state.get("trained_tokens", 0))

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.get(actor.shutdown.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead rank has nothing to shut down
                pass
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    # ------------------------------------------------------------------ failures
    def _gather(self, refs: Sequence[Any], what: str) -> list[Any]:
        """Every answer, in order. A rank that fails — lost, or raising — stops the whole group:
        the others may be waiting for it in a collective, and would wait forever. A lost rank
        raises :class:`LearnerLost`; a rank's own error is raised as it is."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        refs = list(refs)
        pending = list(refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            try:
                self.ray.get(done[0])
            except BaseException as exc:
                for actor in self.actors:
                    self.ray.kill(actor, no_restart=True)
                self.actors = []
                if isinstance(exc, (RayActorError, ActorUnavailableError)):
                    raise LearnerLost(
                        f"a learner rank was lost during {what}: {type(exc).__name__}: {exc}. The process group "
                        "is gone; restart the run with --resume (it continues from the last checkpoint)."
                    ) from exc
                raise
        return self.ray.get(refs)
