"""One factory picks the trainer a config asks for; ``Trainer`` is the single-process loop."""

from __future__ import annotations

import pytest

from llm_trainers import make_trainer
from llm_trainers.config import load_config
from llm_trainers.trainer import Trainer

QUIET = ["run.steps=1", "run.eval_every=-1", "run.progress=false", "run.tensorboard=false", "run.export_final=false",
         "env.num_envs=2", "env.kwargs={rounds: 2}", "rollout.k=2", "rollout.max_new_tokens=2"]


def test_trainer_refuses_a_distributed_layout_and_names_the_factory(tmp_path):
    cfg = load_config("signalling_at_grpo_l2_ray", [f"run.output_dir={tmp_path}"])
    assert cfg.resources.distributed
    with pytest.raises(ValueError, match=r"make_trainer"):
        Trainer(cfg)
    assert not (tmp_path / "config.yaml").exists()  # refused before touching the run directory


def test_make_trainer_builds_the_single_process_trainer_for_a_local_layout(tmp_path, tiny_model_dir):
    cfg = load_config(None, [*QUIET, f"model.path={tiny_model_dir}", f"run.output_dir={tmp_path}"])
    trainer = make_trainer(cfg)
    try:
        assert type(trainer) is Trainer
        trainer.train()
        assert trainer.step == 1
    finally:
        trainer.close()


def test_env_prepare_chooses_the_training_problems_mutants_before_the_first_step(tmp_path, tiny_model_dir, monkeypatch):
    from llm_envs.envs.coder_tester import mutants

    cache = tmp_path / "mutants"
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(cache))
    mutants.clear_cache()
    env = ["env.id=llm/CoderTester-v0", "env.num_envs=1",
           "env.kwargs={split: test, max_turns: 1, max_mutants: 2, max_mutant_candidates: 6, "
           "task_kwargs: {split_policy: benchmark, limit: 2}}"]
    cfg = load_config(None, [*QUIET, *env, "env.prepare=true", f"model.path={tiny_model_dir}",
                             f"run.output_dir={tmp_path / 'run'}"])
    Trainer(cfg).close()
    assert len(list(cache.glob("*.json"))) == 2  # both problems of the training split, chosen
    mutants.clear_cache()
    with pytest.raises(ValueError, match="env.prepare runs in the trainer's process"):
        load_config(None, [*QUIET, "env.prepare=true", "env.url=http://127.0.0.1:9", "rollout.tree=false"])


@pytest.mark.parametrize(("overrides", "message"), [
    (["env.train_agents=[listner]"], r"env.train_agents names no agent\(s\) \['listner'\]"),
    (["env.train_agents=[]"], r"env.train_agents is empty"),
    (["env.opponents={speaker: random}", "env.train_agents=[speaker]"], r"names fixed opponents \['speaker'\]"),
    (["env.opponents={speakr: random}"], r"env.opponents names no agent\(s\) \['speakr'\]"),
])
def test_agents_lists_that_would_train_nothing_are_refused(tmp_path, overrides, message):
    # Each of these ran before: every record was filtered out, and the run trained on nothing.
    cfg = load_config(None, [*QUIET, *overrides, f"run.output_dir={tmp_path}"])
    with pytest.raises(ValueError, match=message):
        Trainer(cfg)
