"""The training loop on a local Ray instance: a shipped CPU config end to end, a lost environment
worker replayed without loss, and resume."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch", reason="the trainer tests need the 'train' extra")

from llm_trainers import make_trainer  # noqa: E402
from llm_trainers.config import load_config  # noqa: E402

SMALL = [
    "run.steps=2", "run.eval_every=2", "run.eval_at_start=false", "run.eval_episodes=4", "run.save_every=1",
    "run.progress=false", "run.tensorboard=false", "run.export_final=true",
    "env.num_envs=6", "env.kwargs={rounds: 2, listener_local_weight: 1.0}", "rollout.k=2", "rollout.max_new_tokens=2",
    "train.micro_batch_size=8",
]


def _params(trainer):
    return {f"{p.name}/{k}": v for p in trainer.policies for k, v in p.trainable_state_dict().items()}


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _same_rows(a, b, tol=0.0):
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b):
        for key in x:
            if key.startswith(("rollout/", "eval/", "train/", "tokens/")):
                assert y[key] == pytest.approx(x[key], abs=tol, rel=tol), key


@pytest.mark.slow
def test_shipped_cpu_config_runs_distributed_and_resumes(local_ray, tiny_signalling_model, tmp_path):
    """Every part on Ray (2 env workers, 1 engine, 2 learner ranks); stopped after step 1 and
    resumed, the run ends where the uninterrupted one does."""
    common = ["signalling_at_grpo_l2_ray", *SMALL, f"model.path={tiny_signalling_model}"]
    full = make_trainer(load_config(common[0], [*common[1:], f"run.output_dir={tmp_path / 'a'}"]))
    assert type(full).__name__ == "DistributedTrainer"
    try:
        full.train()
        expected = _params(full)
    finally:
        full.close()
    placement = json.loads((tmp_path / "a" / "placement.json").read_text())
    assert len(placement["actual"]["learner"]) == 2 and len(placement["actual"]["env_workers"]) == 2
    assert len(placement["actual"]["engines"]) == 1
    exported = json.loads((tmp_path / "a" / "final" / "policies.json").read_text())
    assert set(exported["policies"]) == {"speaker", "listener"}
    rows = _rows(tmp_path / "a")
    assert [r["step"] for r in rows] == [1, 2] and "eval/success" in rows[-1]
    # Each policy trained, or had records whose advantages were all 0 (then no update runs).
    assert all(r.get(f"train/{p}/samples", 0) > 0 or r[f"train/{p}/skipped_zero_advantage"] == 1.0
               for r in rows for p in ("speaker", "listener"))

    # A crash right after step 1: its checkpoint is the latest (a copy of the run, pointer moved back).
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "checkpoints" / "latest").write_text("step_00000001\n")
    shutil.rmtree(tmp_path / "b" / "final")
    resumed = make_trainer(load_config(common[0], [*common[1:], f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    try:
        assert resumed.step == 1
        resumed.train()
        got = _params(resumed)
    finally:
        resumed.close()
    for k in expected:
        torch.testing.assert_close(got[k], expected[k], atol=1e-6, rtol=1e-5, msg=k)
    _same_rows(rows, _rows(tmp_path / "b"), tol=1e-5)


LIGHT = [*SMALL, "resources={env_workers: 2, cpus_per_env_worker: 0.5}", "model.level=L1", "train.lr=1e-2"]


def _kill_env_worker_at(trainer, call):
    """Kill environment worker 1 when the engine is asked for its ``call``-th batch (mid-rollout)."""
    inner = trainer.engine.generate_multi
    count = {"n": 0}

    def generate_multi(*args, **kwargs):
        count["n"] += 1
        if count["n"] == call:
            import ray

            ray.kill(trainer.envs.actors[1], no_restart=True)
        return inner(*args, **kwargs)

    trainer.engine.generate_multi = generate_multi


def test_a_lost_environment_worker_is_replaced_and_the_step_replayed_exactly(local_ray, tiny_signalling_model,
                                                                             tmp_path):
    base = [*LIGHT, f"model.path={tiny_signalling_model}"]
    clean = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'a'}"]))
    try:
        clean.train()
        expected = _params(clean)
    finally:
        clean.close()

    hit = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'b'}"]))
    try:
        _kill_env_worker_at(hit, 6)  # step 2 has waves 5-8 (2 rounds x 2 agents)
        hit.train()
        assert hit.replays == 1
        got = _params(hit)
    finally:
        hit.close()
    for k in expected:  # the replayed step drew the same samples: bit-identical
        assert torch.equal(got[k], expected[k]), k
    _same_rows(_rows(tmp_path / "a"), _rows(tmp_path / "b"))

    # Without replays the step fails with what to do, nothing of it is kept, and --resume finishes
    # the run as if nothing had happened.
    stop = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'c'}", "resources.max_step_retries=0"]))
    try:
        _kill_env_worker_at(stop, 6)
        with pytest.raises(RuntimeError, match=r"(?s)environment worker 1 .*step_00000001.*--resume"):
            stop.train()
    finally:
        stop.close()
    assert [r["step"] for r in _rows(tmp_path / "c")] == [1]
    resumed = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'c'}"]), resume=True)
    try:
        resumed.train()
        got = _params(resumed)
    finally:
        resumed.close()
    for k in expected:
        assert torch.equal(got[k], expected[k]), k
    _same_rows(_rows(tmp_path / "a"), _rows(tmp_path / "c"))


def test_a_warm_start_from_init_from_reaches_the_engines_the_learner_ranks_and_their_kl_reference(
    local_ray, tiny_signalling_model, tmp_path
):
    # The engine actors and the learner ranks build the model's own weights: they sampled and
    # trained from the weights before the warm start (and after one update the run had lost it).
    from llm_trainers.batching import completion_logprobs, pack_sequences

    base = [*SMALL, f"model.path={tiny_signalling_model}", "run.threads=1", "train.kl_loss_coef=0.1"]
    local = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'local'}"]))
    try:
        generator = torch.Generator().manual_seed(0)
        warm = {p.name: {k: v + 0.3 * torch.randn(v.shape, generator=generator) for k, v in p.trainable_state_dict().items()}
                for p in local.policies}
        (tmp_path / "warm").mkdir()
        torch.save(warm, tmp_path / "warm" / "weights.pt")
        policy = local.policies.names()[0]
        prompt = local.engine.encode(policy, {"instruction": "You are the speaker.", "prompt": "Round 1 of 2. Target: red"})
    finally:
        local.close()
    resources = ("resources={engines: 1, gpus_per_engine: 0, cpus_per_engine: 0.5, learner_world_size: 2, "
                 "gpus_per_learner: 0, cpus_per_learner: 0.5}")
    trainer = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'ray'}", f"sft.init_from={tmp_path / 'warm'}",
                                              resources]))
    try:
        mirror = trainer.policies[policy]
        assert all(torch.equal(v, warm[policy][k]) for k, v in mirror.trainable_state_dict().items())
        samples = trainer.engine.generate_multi([(policy, prompt)], n=4)[0]
        completions = [s.token_ids for s in samples]
        batch = pack_sequences([prompt] * len(samples), completions, mirror.tokenizer.pad_token_id)
        with torch.no_grad(), mirror.activated() as model:
            expected, _ = completion_logprobs(model, batch)
        learner = trainer.learner.logprobs(policy, [prompt] * len(samples), completions)
        reference = trainer.learner.logprobs(policy, [prompt] * len(samples), completions, reference=True)
        for i, sample in enumerate(samples):
            n = len(sample.token_ids)
            torch.testing.assert_close(torch.tensor(sample.logprobs), expected[i, :n], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(learner[i], expected[i, :n], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(reference[i], expected[i, :n], atol=1e-4, rtol=1e-4)
    finally:
        trainer.close()
