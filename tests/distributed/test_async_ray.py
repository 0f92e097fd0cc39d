"""Asynchronous training in the Ray layout: the producer drives the engine actors and the
environment workers from a thread of the driver while the learner ranks update; evaluation takes
the engines between two rollouts; the in-flight queue survives a resume."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch", reason="the trainer tests need the 'train' extra")

from llm_trainers import make_trainer  # noqa: E402
from llm_trainers.config import load_config  # noqa: E402

SMALL = [
    "run.steps=3", "run.eval_every=3", "run.eval_at_start=false", "run.eval_episodes=4", "run.save_every=1",
    "run.keep_checkpoints=3",
    "run.progress=false", "run.tensorboard=false", "run.export_final=false",
    "env.num_envs=6", "env.kwargs={rounds: 2, listener_local_weight: 1.0}", "rollout.k=2", "rollout.max_new_tokens=2",
    "train.micro_batch_size=8", "rollout.async={max_staleness: 1, correction: tis}",
]


def _params(trainer):
    return {f"{p.name}/{k}": v for p in trainer.policies for k, v in p.trainable_state_dict().items()}


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_async_ray_layout_trains_evaluates_and_resumes(local_ray, tiny_signalling_model, tmp_path):
    common = ["signalling_at_grpo_l2_ray", *SMALL, f"model.path={tiny_signalling_model}"]
    full = make_trainer(load_config(common[0], [*common[1:], f"run.output_dir={tmp_path / 'a'}"]))
    assert type(full).__name__ == "DistributedTrainer" and full.async_shares_engine
    loads: list[list[str]] = []
    load = full.async_rollout.load_weights

    def spy(states):
        assert not full.async_rollout.engine_lock.acquire(blocking=False)  # never during a rollout
        loads.append(sorted(states))
        return load(states)

    full.async_rollout.load_weights = spy
    try:
        full.train()
        expected = _params(full)
    finally:
        full.close()
    rows = _rows(tmp_path / "a")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["async/version_lag"] for r in rows] == [0.0, 1.0, 1.0]
    assert all(r["async/staleness_max"] <= 1 for r in rows)
    # the IS ratio is reported whenever the speaker trained (a step whose advantages are all zero
    # is skipped: no forward pass, no ratio)
    assert all(
        r.get("train/speaker/is_ratio_max", 0) > 0 or r["train/speaker/skipped_zero_advantage"] == 1.0 for r in rows
    )
    assert any(r.get("train/speaker/is_ratio_max", 0) > 0 for r in rows)
    assert "eval/success" in rows[-1]
    # rollouts 0 and 1 are made at version 0 (nothing to load), rollout 2 loads the adapters of
    # version 1, and rollout 3 (beyond the last step, kept by the final checkpoint for a resume
    # that extends the run) those of version 2; the evaluation after step 3 loads version 3 first
    # (every policy whose weights moved is reloaded: one whose advantages were all zero still took
    # its optimizer steps on zero gradients, which move it once AdamW has momentum)
    def trained(row):
        return {p for p in ("listener", "speaker")
                if row.get(f"train/{p}/samples", 0) > 0 and row.get(f"train/{p}/weights_moved", 1.0) > 0}

    assert loads == [sorted(trained(row)) for row in rows if trained(row)]
    assert loads

    # resumed from step 1: the checkpoint's queue (the rollouts of steps 1 and 2) is trained on
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "checkpoints" / "latest").write_text("step_00000001\n")
    resumed = make_trainer(load_config(common[0], [*common[1:], f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    try:
        assert resumed.step == 1 and [r.step for r in resumed.async_rollout.state.queue] == [1, 2]
        resumed.train()
        got = _params(resumed)
    finally:
        resumed.close()
    for k in expected:
        torch.testing.assert_close(got[k], expected[k], atol=1e-6, rtol=1e-5, msg=k)
    for a, b in zip(rows, _rows(tmp_path / "b")):
        for key in a:
            if key.startswith(("rollout/", "train/", "async/version", "async/staleness")):
                assert b[key] == pytest.approx(a[key], abs=1e-5, rel=1e-5), key


@pytest.mark.slow
def test_a_lost_environment_worker_keeps_every_finished_steps_checkpoint_and_the_run_resumes(
    local_ray, tiny_signalling_model, tmp_path
):
    # The producer's failure was re-raised by the checkpoint of a step the learner had finished:
    # no checkpoint was written, and the advice (--resume, for "step 2" while the producer made
    # step 3's rollout) met "no checkpoint". Now every finished step is checkpointed, with the
    # producer's position and its sampling state from before the failed rollout.
    import os
    import signal

    ray = local_ray
    base = [*SMALL, f"model.path={tiny_signalling_model}", "train.lr=1e-2", "run.eval_every=-1",
            "resources={engines: 1, gpus_per_engine: 0, cpus_per_engine: 0.5, env_workers: 2, cpus_per_env_worker: 0.5}"]
    clean = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'clean'}"]))
    try:
        clean.train()
    finally:
        clean.close()

    hit = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'hit'}", "resources.max_step_retries=0"]))
    inner, calls = hit.engine.generate_multi, {"n": 0}
    pid = int(ray.get(hit.envs.actors[1].info.remote())["pid"])

    def generate_multi(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 10:  # in step 3's rollout (4 waves a step), made while the learner trains
            os.kill(pid, signal.SIGKILL)
        return inner(*args, **kwargs)

    hit.engine.generate_multi = generate_multi
    try:
        with pytest.raises(RuntimeError, match=r"(?s)training step 3: .*worker 1 .*step_0000000(1|2): continue with"):
            hit.train()
    finally:
        hit.close()
    steps = [r["step"] for r in _rows(tmp_path / "hit")]
    latest = (tmp_path / "hit" / "checkpoints" / "latest").read_text().strip()
    assert steps and latest == f"step_{steps[-1]:08d}"  # every finished step has its checkpoint

    # The resume trains the steps left; the steps before the failure are the clean run's. (The
    # failed rollout began at version 1, before the checkpoint of step 2: it is made again with
    # step 2's weights, within the staleness bound, so the runs part from there.)
    resumed = make_trainer(load_config(None, [*base, f"run.output_dir={tmp_path / 'hit'}"]), resume=True)
    try:
        assert resumed.step == steps[-1]
        resumed.train()
    finally:
        resumed.close()
    clean_rows, hit_rows = _rows(tmp_path / "clean"), _rows(tmp_path / "hit")
    assert [r["step"] for r in hit_rows] == [1, 2, 3]
    for a, b in zip(clean_rows[: len(steps)], hit_rows):
        for key in a:
            if key.startswith(("rollout/", "train/", "async/version", "async/staleness")):
                assert b[key] == pytest.approx(a[key], abs=1e-6, rel=1e-6), key
    assert all(r["async/staleness_max"] <= 1 for r in hit_rows)
