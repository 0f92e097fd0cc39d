"""The resources section: validated and placed on paper, without a cluster."""

from __future__ import annotations

import sys

import pytest

from llm_trainers.cli import main
from llm_trainers.config import load_config
from llm_trainers.distributed.placement import plan_placement

TWO_BY_EIGHT = "plan_path_at_grpo_l3_2x8gpu"


def test_the_default_layout_is_the_single_process_one():
    cfg = load_config(None)
    assert not cfg.resources.distributed
    assert load_config("signalling_at_grpo_l2_ray").resources.distributed


def test_the_shipped_two_node_layout_validates_and_places_every_actor():
    cfg = load_config(TWO_BY_EIGHT)
    plan = plan_placement(cfg, ["tool", "plan"])
    learners, engines, envs = plan.of("learner"), plan.of("engine"), plan.of("env")
    assert [s.policies for s in learners] == [["tool"]] * 4 + [["plan"]] * 4
    assert {s.node for s in learners} == {0} and {s.node for s in engines} == {1}
    assert [s.node for s in envs] == [0, 1] * 4  # spread
    assert [row["gpus"] for row in plan.usage()] == [8, 8]
    assert "learner   4 -> node 0" in plan.describe()


@pytest.mark.parametrize("override,message", [
    ("resources.engines=9", "needs 17 GPUs"),
    ("resources.gpus_per_engine=16", "needs 16 GPUs on one node"),
    ("resources.env_workers=200", "exceeds env.num_envs"),
    ("resources.gpus_per_engine=0", "vLLM engines need GPUs"),
    ("resources.policy_ranks={tool: [0, 1], plan: [8]}", "ranks must be in 0..7"),
    ("resources.policy_ranks={tool: [0, 1]}", "missing"),
    ("model.level=L2", "level L3 only"),
    ("resources.learner_sharding=zero3", "learner_sharding"),
    ("resources.learner_world_size=0", "needs learner ranks"),
])
def test_a_layout_that_cannot_work_is_refused_with_the_reason(override, message):
    extra = ["model.lora={r: 8}"] if override == "model.level=L2" else []
    with pytest.raises(ValueError, match=message):
        load_config(TWO_BY_EIGHT, [override, *extra])


def test_cpu_learner_ranks_cannot_use_nccl_and_hf_engines_have_no_tensor_parallelism():
    with pytest.raises(ValueError, match="nccl needs GPUs"):
        load_config("signalling_at_grpo_l2_ray", ["resources.learner_backend=nccl"])
    with pytest.raises(ValueError, match="HF engine runs on one device"):
        load_config("signalling_at_grpo_l2_ray", ["resources.gpus_per_engine=2", "resources.gpus_per_node=2"])


def test_llm_train_plan_prints_the_placement(capsys):
    assert main([TWO_BY_EIGHT, "--plan"]) == 0
    out = capsys.readouterr().out
    assert "node 1: GPUs 8/8" in out and out.count("engine ") == 8


def test_a_distributed_layout_without_ray_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    code = main(["signalling_at_grpo_l2_ray", f"run.output_dir={tmp_path}", "run.progress=false"])
    assert code == 2
    assert "pip install 'llm-envs[ray]'" in capsys.readouterr().err
