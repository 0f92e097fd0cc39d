"""Configs that extend others (``base:``), and the shipped configs' settings kept exactly.

``data/resolved_configs.json`` was written once from the shipped configs as they were before they
became overlays (every field of every config, resolved by the loader of that time). Every
shipped config must still resolve to exactly those settings: the overlays changed how the files
are written, not what a run does. A config added since has no snapshot entry and fails here
until it is added on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from llm_trainers.cli import main
from llm_trainers.config import (
    Config,
    config_to_dict,
    load_config,
    merge_config_data,
    resolve_config_data,
    shipped_configs,
)

SNAPSHOT = Path(__file__).parent / "data" / "resolved_configs.json"


def _resolved(name_or_path) -> dict:
    return json.loads(json.dumps(config_to_dict(load_config(name_or_path)), default=str))


def test_the_snapshot_covers_exactly_the_shipped_configs():
    assert sorted(json.loads(SNAPSHOT.read_text())) == sorted(shipped_configs())


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_a_shipped_config_resolves_to_its_settings_from_before_overlays(name):
    """Every setting of the snapshot, unchanged; a field or section added to the config since must
    hold its defaults (a new knob that no shipped config sets changes no run)."""
    got, want = _resolved(name), json.loads(SNAPSHOT.read_text())[name]
    defaults = json.loads(json.dumps(config_to_dict(Config()), default=str))
    assert want.keys() <= got.keys(), "sections gone"
    for section in got.keys() - want.keys():  # a section added since holds its defaults
        assert got[section] == defaults[section], f"{name}: new section {section} is not at its defaults"
    for section in want:
        assert want[section].keys() <= got[section].keys(), f"{section}: fields gone"
        for key, value in got[section].items():
            expected = want[section].get(key, defaults[section][key])
            if isinstance(value, dict) and isinstance(expected, dict) and isinstance(defaults[section][key], dict):
                # a nested settings block (rollout.vllm): fields added since hold their defaults
                expected = {**defaults[section][key], **expected}
            assert value == expected, f"{name}: {section}.{key} is {value!r}, was {expected!r}"


def test_the_at_grpo_level_configs_are_short_overlays():
    for env in ("plan_path", "sokoban", "sudoku", "code", "math"):
        for level in ("l1", "l2", "l3"):
            path = shipped_configs()[f"{env}_at_grpo_{level}"]
            data = yaml.safe_load(path.read_text())
            assert data["base"] == f"base/{env}_at_grpo.yaml"
            assert len(path.read_text().splitlines()) <= 10, path


def test_print_config_shows_the_settings_the_bases_contribute(capsys):
    assert main(["sokoban_at_grpo_l2", "--print-config", "rollout.k=6"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["run"]["name"] == "sokoban_at_grpo_l2"  # the file itself
    assert printed["env"]["id"] == "llm/Sokoban-v0" and printed["model"]["path"] == "Qwen/Qwen3-8B"  # its base
    assert printed["train"]["num_mini_batches"] == 2 and printed["rollout"]["max_new_tokens"] == 2048  # the recipe
    assert printed["rollout"]["k"] == 6  # the command line, last
    assert "base" not in printed


def test_merge_is_deep_for_mappings_and_replaces_everything_else():
    base = {"env": {"id": "a", "kwargs": {"x": 1, "y": 2}}, "model": {"lora": {"r": 16, "alpha": 32}},
            "train": {"betas": [0.9, 0.99]}}
    over = {"env": {"kwargs": {"y": 3}}, "model": {"lora": None}, "train": {"betas": [0.5]}}
    merged = merge_config_data(base, over)
    assert merged == {"env": {"id": "a", "kwargs": {"x": 1, "y": 3}}, "model": {"lora": None},
                      "train": {"betas": [0.5]}}
    assert base["env"]["kwargs"] == {"x": 1, "y": 2}  # the inputs are left alone


def test_a_base_is_found_relative_to_the_file_then_among_the_shipped_configs(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "recipe.yaml").write_text(
        "base: signalling_at_grpo_l1\ntrain: {lr: 0.25}\nenv: {kwargs: {rounds: 2}}\n")
    (tmp_path / "run.yaml").write_text("base: shared/recipe.yaml\nrun: {name: mine}\nenv: {num_envs: 4}\n")
    cfg = load_config(tmp_path / "run.yaml")
    shipped = load_config("signalling_at_grpo_l1")
    assert (cfg.run.name, cfg.train.lr, cfg.env.num_envs, cfg.env.kwargs) == ("mine", 0.25, 4, {"rounds": 2})
    assert cfg.rollout == shipped.rollout and cfg.run.steps == shipped.run.steps  # from the shipped base
    assert resolve_config_data(tmp_path / "run.yaml")["train"]["micro_batch_size"] == 64


def test_a_base_chain_that_comes_back_is_a_clear_error(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: c.yaml\n")
    (tmp_path / "c.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match=r"comes back.*a\.yaml -> .*b\.yaml -> .*c\.yaml -> .*a\.yaml"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "self.yaml").write_text("base: self.yaml\n")
    with pytest.raises(ValueError, match="comes back"):
        load_config(tmp_path / "self.yaml")


def test_bad_bases_are_clear_errors(tmp_path, capsys):
    (tmp_path / "missing.yaml").write_text("base: nowhere.yaml\n")
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "listed.yaml").write_text("base: [a.yaml, b.yaml]\n")
    with pytest.raises(TypeError, match="must name one config"):
        load_config(tmp_path / "listed.yaml")
    (tmp_path / "scalar.yaml").write_text("base: signalling_at_grpo_l1\ntrain: 3\n")
    with pytest.raises(TypeError, match="train must be a mapping"):
        load_config(tmp_path / "scalar.yaml")
    assert main([str(tmp_path / "missing.yaml"), "--print-config"]) == 2
    assert "nowhere.yaml" in capsys.readouterr().err


def test_an_evaluation_split_the_dataset_lacks_or_splits_another_way_is_refused_at_load():
    # Ten shipped configs evaluated GSM8K and APPS on a validation split they do not have: the
    # run failed at its first evaluation. A hash validation split beside official training
    # pooled the official training rows into it.
    with pytest.raises(ValueError, match="env.eval_kwargs: gsm8k has no official 'validation' split"):
        load_config("debate_reinforce_pp", ["env.eval_kwargs={split: validation}"])
    with pytest.raises(ValueError, match="env.kwargs: apps has no official 'validation' split"):
        load_config("code_at_grpo_l1", ["env.kwargs={task: apps, split: validation}"])
    with pytest.raises(ValueError, match="split_policy 'hash' and training with 'official'"):
        load_config("debate_reinforce_pp", ["env.eval_kwargs={split: validation, task_kwargs: {split_policy: hash}}"])
    both = "{num_agents: 2, task: gsm8k, split: train, task_kwargs: {split_policy: hash}}"
    load_config("debate_reinforce_pp", [f"env.kwargs={both}", "env.eval_kwargs={split: validation}"])
    # the policy that applies is compared: an unset one is the dataset's default (official here)
    official = "{num_agents: 2, task: gsm8k, split: train, task_kwargs: {split_policy: official}}"
    load_config("debate_reinforce_pp", [f"env.kwargs={official}", "env.eval_kwargs={split: test, task_kwargs: {limit: 50}}"])
    # a PSJ evaluation that keeps the training run's question pool answers its questions
    with pytest.raises(ValueError, match="keeps the training pool_path"):
        load_config("proposer_solver_judge_task_relative", ["env.eval_kwargs={split: test}"])
