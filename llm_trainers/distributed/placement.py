"""The layout of a run on a cluster: which actor goes where, checked before anything starts.

:func:`plan_placement` turns a config's ``resources`` section into a :class:`PlacementPlan`: one
:class:`Slot` per learner rank, inference engine and environment worker, with the node it is
expected on and the GPUs and CPUs it reserves. It needs no cluster and no Ray, so a layout for
2 nodes × 8 GPUs is validated (and printed with ``llm-train CONFIG --plan``) on a laptop.

The plan predicts what Ray's placement does with the bundles the trainer asks for:

* learner ranks: one placement group, strategy ``PACK`` (rank order; a policy's ranks are
  consecutive, so they fill one node's GPUs before the next: FSDP's collectives stay on NVLink
  where they can);
* engines: one placement group, strategy ``PACK``; an engine's tensor-parallel GPUs are one
  bundle, which Ray never splits across nodes;
* environment workers: scheduling strategy ``SPREAD`` (round-robin over the nodes), so the
  sandboxes' CPU load is spread over the whole cluster.

Ray may place differently when the cluster holds other work; the trainer records the actual
nodes in the run directory (``placement.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["PlacementPlan", "Slot", "layout_problems", "plan_placement", "policy_rank_sets"]

BACKENDS = ("auto", "nccl", "gloo")
SHARDINGS = ("full", "replicate")


@dataclass
class Slot:
    """One actor of the layout.

    Attributes:
        role: ``learner``, ``engine`` or ``env``.
        index: Rank (learner), engine number or worker number.
        node: The node it is planned on (0-based).
        gpus: GPUs it reserves.
        cpus: CPUs it reserves.
        policies: Learner: the policies this rank trains.
    """

    role: str
    index: int
    node: int
    gpus: float
    cpus: float
    policies: list[str] = field(default_factory=list)


@dataclass
class PlacementPlan:
    """Every actor of a layout and the node it is planned on."""

    nodes: int
    gpus_per_node: int
    slots: list[Slot]

    def of(self, role: str) -> list[Slot]:
        return [s for s in self.slots if s.role == role]

    def usage(self) -> list[dict[str, float]]:
        """Per node: GPUs and CPUs reserved, and actors by role."""
        out = []
        for n in range(self.nodes):
            mine = [s for s in self.slots if s.node == n]
            row: dict[str, float] = {"node": n, "gpus": sum(s.gpus for s in mine), "cpus": sum(s.cpus for s in mine)}
            for role in ("learner", "engine", "env"):
                row[role] = sum(1 for s in mine if s.role == role)
            out.append(row)
        return out

    def describe(self) -> str:
        """A table: one line per node, then one per actor."""
        lines = [f"layout: {self.nodes} node(s) x {self.gpus_per_node} GPU(s)"]
        for row in self.usage():
            lines.append(
                f"  node {int(row['node'])}: GPUs {row['gpus']:g}/{self.gpus_per_node}, CPUs {row['cpus']:g}; "
                f"learner ranks {int(row['learner'])}, engines {int(row['engine'])}, env workers {int(row['env'])}"
            )
        for s in self.slots:
            extra = f" policies {','.join(s.policies)}" if s.policies else ""
            lines.append(f"  {s.role:7s} {s.index:3d} -> node {s.node} (GPUs {s.gpus:g}, CPUs {s.cpus:g}){extra}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "slots": [asdict(s) for s in self.slots]}


def policy_rank_sets(level: str, policies: Sequence[str], world_size: int,
                     policy_ranks: dict[str, list[int]] | None) -> dict[str, list[int]]:
    """Learner ranks of each policy: ``policy_ranks`` (L3), else every rank for every policy.

    Under L1 and L2 every policy lives in one module (one model, adapters on it), which every
    rank of the module holds, so all policies share the whole world.
    """
    if not policy_ranks:
        return {p: list(range(world_size)) for p in policies}
    if level != "L3":
        raise ValueError(f"resources.policy_ranks places separate models: level L3 only (got {level})")
    missing = [p for p in policies if p not in policy_ranks]
    unknown = [p for p in policy_ranks if p not in policies]
    if missing or unknown:
        raise ValueError(f"resources.policy_ranks must name every policy {list(policies)}: missing {missing}, "
                         f"unknown {unknown}")
    out = {}
    for p in policies:
        ranks = sorted({int(r) for r in policy_ranks[p]})
        if not ranks or ranks[0] < 0 or ranks[-1] >= world_size:
            raise ValueError(f"resources.policy_ranks[{p!r}] = {policy_ranks[p]}: ranks must be in 0..{world_size - 1}")
        out[p] = ranks
    return out


def _policy_names(cfg: Any) -> list[str] | None:
    """The policy names the config fixes without building the environment (None if unknown)."""
    if cfg.model.level == "L1":
        values = set(cfg.model.policy_map.values()) if cfg.model.policy_map else {"shared"}
        return sorted(values)
    if cfg.model.policy_map:
        return list(dict.fromkeys(cfg.model.policy_map.values()))
    if "agents" not in cfg.env.kwargs:  # one policy per agent: the registry's default agents
        try:
            from llm_envs.registry import entry

            return list(entry(cfg.env.id).agents)
        except (ImportError, KeyError):
            pass
    if cfg.resources.policy_ranks:
        return list(cfg.resources.policy_ranks)
    return None


def layout_problems(cfg: Any) -> list[str]:
    """Everything wrong with ``cfg.resources`` (empty when the layout is valid)."""
    r = cfg.resources
    problems = []
    if r.nodes < 1:
        problems.append("resources.nodes must be >= 1")
    for name in ("gpus_per_node", "env_workers", "engines", "learner_world_size", "gpus_per_engine", "gpus_per_learner",
                 "max_step_retries", "cpus_per_env_worker", "cpus_per_engine", "cpus_per_learner"):
        if getattr(r, name) < 0:
            problems.append(f"resources.{name} must be >= 0")
    if r.learner_backend not in BACKENDS:
        problems.append(f"resources.learner_backend must be one of {BACKENDS}")
    if r.learner_sharding not in SHARDINGS:
        problems.append(f"resources.learner_sharding must be one of {SHARDINGS}")
    if r.env_workers > cfg.env.num_envs:
        problems.append(f"resources.env_workers ({r.env_workers}) exceeds env.num_envs ({cfg.env.num_envs}): a worker "
                        "would hold no environment")
    if r.engines > 0:
        if cfg.rollout.engine == "vllm" and r.gpus_per_engine < 1:
            problems.append("vLLM engines need GPUs: set resources.gpus_per_engine >= 1")
        if cfg.rollout.engine == "hf" and r.gpus_per_engine > 1:
            problems.append("the HF engine runs on one device: resources.gpus_per_engine must be 0 or 1 "
                            "(use rollout.engine: vllm for tensor parallelism)")
    if r.learner_world_size > 0:
        if r.learner_backend == "nccl" and r.gpus_per_learner < 1:
            problems.append("resources.learner_backend nccl needs GPUs (gpus_per_learner >= 1)")
        if r.gpus_per_learner > 1:
            problems.append("resources.gpus_per_learner: one GPU per rank (a rank is one process on one GPU)")
    elif r.policy_ranks:
        problems.append("resources.policy_ranks needs learner ranks (resources.learner_world_size >= 1)")
    policies = _policy_names(cfg)
    if r.policy_ranks and r.learner_world_size > 0:
        try:
            policy_rank_sets(cfg.model.level, policies or list(r.policy_ranks), r.learner_world_size, r.policy_ranks)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        return problems
    try:
        plan_placement(cfg, policies)
    except ValueError as exc:
        problems.append(str(exc))
    return problems


def plan_placement(cfg: Any, policies: Sequence[str] | None = None) -> PlacementPlan:
    """The planned node of every actor of ``cfg.resources`` (see the module docstring).

    Args:
        cfg: A :class:`~llm_trainers.config.Config`.
        policies: Policy names (default: what the config fixes, else one ``shared`` label).

    Raises:
        ValueError: The layout does not fit the nodes (with what is missing).
    """
    r = cfg.resources
    names = list(policies or _policy_names(cfg) or ["(every policy)"])
    free_gpus = [r.gpus_per_node] * r.nodes
    slots: list[Slot] = []

    def take_gpus(count: int, what: str) -> int:
        if count > r.gpus_per_node:
            raise ValueError(f"{what} needs {count} GPUs on one node; nodes have {r.gpus_per_node} "
                             "(resources.gpus_per_node)")
        for node, free in enumerate(free_gpus):
            if free >= count:
                free_gpus[node] -= count
                return node
        need = _gpus_needed(r)
        raise ValueError(f"the layout needs {need} GPUs ({_gpu_breakdown(r)}); resources give "
                         f"{r.nodes} x {r.gpus_per_node} = {r.nodes * r.gpus_per_node}")

    if r.learner_world_size > 0:
        ranks = policy_rank_sets(cfg.model.level, names, r.learner_world_size, r.policy_ranks or None)
        for rank in range(r.learner_world_size):
            owned = [p for p, rs in ranks.items() if rank in rs]
            node = take_gpus(r.gpus_per_learner, f"learner rank {rank}") if r.gpus_per_learner else 0
            slots.append(Slot("learner", rank, node, r.gpus_per_learner, r.cpus_per_learner, owned))
    for e in range(r.engines):
        node = take_gpus(r.gpus_per_engine, f"engine {e} (tensor parallel)") if r.gpus_per_engine else e % r.nodes
        slots.append(Slot("engine", e, node, r.gpus_per_engine, r.cpus_per_engine))
    for w in range(r.env_workers):
        slots.append(Slot("env", w, w % r.nodes, 0, r.cpus_per_env_worker))
    return PlacementPlan(r.nodes, r.gpus_per_node, slots)


def _gpus_needed(r: Any) -> int:
    return r.learner_world_size * r.gpus_per_learner + r.engines * r.gpus_per_engine


def _gpu_breakdown(r: Any) -> str:
    return (f"learner {r.learner_world_size} x {r.gpus_per_learner}, "
            f"engines {r.engines} x {r.gpus_per_engine}")
