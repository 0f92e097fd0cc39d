"""Weights & Biases beside TensorBoard (run.wandb), in offline mode: nothing is sent; the run
is written under <output_dir>/wandb. The offline run must hold the metrics, the resolved config,
and a table of episodes per evaluation."""

from __future__ import annotations

import glob
import json
import time

import pytest

from llm_trainers.config import load_config
from llm_trainers.trainer import Trainer

pytest.importorskip("wandb", reason="the wandb extra is not installed")


def test_offline_wandb_run_has_metrics_config_and_episode_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    out = tmp_path / "run"
    cfg = load_config("signalling_at_grpo_l1", [
        f"run.output_dir={out}", "run.steps=2", "run.eval_every=1", "run.eval_episodes=4", "run.eval_at_start=false",
        "run.save_every=-1", "run.progress=false", "run.export_final=false", "run.tensorboard=false",
        "env.num_envs=2", "rollout.k=2", "run.wandb=offline", "run.wandb_project=test-project",
    ])
    trainer = Trainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    [run_dir] = glob.glob(str(out / "wandb" / "offline-run-*"))
    [records] = glob.glob(f"{run_dir}/run-*.wandb")
    # wandb's service process writes the file after finish() returns: wait for its records.
    deadline = time.monotonic() + 60
    data = open(records, "rb").read()
    while b"eval/episodes" not in data and time.monotonic() < deadline:
        time.sleep(0.2)
        data = open(records, "rb").read()
    for key in (b"train/shared/loss", b"eval/success", b"rollout/success", b"eval/episodes"):
        assert key in data, key  # the metrics
    assert b"llm/Signalling-v0" in data and b"at_grpo" in data  # the resolved config
    assert (out / "wandb_run_id").read_text().strip() in records  # a resume continues this run
    tables = sorted(glob.glob(f"{run_dir}/files/media/table/eval/episodes_*.table.json"))
    assert len(tables) == 2  # one per evaluation
    table = json.loads(open(tables[-1]).read())
    assert table["columns"] == ["step", "seed", "success", "rewards", "transcript"]
    assert [row[1] for row in table["data"]] == [0, 1, 2, 3]  # the evaluation's seeds
    assert all("[speaker turn 0]" in row[4] and "[listener turn 0]" in row[4] for row in table["data"])


def test_wandb_modes_are_checked():
    with pytest.raises(ValueError, match="run.wandb must be null, offline or online"):
        load_config("signalling_at_grpo_l1", ["run.wandb=yes"])
