"""The supervised warm start (config section ``sft``): next-token cross-entropy on demonstrations
before RL, the loss on the action tokens only.

.. code-block:: text

    stream = reference-agent demonstrations of env.id (or a JSONL file), cycled if finite
    for step in 1..sft.steps:
        examples = next sft.batch_size examples of each policy     (routed by agent → policy)
        for each policy:  tokens = chat_template(messages[:-1], generation prompt) ⊕ action ⊕ eos
                          labels = -100 on the prompt, the action tokens and eos after it
                          loss = mean token cross-entropy;  clip;  AdamW step (its own optimizer)
                          (the rollout's padding; logits of the action's positions only;
                           bf16 autocast when train.bf16 is on)
        every save_every: checkpoint <output_dir>/sft/checkpoints/step_N
    write <output_dir>/sft/weights.pt (the trained weights) and the marker sft/done

The prompt tokens are the rollout's: the same chat messages
(:func:`llm_envs.core.to_chat_messages` of the observation) through the same chat template and
``model.chat_template_kwargs`` as :func:`llm_trainers.agents.hf.encode_observation`; the action is
followed by the tokenizer's end-of-sequence token, the token that stops generation.

Each policy trains only its own weights — its LoRA adapter under L2 (the adapter is made active
for its forward pass, as in the RL learner), so each agent's adapter learns only from its own
agent's demonstrations. A resumed warm start skips the examples already consumed (the stream is
a pure function of the run seed), so it continues exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from llm_trainers.agents.hf import encode_messages
from llm_trainers.batching import bf16_autocast, completion_logits, pack_sequences
from llm_trainers.checkpoint import latest_checkpoint, load_checkpoint, prune_checkpoints, save_checkpoint
from llm_trainers.config import config_to_dict
from llm_trainers.metrics import MetricsLogger
from llm_trainers.policies import PolicySet

__all__ = ["IGNORE_INDEX", "WarmStart", "WarmStartNotFoundError", "encode_example", "example_stream",
           "load_warm_start_weights"]

#: The label of a token that carries no loss (the prompt), as in transformers and TRL.
IGNORE_INDEX = -100


def encode_example(tokenizer: Any, messages: Sequence[Mapping[str, str]],
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of a demonstration: the prompt (every message but the last,
    with the generation prompt) then the last (assistant) message's text and the end-of-sequence
    token; ``labels`` is ``IGNORE_INDEX`` on the prompt and the token itself on the action."""
    prompt = encode_messages(tokenizer, messages[:-1], chat_template_kwargs)
    # The action is text the model writes: a spelled control token in it is text, as in a prompt.
    action = list(tokenizer(messages[-1]["content"], add_special_tokens=False, split_special_tokens=True)["input_ids"])
    eos = tokenizer.eos_token_id
    if eos is not None:
        action.append(int(eos))
    return prompt + action, [IGNORE_INDEX] * len(prompt) + action


def split_example(ids: Sequence[int], labels: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(prompt, action)`` token ids of an encoded demonstration (:func:`encode_example`: labels
    ``IGNORE_INDEX`` on the prompt, then the action's tokens themselves)."""
    start = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), len(labels))
    if len(labels) != len(ids) or list(labels[start:]) != list(ids[start:]) or start == 0:
        raise ValueError("sft: an encoded example must be a prompt (labels -100) followed by its action "
                         "(labels equal to the tokens)")
    return list(ids[:start]), list(ids[start:])


def example_stream(cfg: Any, skip: int = 0, agents: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    """The warm start's examples in order (a config's ``sft`` section): its file, cycled; or the
    reference agents' demonstrations (:func:`llm_trainers.demonstrations.iter_demonstrations`),
    fresh episodes or ``sft.episodes`` of them cycled. The first ``skip`` are left out.

    A file is read through once first: every line must be an example, and where ``agents``
    (the environment's) is given, every ``agent`` key must name one of them."""
    from llm_trainers import demonstrations as demos

    s = cfg.sft
    if s.data:
        path = Path(s.data)
        if not path.is_file():
            raise FileNotFoundError(f"sft.data: no file {path}")
        # Every line is checked now: a malformed line deep in a large file failed hours into
        # the run, and without checkpoints lost its steps; a misspelt agent's examples were
        # dropped without a word.
        count = 0
        for count, example in enumerate(demos.read_jsonl(path), 1):
            agent = example.get("agent")
            if agent is not None and agents is not None and agent not in agents:
                raise ValueError(f"sft.data: example {count} of {path} is for agent {agent!r}, which {cfg.env.id} "
                                 f"does not have (its agents: {list(agents)})")
        if count == 0:
            raise ValueError(f"sft.data: {path} holds no example")
        stream = itertools.chain.from_iterable(demos.read_jsonl(path) for _ in itertools.count())
    else:
        kwargs = dict(env_id=cfg.env.id, env_kwargs={**cfg.env.kwargs, **s.env_kwargs},
                      agents=s.agents, roles=s.roles, run_seed=cfg.run.seed, random_fraction=s.random_fraction,
                      perturb_fraction=s.perturb_fraction, max_decisions=cfg.env.max_decisions,
                      successful_only=s.successful_only)
        if s.episodes is None:
            stream = demos.iter_demonstrations(**kwargs)
        else:
            first = list(demos.iter_demonstrations(episodes=s.episodes, **kwargs))
            if not first:
                raise ValueError(f"sft: {s.episodes} demonstration episode(s) of {cfg.env.id} gave no example "
                                 "(check sft.agents / sft.roles)")
            stream = itertools.cycle(first)
    return itertools.islice(stream, skip, None)


class WarmStartNotFoundError(ValueError, FileNotFoundError):
    """``sft.init_from`` names no finished warm start: a setting to correct (a ``ValueError``,
    which ``llm-train`` reports as such), and a ``FileNotFoundError`` as it was before."""


def load_warm_start_weights(policies: PolicySet, path: str | Path) -> Path:
    """Load an earlier warm start's weights (``sft.init_from``: its directory or weights file),
    and make them each policy's frozen KL reference (:meth:`Policy.reset_reference`)."""
    file = Path(path)
    if file.is_dir():
        file = file / "weights.pt"
    if not file.is_file():
        raise WarmStartNotFoundError(f"sft.init_from: no warm-start weights at {file} (a finished warm start writes "
                                "<output_dir>/sft/weights.pt)")
    state = torch.load(file, map_location="cpu", weights_only=False)
    missing = sorted(set(policies.names()) - set(state))
    if missing:
        raise ValueError(f"sft.init_from: {file} has no weights for policies {missing} (it has {sorted(state)})")
    for name in policies.names():
        policies[name].load_trainable_state_dict(state[name])
        policies[name].reset_reference()
    return file


class WarmStart:
    """The ``sft`` stage of a run: owns its optimizers, stream position and directory.

    Args:
        cfg: The run configuration (its ``sft`` section).
        policies: The run's policies (trained in place).
        agent_to_policy: Agent id → policy name (the learning agents).
        out: The run's output directory (the stage writes ``out/sft``).
        chat_template_kwargs: As the rollout's engine.
        bf16: Autocast the forward passes to bfloat16 (the run's ``train.bf16``, resolved).
        env_agents: The environment's agents (an ``sft.data`` example naming another is an
            error; one naming an agent without a learning policy is skipped and counted in
            ``sft/skipped_no_policy``).
    """

    def __init__(self, cfg: Any, policies: PolicySet, agent_to_policy: Mapping[str, str], out: Path,
                 chat_template_kwargs: Mapping[str, Any] | None = None, bf16: bool = False,
                 env_agents: Sequence[str] | None = None) -> None:
        self.cfg = cfg
        self.env_agents = list(env_agents) if env_agents is not None else None
        self.bf16 = bool(bf16)
        self.s = cfg.sft
        self.policies = policies
        self.agent_to_policy = dict(agent_to_policy)
        self.dir = Path(out) / "sft"
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.step = 0
        self.consumed = 0
        self.skipped_too_long = 0
        self.skipped_no_policy = 0
        self.optimizers = {
            p.name: torch.optim.AdamW(p.trainable_parameters(), lr=self.s.lr, weight_decay=self.s.weight_decay)
            for p in policies
        }

    @property
    def done(self) -> bool:
        return (self.dir / "done").is_file()

    def policy_of(self, example: Mapping[str, Any]) -> str | None:
        """The policy that learns an example: its ``agent``'s (None when that agent has no policy,
        e.g. a fixed opponent), or the only policy when the example names no agent."""
        agent = example.get("agent")
        if agent is None:
            names = self.policies.names()
            if len(names) != 1:
                raise ValueError(f"sft: an example names no agent, and the run has several policies {names}: "
                                 "give each example an \"agent\" key")
            return names[0]
        return self.agent_to_policy.get(agent)

    def batches(self, stream: Iterator[dict[str, Any]]) -> Iterator[dict[str, list[tuple[list[int], list[int]]]]]:
        """Per step: policy → ``batch_size`` encoded examples (the stream routed by agent; a step is
        complete when every policy that has examples has its batch)."""
        wanted = set(self.policies.names())
        while True:
            batch: dict[str, list[tuple[list[int], list[int]]]] = defaultdict(list)
            seen_without = 0
            for example in stream:
                self.consumed += 1
                policy = self.policy_of(example)
                if policy is None or policy not in wanted:
                    self.skipped_no_policy += 1
                    seen_without += 1
                    if seen_without > 10_000:
                        raise ValueError("sft: 10,000 examples in a row belong to no learning agent's policy")
                    continue
                seen_without = 0
                if len(batch[policy]) >= self.s.batch_size:
                    continue  # this policy's batch is full; the example is spent (kept deterministic)
                tokenizer = self.policies[policy].tokenizer
                ids, labels = encode_example(tokenizer, example["messages"], self.chat_template_kwargs)
                if len(ids) > self.s.max_length:
                    self.skipped_too_long += 1
                    continue
                batch[policy].append((ids, labels))
                if all(len(batch[p]) >= self.s.batch_size for p in self._expected(batch)):
                    break
            else:
                return
            yield dict(batch)

    def _expected(self, batch: Mapping[str, list[Any]]) -> set[str]:
        """The policies a step waits for: with generated demonstrations filtered by agent only,
        the policies of the recorded agents; otherwise (a file, a role filter) the policies seen
        in this step so far."""
        s = self.s
        if s.data or s.roles is not None:
            return set(batch)
        return {p for a, p in self.agent_to_policy.items() if s.agents is None or a in s.agents}

    def loss_and_step(self, policy: str, examples: Sequence[tuple[list[int], list[int]]], lr: float) -> dict[str, float]:
        """One optimizer step of ``policy`` on ``examples``: mean cross-entropy over all their
        action tokens (micro-batches accumulate, weighted by their token counts)."""
        pol = self.policies[policy]
        opt = self.optimizers[policy]
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        total_tokens = sum(sum(1 for t in labels if t != IGNORE_INDEX) for _, labels in examples)
        pad = pol.tokenizer.pad_token_id if pol.tokenizer.pad_token_id is not None else 0
        loss_sum, correct = 0.0, 0
        with pol.activated() as model:
            model.train()
            try:
                for i in range(0, len(examples), self.s.micro_batch_size):
                    chunk = [split_example(ids, labels) for ids, labels in examples[i : i + self.s.micro_batch_size]]
                    # The rollout's layout (prompts left-padded, positions counting real tokens):
                    # the output layer runs on the action's positions only, not the prompt's.
                    batch = pack_sequences([p for p, _ in chunk], [a for _, a in chunk], pad).to(pol.device)
                    with self._autocast(pol.device):
                        logits = completion_logits(model, batch)
                    logits = logits.float()
                    target = batch.completion_ids.masked_fill(batch.completion_mask == 0, IGNORE_INDEX)
                    loss = torch.nn.functional.cross_entropy(
                        logits.reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")
                    (loss / max(total_tokens, 1)).backward()
                    loss_sum += float(loss.detach())
                    keep = target != IGNORE_INDEX
                    correct += int((logits.argmax(-1)[keep] == target[keep]).sum())
            finally:
                model.eval()
        params = pol.trainable_parameters()
        grad_norm = 0.0
        if self.s.max_grad_norm is not None:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.s.max_grad_norm))
        opt.step()
        opt.zero_grad(set_to_none=True)
        n = max(total_tokens, 1)
        return {f"sft/{policy}/loss": loss_sum / n, f"sft/{policy}/token_accuracy": correct / n,
                f"sft/{policy}/tokens": float(total_tokens), f"sft/{policy}/grad_norm": grad_norm}

    def _autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """bfloat16 autocast of the forward pass when the run's ``train.bf16`` resolved to on (as the
        RL learner's); the loss is taken in float32 either way."""
        return bf16_autocast(device, self.bf16)

    def lr_at(self, step: int) -> float:
        if self.s.warmup_steps > 0 and step < self.s.warmup_steps:
            return self.s.lr * (step + 1) / self.s.warmup_steps
        return self.s.lr

    # ------------------------------------------------------------------ run, save, resume
    def run(self, resume: bool = True, log: Any = None) -> dict[str, float]:
        """Train up to ``sft.steps`` (continuing from the latest checkpoint when ``resume``);
        write ``weights.pt`` and ``done``; return the last step's metrics."""
        if resume:
            ckpt = latest_checkpoint(self.dir / "checkpoints")
            if ckpt is not None:
                self._restore(load_checkpoint(ckpt, required=("policies", "optimizers", "state")))
        logger = MetricsLogger(self.dir / "metrics.jsonl", keep_lines=self.step if resume else 0)
        metrics: dict[str, float] = {}
        try:
            stream = example_stream(self.cfg, skip=self.consumed, agents=self.env_agents)
            batches = self.batches(stream)
            while self.step < self.s.steps:
                t0 = time.perf_counter()
                batch = next(batches, None)
                if batch is None:
                    raise ValueError("sft: the demonstrations ran out")
                metrics = {}
                for policy in sorted(batch):
                    metrics.update(self.loss_and_step(policy, batch[policy], self.lr_at(self.step)))
                self.step += 1
                metrics.update({"sft/step_s": time.perf_counter() - t0, "sft/examples_consumed": float(self.consumed),
                                "sft/skipped_too_long": float(self.skipped_too_long),
                                "sft/skipped_no_policy": float(self.skipped_no_policy), "sft/lr": self.lr_at(self.step - 1)})
                logger.log(self.step, metrics)
                if log is not None:
                    log(self.step, metrics)
                every = self.s.save_every
                if self.step == self.s.steps or (every > 0 and self.step % every == 0):
                    self.save()
        finally:
            logger.close()
        torch.save({p.name: p.trainable_state_dict() for p in self.policies}, self.dir / "weights.pt")
        (self.dir / "done").write_text(f"{self.step} steps\n")
        return metrics

    def save(self) -> Path:
        path = save_checkpoint(self.dir / "checkpoints", self.step, {
            "policies": {p.name: p.trainable_state_dict() for p in self.policies},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "state": {"step": self.step, "consumed": self.consumed, "skipped_too_long": self.skipped_too_long,
                      "skipped_no_policy": self.skipped_no_policy,
                      # (what a --resume of a run with no RL checkpoint yet is checked against)
                      "config": config_to_dict(self.cfg) if dataclasses.is_dataclass(self.cfg) else None},
        })
        prune_checkpoints(self.dir / "checkpoints", max(1, self.cfg.run.keep_checkpoints))
        return path

    def _restore(self, ckpt: Mapping[str, Any]) -> None:
        for name, sd in ckpt["policies"].items():
            self.policies[name].load_trainable_state_dict(sd)
        for name, sd in ckpt["optimizers"].items():
            self.optimizers[name].load_state_dict(sd)
        state = ckpt["state"]
        self.step = int(state["step"])
        self.consumed = int(state["consumed"])
        self.skipped_too_long = int(state.get("skipped_too_long", 0))
        self.skipped_no_policy = int(state.get("skipped_no_policy", 0))
