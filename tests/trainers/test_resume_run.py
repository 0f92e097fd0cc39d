"""Resume: stopping after step n and resuming gives the parameters of an uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch

from llm_trainers.checkpoint import latest_checkpoint
from llm_trainers.config import load_config
from llm_trainers.trainer import Trainer

BASE = [
    "model.path=tiny:llm/Signalling-v0",
    "model.device=cpu",
    "model.level=L2",
    "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}",
    "rollout.max_new_tokens=2",
    "rollout.k=4",
    "env.num_envs=6",
    "env.kwargs={rounds: 2}",
    "run.steps=3",
    "run.eval_every=2",
    "run.eval_episodes=4",
    "run.save_every=1",
    "run.progress=false",
    "run.tensorboard=false",
    "run.export_final=false",
    "train.lr=5e-3",
    "train.micro_batch_size=5",
    "train.mini_batch_size=16",   # several optimizer steps per iteration: shuffling state matters
    "train.epochs=2",
    "train.schedule=cosine",
    "train.warmup_steps=1",
    "train.weight_decay=0.01",
]


def _params(trainer):
    return {f"{p.name}/{k}": v for p in trainer.policies for k, v in p.trainable_state_dict().items()}


def test_resume_gives_the_same_parameters_as_an_uninterrupted_run(tmp_path):
    full = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'a'}"]))
    full.train()
    expected = _params(full)
    full.close()

    cut = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'b'}"]))
    cut.train(until_step=2)  # "crash" after step 2 (its checkpoint is on disk)
    at_two = _params(cut)
    cut.close()
    assert latest_checkpoint(tmp_path / "b" / "checkpoints").name == "step_00000002"

    resumed = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    assert resumed.step == 2
    resumed.train()
    got = _params(resumed)
    resumed.close()

    assert got.keys() == expected.keys()
    assert any(not torch.equal(at_two[k], got[k]) for k in got)  # step 3 did change something
    for k in expected:
        assert torch.equal(expected[k], got[k]), k

    # the metrics file of the resumed run matches the uninterrupted one line for line (same steps)
    rows_a = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b] == [0, 1, 2, 3]
    for a, b in zip(rows_a, rows_b):
        for key in a:
            if key.startswith(("rollout/", "eval/", "train/")):
                assert a[key] == pytest.approx(b[key], abs=1e-6), key


def test_resume_without_checkpoint_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path}"]), resume=True)


def test_resume_refuses_settings_other_than_the_runs_and_keeps_its_config(tmp_path):
    # (a resume applied k and the estimator from the middle of the run, ignored a new lr, and
    # rewrote config.yaml with all three, exiting 0)
    out = [f"run.output_dir={tmp_path}", "run.steps=1"]
    first = Trainer(load_config(None, [*BASE, *out]))
    first.train()
    saved = (tmp_path / "config.yaml").read_text()
    with pytest.raises(ValueError, match=r"rollout.k: 4 -> 2; train.lr: 0.005 -> 0.5") as caught:
        Trainer(load_config(None, [*BASE, *out, "train.lr=0.5", "rollout.k=2"]), resume=True)
    assert "run.steps:" not in str(caught.value)
    assert (tmp_path / "config.yaml").read_text() == saved
    # How long it goes on, and how it is evaluated and logged, may change.
    resumed = Trainer(load_config(None, [*BASE, *out, "run.steps=2", "run.eval_every=1"]), resume=True)
    assert resumed.step == 1


def test_without_optimizer_state_the_run_diverges(tmp_path):
    """The resume test can fail: dropping the optimizer state changes step 3."""
    full = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'a'}"]))
    full.train()
    expected = _params(full)
    full.close()
    cut = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'b'}"]))
    cut.train(until_step=2)
    cut.close()
    resumed = Trainer(load_config(None, [*BASE, f"run.output_dir={tmp_path / 'b'}"]), resume=True)
    fresh = type(resumed.learner)(resumed.policies, resumed.learner.cfg, total_steps=resumed.learner.total_steps)
    resumed.learner = fresh
    resumed.train()
    got = _params(resumed)
    resumed.close()
    assert any(not torch.equal(expected[k], got[k]) for k in expected)


def test_environment_state_round_trips_through_the_checkpoint(tmp_path, monkeypatch):
    """An environment's cross-episode state (TextEnv.state_dict) comes back on resume."""
    from llm_envs.envs.signalling.env import SignallingEnv

    monkeypatch.setattr(SignallingEnv, "state_dict", lambda self: {"pool": ["q1", "q2"]})
    restored: dict = {}
    monkeypatch.setattr(SignallingEnv, "load_state_dict", lambda self, state: restored.update(state))
    cfg = [*BASE, f"run.output_dir={tmp_path}", "run.steps=1", "run.eval_every=-1"]
    trainer = Trainer(load_config(None, cfg))
    trainer.train()
    trainer.close()
    assert restored == {}
    resumed = Trainer(load_config(None, cfg), resume=True)
    resumed.close()
    assert restored == {"pool": ["q1", "q2"]}


def test_resume_restores_the_last_evaluation(tmp_path):
    cfg = [*BASE, f"run.output_dir={tmp_path}", "run.steps=2"]
    first = Trainer(load_config(None, cfg))
    first.train(until_step=2)
    first.close()
    resumed = Trainer(load_config(None, cfg), resume=True)
    assert resumed.last_eval == first.last_eval and "eval/success" in resumed.last_eval
    resumed.close()


def test_ctrl_c_during_a_checkpoint_save_is_raised_after_the_save(tmp_path, monkeypatch):
    """SIGINT while ``torch.save`` writes: the save finishes (``latest`` points to a complete
    checkpoint), then ``KeyboardInterrupt`` is raised, not the zip writer's ``RuntimeError``."""
    import os
    import signal

    import torch

    from llm_trainers import checkpoint

    real_save = torch.save

    def interrupted_save(obj, f):
        os.kill(os.getpid(), signal.SIGINT)  # delivered between bytecodes: inside the save
        real_save(obj, f)

    monkeypatch.setattr(checkpoint.torch, "save", interrupted_save)
    # A test run started in the background by a non-interactive shell inherits SIGINT ignored;
    # Ctrl-C at a terminal finds Python's default handler, which is the case tested here.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            checkpoint.save_checkpoint(tmp_path, 3, {"a": {"x": torch.ones(4)}, "b": [1, 2]})
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back after the save
    finally:
        signal.signal(signal.SIGINT, inherited)
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    latest = checkpoint.latest_checkpoint(tmp_path)
    assert latest is not None and latest.name == "step_00000003"
    loaded = checkpoint.load_checkpoint(latest)
    assert torch.equal(loaded["a"]["x"], torch.ones(4)) and loaded["b"] == [1, 2]


def test_resume_after_a_curriculum_move_keeps_the_environments_state(tmp_path):
    """The question pool saved at step 2, after the curriculum moved at step 1, is the pool of
    the resumed run (the envs rebuilt for the level used to replace the one it was loaded into)."""
    cfg = [
        "env.id=llm/ProposerSolverJudge-v0",
        "env.kwargs={task: arithmetic, num_solver_samples: 1, task_kwargs: {level: 1}}",
        "env.curriculum={option: task_kwargs.level, levels: [1, 2], metric: record_reward, threshold: -1000, patience: 1}",
        "env.num_envs=1",
        "env.max_decisions=8",
        "model.path=tiny:llm/ProposerSolverJudge-v0",
        "model.device=cpu",
        "model.level=L1",
        "rollout.tree=false",
        "rollout.max_new_tokens=2",
        "algorithm.estimator=task_relative_reinforce_pp",
        "run.steps=3",
        "run.save_every=1",
        "run.eval_every=-1",
        "run.progress=false",
        "run.tensorboard=false",
        "run.export_final=false",
        f"run.output_dir={tmp_path}",
    ]
    question = "What is 1234 + 4321 ?"
    trainer = Trainer(load_config(None, cfg))
    trainer.train(until_step=1)
    assert trainer.curriculum_index == 1
    trainer.envs[0].unwrapped.pool.add(question, 1.0, answer="5555")  # as if accepted
    trainer.train(until_step=2)
    pool = len(trainer.envs[0].unwrapped.pool)
    trainer.close()
    resumed = Trainer(load_config(None, cfg), resume=True)
    try:
        assert resumed.curriculum_index == 1
        assert question in resumed.envs[0].unwrapped.pool
        assert len(resumed.envs[0].unwrapped.pool) == pool
    finally:
        resumed.close()


def test_resume_refuses_another_batch_size_of_the_engine(tmp_path):
    # The HF engine samples a step's rows from one generator: another max_batch_size samples
    # other tokens, so the resumed run would not be the run it continues.
    from llm_trainers.trainer import RESUMABLE_CHANGES, resume_changes

    assert "rollout.max_batch_size" not in RESUMABLE_CHANGES
    cfg = [*BASE, f"run.output_dir={tmp_path}", "run.steps=1", "run.eval_every=-1"]
    trainer = Trainer(load_config(None, cfg))
    trainer.close()
    changed = resume_changes(tmp_path / "config.yaml", load_config(None, [*cfg, "rollout.max_batch_size=2"]))
    assert any(change.startswith("rollout.max_batch_size") for change in changed)
