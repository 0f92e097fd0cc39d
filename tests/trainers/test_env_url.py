"""``llm-train`` with ``env.url``: the training and evaluation episodes of one step are played on
an ``llm-envs serve`` server (one session per instance), and the config refuses what a remote
environment cannot do (tree sampling: no clone; environment workers: the envs are on the server)."""

from __future__ import annotations

import json
import math

import pytest

from tests.optional import import_or_skip  # noqa: E402

import_or_skip("openenv.core", "serve", "the serve extra (openenv-core) is not installed")

from llm_trainers.config import load_config  # noqa: E402
from llm_trainers.trainer import Trainer  # noqa: E402
from tests.serve.conftest import in_process_server  # noqa: E402


def test_config_refuses_tree_sampling_and_env_workers_with_env_url():
    with pytest.raises(ValueError, match="cannot be cloned"):
        load_config(None, ["env.url=http://127.0.0.1:1", "rollout.tree=true"])
    with pytest.raises(ValueError, match="env_workers"):
        load_config("signalling_reinforce_pp", ["env.url=http://127.0.0.1:1", "resources.env_workers=1"])


def test_one_training_step_on_a_served_environment(tmp_path, tiny_model_dir):
    with in_process_server("llm/Signalling-v0", max_sessions=16) as url:
        cfg = load_config("signalling_reinforce_pp", [
            f"env.url={url}", f"model.path={tiny_model_dir}", "env.num_envs=8", "run.steps=1",
            # one- or two-token replies, as the Signalling learning tests sample them: rewards
            # differ within the step, so it trains (a step whose advantages are all zero is
            # skipped and trains no record)
            "rollout.max_new_tokens=2", "env.kwargs={listener_local_weight: 1.0}",
            "run.eval_every=1", "run.eval_episodes=2", "run.eval_at_start=false", "run.save_every=-1",
            "run.progress=false", "run.tensorboard=false", f"run.output_dir={tmp_path}", "train.micro_batch_size=8",
            "resources={}",
        ])
        trainer = Trainer(cfg)
        try:
            assert all(type(env).__name__ == "RemoteEnv" for env in trainer.envs) and len(trainer.envs) == 8
            trainer.train()
        finally:
            trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    [row] = [r for r in rows if r.get("step") == 1 and "rollout/trained_records" in r]
    assert row["rollout/trained_records"] > 0 and math.isfinite(row["train/shared/loss"])
    assert any("eval/success" in r for r in rows)


def _active_sessions(url: str) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{url}/info", timeout=10) as response:
        return int(json.loads(response.read())["active_sessions"])


def test_close_ends_every_server_session(tmp_path, tiny_model_dir):
    """Trainer.close() closes its environments: with env.url each instance is a server session,
    which would otherwise stay open until the server's idle sweep (against its session cap)."""
    import time

    with in_process_server("llm/Signalling-v0", max_sessions=16) as url:
        cfg = load_config("signalling_reinforce_pp", [
            f"env.url={url}", f"model.path={tiny_model_dir}", "env.num_envs=4", "run.steps=1",
            "run.progress=false", "run.tensorboard=false", f"run.output_dir={tmp_path}", "resources={}",
        ])
        trainer = Trainer(cfg)
        for env in trainer.envs:
            env.reset(seed=0)  # a session is opened by the first request
        assert _active_sessions(url) == 4
        trainer.close()
        trainer.close()  # twice is harmless
        deadline = time.monotonic() + 30  # the server ends a session when its socket closes
        while _active_sessions(url) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _active_sessions(url) == 0


def test_llm_train_at_a_server_at_capacity_exits_with_one_clear_line(tmp_path, tiny_model_dir, capsys):
    """More environment instances than the server's --max-sessions: `llm-train` ends with exit 3
    and one line naming CAPACITY_REACHED and --max-sessions (it printed a traceback saying the
    connection was "lost mid-episode"); a URL with no server is a usage error (exit 2)."""
    from llm_trainers.cli import main

    with in_process_server("llm/Signalling-v0", max_sessions=2) as url:
        status = main(["signalling_reinforce_pp", f"env.url={url}", f"model.path={tiny_model_dir}",
                       "env.num_envs=4", "run.steps=1", "run.eval_at_start=false", "run.progress=false",
                       "run.tensorboard=false", f"run.output_dir={tmp_path / 'run'}", "resources={}"])
    err = capsys.readouterr().err
    assert status == 3
    assert "CAPACITY_REACHED" in err and "--max-sessions" in err and "Traceback" not in err
    status = main(["signalling_reinforce_pp", "env.url=http://127.0.0.1:1", f"model.path={tiny_model_dir}",
                   f"run.output_dir={tmp_path / 'nowhere'}", "resources={}"])
    assert status == 2 and "no llm-envs server at http://127.0.0.1:1" in capsys.readouterr().err
