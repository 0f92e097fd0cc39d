"""Asynchronous training (rollout.async.max_staleness ≥ 1): the staleness bound, versions, whole
groups, per-adapter syncs, checkpoints of the in-flight queue, and the trainer end to end."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch

from llm_trainers.asynchronous import AsyncRollout, PublishedWeights, StalenessError, staleness_metrics
from llm_trainers.config import load_config
from llm_trainers.rollout import RolloutResult, TrainRecord
from llm_trainers.trainer import Trainer


# ---------------------------------------------------------------------------- the producer alone
def _record(policy: str, step: int) -> TrainRecord:
    return TrainRecord(policy=policy, agent=policy, role=policy, turn=0, group=("g", step), prompt_ids=[1],
                       completion_ids=[2], logprobs=[-0.5], reward=0.0, final_reward=None, slot=0,
                       episode_id=str(step), index=0)


class _Pipeline:
    """A producer over a fake rollout, and what it saw: the run's version when each rollout started
    and the weights loaded before it."""

    def __init__(self, k: int, names=("a", "b"), gen_s: float = 0.0, end: int = 8, **kw) -> None:
        self.names = list(names)
        self.gen_s = gen_s
        self.started_at: dict[int, int] = {}
        self.loads: list[dict[str, object]] = []
        self.rng_state = {"draws": 0}
        self.producer = AsyncRollout(self.names, k, collect=self.collect, load_weights=self.load,
                                     engine_state=(lambda: dict(self.rng_state), self.rng_state.update),
                                     start_step=kw.get("start", 0), end_step=end)

    def collect(self, step: int) -> RolloutResult:
        self.started_at[step] = self.producer.weights.version
        time.sleep(self.gen_s)
        self.rng_state["draws"] += 1
        return RolloutResult([_record(n, step) for n in self.names], [{"success": 0.0}], None)

    def load(self, states):
        self.loads.append(dict(states))
        return {}


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("slow_learner", [False, True])
def test_no_rollout_is_older_than_the_bound(k, slow_learner):
    pipe = _Pipeline(k, end=10)
    p = pipe.producer
    lags = []
    try:
        for step in range(10):
            item, _ = p.take(step)
            lags.append(step - item.version)
            assert 0 <= step - item.version <= k
            # the producer never started a rollout before version step − k was published
            assert pipe.started_at[step] >= step - k
            for rec in item.result.records:
                assert rec.policy_version == item.policy_versions[rec.policy]
            if slow_learner:  # the update outlasts generation: the producer makes all it may first
                p.quiesce()
            p.publish(step + 1, {n: {"w": step + 1} for n in pipe.names})
    finally:
        p.close()
    if slow_learner:
        # a slow learner: the producer runs ahead as far as the bound lets it, and no further
        assert max(lags) == k


def test_the_producer_waits_at_the_bound():
    pipe = _Pipeline(2, end=10)
    p = pipe.producer
    try:
        p.take(0)
        p.quiesce()  # version 0 allows steps up to 2: 1 and 2 are made, then it waits
        assert sorted(pipe.started_at) == [0, 1, 2]
        assert p.state.next_step == 3 and p.waiting
        p.publish(1, {"a": {}})
        p.take(1)
        p.quiesce()
        assert sorted(pipe.started_at) == [0, 1, 2, 3]
    finally:
        p.close()


def test_policies_are_loaded_and_versioned_independently():
    pipe = _Pipeline(1, end=6)
    p = pipe.producer
    try:
        for step in range(6):
            item, _ = p.take(step)
            versions = {r.policy: r.policy_version for r in item.result.records}
            assert versions["b"] == 0  # b never changed: never reloaded, version 0
            assert versions["a"] == max(0, step - 1)
            p.quiesce()  # the next rollout is made before this update ends (k = 1: at version step)
            p.publish(step + 1, {"a": {"w": step + 1}})  # only a's adapter was updated
    finally:
        p.close()
    assert pipe.loads and all(set(load) == {"a"} for load in pipe.loads)
    assert [load["a"]["w"] for load in pipe.loads] == [1, 2, 3, 4]  # each a newer version, loaded once


def test_staleness_metrics_use_each_policy_version():
    recs = [_record("a", 0), _record("a", 0), _record("b", 0)]
    recs[0].policy_version, recs[1].policy_version, recs[2].policy_version = 3, 4, 2
    m = staleness_metrics(recs, {"a": 5, "b": 2})
    assert m == {"async/staleness_mean": pytest.approx((2 + 1 + 0) / 3), "async/staleness_max": 2.0}


def test_published_weights_keep_only_changed_policies():
    w = PublishedWeights(["a", "b"])
    w.publish(1, {"a": {"x": 1}})
    assert w.version == 1 and w.policy_versions == {"a": 1, "b": 0}
    assert set(w.newer_than({"a": 0, "b": 0})) == {"a"}
    assert w.newer_than({"a": 1, "b": 0}) == {}


def test_checkpoint_state_keeps_the_queue_and_a_smaller_bound_drops_it():
    pipe = _Pipeline(2, end=10)
    p = pipe.producer
    p.take(0)
    p.quiesce()  # steps 1 and 2 made at version 0
    p.publish(1, {"a": {}, "b": {}})
    state = p.state_dict()  # waits for the rollouts the bound allows: steps 1, 2, 3
    p.close()
    assert [r["step"] for r in state["queue"]] == [1, 2, 3]
    assert [r["version"] for r in state["queue"]] == [0, 0, 1]
    assert state["next_step"] == 4 and state["engine"] == {"draws": 4}

    # resumed with the same bound: the same queue, the producer continues at step 4
    again = _Pipeline(2, end=10, start=1)
    again.producer.weights.version = 1
    assert again.producer.load_state_dict(state) == 0
    assert again.rng_state == {"draws": 4}
    item, _ = again.producer.take(1)
    assert item.version == 0 and [r.policy_version for r in item.result.records] == [0, 0]
    again.producer.close()

    # resumed with max_staleness 1: step 2, made at version 0, would be trained on at version 2:
    # it is dropped, and step 3 after it (the producer makes both again)
    tighter = _Pipeline(1, end=10, start=1)
    tighter.producer.weights.version = 1
    assert tighter.producer.load_state_dict(state) == 2
    assert [r.step for r in tighter.producer.state.queue] == [1]
    assert tighter.producer.state.next_step == 2
    tighter.producer.close()


def test_a_producer_failure_reaches_the_learner():
    def boom(step):
        raise ValueError("engine on fire")

    p = AsyncRollout(["a"], 1, collect=boom, load_weights=lambda s: {}, engine_state=(dict, lambda s: None),
                     start_step=0, end_step=3)
    with pytest.raises(RuntimeError, match="engine on fire"):
        p.take(0)
    p.close()


def test_the_taking_side_refuses_a_rollout_beyond_the_bound():
    p = AsyncRollout(["a"], 1, collect=lambda s: RolloutResult([], [], None), load_weights=lambda s: {},
                     engine_state=(dict, lambda s: None), start_step=0, end_step=3)
    p.load_state_dict({"policy_versions": {"a": 0}, "next_step": 3, "engine": {},
                       "queue": [{"step": 0, "version": 0, "policy_versions": {"a": 0}, "push_s": 0.0, "blocked_s": 0.0,
                                  "records": [], "episodes": [], "generate_s": 0.0, "env_s": 0.0,
                                  "generated_tokens": 0, "infra_failures": []}]})
    p.weights.version = 2  # a learner two versions ahead of the queued rollout
    p.state.queue[0].step = 2
    with pytest.raises(StalenessError):
        p.take(2)
    p.close()


def test_config_validation():
    with pytest.raises(ValueError, match="max_staleness"):
        load_config(None, ["rollout.async.max_staleness=-1"])
    with pytest.raises(ValueError, match="correction"):
        load_config(None, ["rollout.async.correction=vtrace"])
    with pytest.raises(ValueError, match="recompute_old_logprobs"):
        load_config(None, ["rollout.async.correction=tis", "algorithm.recompute_old_logprobs=false"])
    # the vLLM engine keeps its own weights: asynchronous in one process too (no copy of the policies)
    load_config(None, ["rollout.async.max_staleness=1", "rollout.engine=vllm"])
    with pytest.raises(ValueError, match="sleep must be false"):
        load_config(None, ["rollout.async.max_staleness=1", "rollout.engine=vllm", "rollout.vllm.sleep=true"])
    cfg = load_config(None, ["rollout.async={max_staleness: 2, correction: decoupled_ppo, is_cap: null}"])
    assert cfg.rollout.asynchronous.max_staleness == 2 and cfg.rollout.asynchronous.is_cap is None


# ---------------------------------------------------------------------------- the trainer
BASE = [
    "model.path=tiny:llm/Signalling-v0",
    "model.device=cpu",
    "rollout.max_new_tokens=1",
    "rollout.k=4",
    "env.num_envs=6",
    "run.steps=3",
    "run.eval_every=-1",
    "run.eval_at_start=false",
    "run.save_every=1",
    "run.progress=false",
    "run.tensorboard=false",
    "run.export_final=false",
    "train.lr=5e-3",
    "train.micro_batch_size=8",
]
L2 = ["model.level=L2", "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}"]


def _params(trainer):
    return {f"{p.name}/{k}": v for p in trainer.policies for k, v in p.trainable_state_dict().items()}


def _run(tmp, overrides, steps=None):
    trainer = Trainer(load_config(None, [*BASE, *overrides, f"run.output_dir={tmp}"]))
    rows = []
    for _ in range(steps or trainer.cfg.run.steps):
        rows.append(trainer.train_step())
    return trainer, rows


def test_first_step_is_the_synchronous_one_and_later_ones_lag(tmp_path):
    sync, _ = _run(tmp_path / "sync", [], steps=1)
    after_one_sync = _params(sync)
    sync.train_step()
    after_two_sync = _params(sync)
    sync.close()
    asy, rows = _run(tmp_path / "async", ["rollout.async.max_staleness=1"], steps=1)
    # rollout 0 is generated at version 0 by an engine seeded as the synchronous one: same samples,
    # same update
    after_one = _params(asy)
    for key, value in after_one_sync.items():
        assert torch.equal(value, after_one[key]), key
    rows.append(asy.train_step())  # rollout 1 was generated at version 0 while update 0 ran
    after_two = _params(asy)
    asy.close()
    assert rows[0]["async/version_lag"] == 0.0 and rows[1]["async/version_lag"] == 1.0
    assert rows[1]["async/staleness_max"] == 1.0
    assert any(not torch.equal(after_two_sync[k], after_two[k]) for k in after_two)


@pytest.mark.parametrize("k", [1, 2])
def test_async_run_records_versions_and_keeps_groups_whole(tmp_path, k):
    seen: list[tuple[int, TrainRecord]] = []
    trainer = Trainer(load_config(None, [*BASE, "run.steps=4", f"rollout.async={{max_staleness: {k}, correction: tis}}",
                                         f"run.output_dir={tmp_path}"]))
    original = trainer._collect

    def spy(seeds, engine=None, step=None):
        res = original(seeds, engine, step)
        assert threading.current_thread().name == "async-rollout"  # generated off the learner's thread
        return res

    trainer._collect = spy
    rows = []
    for step in range(4):
        item, _ = trainer.async_rollout.take(step)
        trainer.async_rollout.state.queue.insert(0, item)  # put it back for train_step to take
        seen.extend((step, r) for r in item.result.records)
        rows.append(trainer.train_step())
    trainer.close()
    for step, row in enumerate(rows):
        assert row["async/staleness_max"] <= k and row["async/version_lag"] <= min(step, k)
        assert 0.0 < row["train/shared/is_ratio_mean"] and row["train/shared/is_clip_frac"] <= 1.0
    groups: dict = {}
    for step, rec in seen:
        groups.setdefault((step, rec.group), []).append(rec)
    tree = [g for key, g in groups.items() if key[1][0] == "tree"]
    assert tree and all(len(g) == 4 for g in tree)  # whole: all k candidates
    for g in tree:
        assert len({r.policy_version for r in g}) == 1  # one policy version per group
        assert len({tuple(r.prompt_ids) for r in g}) == 1


def test_l2_adapters_sync_independently(tmp_path):
    """Only the speaker trains: its adapter is pushed to the producer's copy after each update, the
    listener's never is (its records keep version 0)."""
    trainer = Trainer(load_config(None, [*BASE, *L2, "env.train_agents=[speaker]", "rollout.async.max_staleness=1",
                                         "run.steps=5", f"run.output_dir={tmp_path}"]))
    producer = trainer.async_rollout
    loads: list[list[str]] = []
    load = producer.load_weights

    def spy(states):
        loads.append(sorted(states))
        return load(states)

    producer.load_weights = spy
    rows = [trainer.train_step() for _ in range(3)]
    producer.quiesce()  # version 3 allows the rollout of step 4: made with speaker version 3
    assert producer.current_versions() == {"speaker": 3, "listener": 0}
    assert producer.state.loaded == {"speaker": 3, "listener": 0}
    assert loads == [["speaker"]] * 3
    queued = {item.step: {r.policy: r.policy_version for r in item.result.records} for item in producer.state.queue}
    assert queued == {3: {"speaker": 2, "listener": 0}, 4: {"speaker": 3, "listener": 0}}
    for name in ("speaker", "listener"):  # the copy holds the learner's newest weights of both
        learner, copy = trainer.policies[name].trainable_state_dict(), trainer.async_policies[name].trainable_state_dict()
        assert all(torch.equal(learner[k], copy[k]) for k in learner), name
    trainer.close()
    assert all("train/listener/loss" not in row and "train/speaker/loss" in row for row in rows)


def test_async_resume_gives_the_uninterrupted_run(tmp_path):
    """Stopped after step 2 and resumed, a k = 1 run trains on the checkpointed in-flight rollouts
    and ends with the uninterrupted run's weights."""
    args = [*L2, "rollout.async={max_staleness: 1, correction: tis}", "run.steps=5"]
    full = Trainer(load_config(None, [*BASE, *args, f"run.output_dir={tmp_path / 'a'}"]))
    full.train()
    expected = _params(full)
    full.close()

    cut = Trainer(load_config(None, [*BASE, *args, f"run.output_dir={tmp_path / 'b'}"]))
    cut.train(until_step=2)
    cut.close()
    state = torch.load(tmp_path / "b" / "checkpoints" / "step_00000002" / "state.pt", weights_only=False)
    queue = state["async"]["queue"]
    assert [r["step"] for r in queue] == [2, 3] and [r["version"] for r in queue] == [1, 2]

    resumed = Trainer(load_config(None, [*BASE, *args, f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    assert resumed.step == 2 and [r.step for r in resumed.async_rollout.state.queue] == [2, 3]
    resumed.train()
    got = _params(resumed)
    resumed.close()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    rows_a = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b]
    for a, b in zip(rows_a, rows_b):
        for key in a:
            if key.startswith(("rollout/", "train/", "async/staleness", "async/version")):
                assert a[key] == pytest.approx(b[key], abs=1e-6), key


def test_a_finished_run_extended_by_a_resume_gives_the_uninterrupted_run(tmp_path):
    """A k = 1 run trained to its end (run.steps=2) and resumed with run.steps=3: its final
    checkpoint was written with the producer stopped at the end, so step 3's rollout was made
    after the resume with version 2 where the uninterrupted run used version 1. The run now makes
    the rollout a longer run would make during its last update, and its final checkpoint keeps it."""
    args = ["rollout.async={max_staleness: 1, correction: tis}"]
    full = Trainer(load_config(None, [*BASE, *args, f"run.output_dir={tmp_path / 'a'}"]))
    full.train()
    expected = _params(full)
    full.close()

    short = Trainer(load_config(None, [*BASE, *args, "run.steps=2", f"run.output_dir={tmp_path / 'b'}"]))
    short.train()
    short.close()
    state = torch.load(tmp_path / "b" / "checkpoints" / "step_00000002" / "state.pt", weights_only=False)
    assert [(r["step"], r["version"]) for r in state["async"]["queue"]] == [(2, 1)]

    longer = Trainer(load_config(None, [*BASE, *args, f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    longer.train()
    got = _params(longer)
    longer.close()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    lags = [[json.loads(x).get("async/version_lag") for x in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
            for d in ("a", "b")]
    assert lags[0] == lags[1] == [0.0, 1.0, 1.0]


def test_a_synchronous_checkpoint_resumes_asynchronously(tmp_path):
    sync = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path}"]))
    sync.train(until_step=1)
    sync.close()
    resumed = Trainer(load_config(None, [*BASE, "rollout.async.max_staleness=1", f"run.output_dir={tmp_path}"]),
                      resume=True)
    assert resumed.step == 1 and resumed.async_rollout.state.queue == []
    row = resumed.train_step()
    assert row["async/version_lag"] == 0.0  # the first rollout after the resume is made with the resumed weights
    resumed.close()


def test_evaluation_runs_between_two_rollouts(tmp_path):
    """Evaluation during an asynchronous run holds the producer's engine lock: the HF engines of
    both threads sample from torch's global generator, which must not be shared mid-call."""
    trainer = Trainer(load_config(None, [*BASE, "rollout.async.max_staleness=1", "run.eval_every=1",
                                         "run.eval_episodes=4", "run.eval_at_start=true", f"run.output_dir={tmp_path}"]))
    producer = trainer.async_rollout
    held: list[bool] = []
    evaluate = trainer._evaluate

    def spy(episodes=None):
        held.append(producer.engine_lock.locked())
        return evaluate(episodes)

    trainer._evaluate = spy
    trainer.train()
    trainer.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and all("eval/success" in r for r in rows)
    assert held == [True] * 4
