"""Configs (YAML + overrides), shipped configs, and the llm-train CLI."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re

import pytest
import torch
import yaml

import llm_envs
from llm_trainers.cli import main
from llm_trainers.config import (
    apply_overrides,
    config_from_dict,
    load_config,
    shipped_configs,
)


def test_overrides_parse_yaml_values_and_coerce_numbers(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("run: {steps: 5}\ntrain: {lr: 1e-5}\n")
    cfg = load_config(path, ["train.lr=3e-3", "rollout.k=8", "env.kwargs={rounds: 2}", "model.lora={r: 4}",
                             "model.level=L2", "train.dual_clip=3"])
    assert cfg.train.lr == pytest.approx(3e-3) and isinstance(cfg.train.lr, float)
    assert cfg.rollout.k == 8 and cfg.env.kwargs == {"rounds": 2}
    assert cfg.model.lora.r == 4 and cfg.model.lora.alpha == 32
    assert cfg.train.dual_clip == 3.0 and isinstance(cfg.train.dual_clip, float)
    assert cfg.run.steps == 5


def test_unknown_keys_and_bad_values_are_errors():
    with pytest.raises(KeyError, match="valid"):
        config_from_dict({"train": {"learning_rate": 1.0}})
    with pytest.raises(KeyError):
        config_from_dict({"nonsense": {}})
    with pytest.raises(ValueError, match="estimator"):
        load_config(None, ["algorithm.estimator=ppo"])
    with pytest.raises(ValueError, match="L2"):
        load_config(None, ["model.level=L2"])
    with pytest.raises(ValueError, match="tree"):
        load_config(None, ["rollout.tree=false"])  # at_grpo needs tree sampling
    with pytest.raises(ValueError):
        apply_overrides({}, ["no_equals_sign"])
    with pytest.raises(FileNotFoundError, match="shipped"):
        load_config("no_such_config")


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_shipped_config_is_valid_for_its_environment(name):
    cfg = load_config(name)
    entry = llm_envs.entry(cfg.env.id)
    env_cls = entry.load()
    fields = {f.name for f in dataclasses.fields(env_cls.config_class)}
    for kwargs in (cfg.env.kwargs, cfg.env.eval_kwargs):
        unknown = set(kwargs) - fields
        assert not unknown, f"{name}: {cfg.env.id} has no options {unknown}"
    if cfg.model.policy_map:
        assert set(cfg.model.policy_map) <= set(entry.agents)
    assert (cfg.algorithm.estimator == "at_grpo") == cfg.rollout.tree


def test_shipped_configs_cover_the_papers_setups():
    by_name = {n: load_config(n) for n in shipped_configs()}
    for env in ("plan_path", "sokoban", "sudoku", "code", "math"):
        levels = {by_name[f"{env}_at_grpo_{lv}"].model.level for lv in ("l1", "l2", "l3")}
        assert levels == {"L1", "L2", "L3"}
        assert all(by_name[f"{env}_at_grpo_{lv}"].model.path.startswith("Qwen/Qwen3-") for lv in ("l1", "l2", "l3"))
        assert by_name[f"{env}_at_grpo_l1"].rollout.k == 4
    assert by_name["forum_reinforce_pp_l3"].algorithm.estimator == "per_agent_reinforce_pp"
    psj = by_name["proposer_solver_judge_task_relative"]
    assert psj.algorithm.estimator == "task_relative_reinforce_pp"
    assert (psj.train.clip_high, psj.train.dual_clip, psj.train.entropy_coef) == (0.28, 3.0, 0.001)
    debate = by_name["debate_reinforce_pp"]
    assert debate.algorithm.estimator == "reinforce_pp" and debate.algorithm.kl_coef == 0.002


def test_cli_list_and_print_config(capsys):
    assert main(["--list"]) == 0
    assert "plan_path_at_grpo_l2" in capsys.readouterr().out
    assert main(["signalling_at_grpo_l1", "train.lr=0.5", "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["lr"] == 0.5 and printed["env"]["id"] == "llm/Signalling-v0"
    assert main([]) == 2
    # Overrides may follow a flag as well as precede it.
    assert main(["signalling_at_grpo_l1", "--print-config", "train.lr=0.25", "rollout.k=3"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["lr"] == 0.25 and printed["rollout"]["k"] == 3
    assert main(["signalling_at_grpo_l1", "train.nope=1"]) == 2


def test_cli_trains_resumes_and_exports(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["signalling_at_grpo_l2", f"run.output_dir={out}", "run.steps=2", "run.eval_every=1",
            "run.eval_episodes=4", "run.save_every=1", "run.progress=false", "env.num_envs=4", "rollout.k=2"]
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["step"] == 2 and "eval/success" in summary
    # a start banner, and the report's path at the end
    assert f"llm-train: training signalling_at_grpo_l2: llm/Signalling-v0, level L2, model tiny:llm/Signalling-v0, 2 steps, on CPU; writing to {out}" in captured.err
    assert f"llm-train: wrote {out / 'report.html'}" in captured.err and (out / "report.html").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    for key in ("time/generate_s", "time/env_s", "time/logprob_s", "time/advantage_s", "time/update_s",
                "time/push_s", "tokens/generated", "rollout/success"):
        assert key in rows[1], key
    for policy in ("speaker", "listener"):  # a loss, or a step that had no gradient for this policy
        assert f"train/{policy}/loss" in rows[1] or rows[1][f"train/{policy}/skipped_zero_advantage"] == 1.0
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    exported = json.loads((out / "final" / "policies.json").read_text())
    assert exported["level"] == "L2" and set(exported["policies"]) == {"speaker", "listener"}

    # a second start in the same directory must not silently overwrite the run
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    # --resume continues the same run to a new step count
    assert main([*args, "run.steps=3", "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 3
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]

    # the evaluations' transcripts read back with `llm-envs show RUN`
    from llm_envs.cli import main as llm_envs_main

    assert llm_envs_main(["show", str(out), "--limit", "0"]) == 0
    shown = capsys.readouterr().out
    evaluations = sorted((out / "eval").glob("step_*.jsonl"))
    assert len(evaluations) == 4  # steps 0-3
    assert shown.count("=== llm/Signalling-v0 | episode") == 4 * 4  # run.eval_episodes=4 each


def test_exported_adapter_loads_with_peft(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from llm_trainers.trainer import Trainer

    cfg = load_config("signalling_at_grpo_l2", [f"run.output_dir={tmp_path}", "run.steps=2", "run.eval_every=-1",
                                                 "run.progress=false", "run.tensorboard=false", "env.num_envs=8"])
    trainer = Trainer(cfg)
    trainer.train()
    trainer.close()
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "tiny_model")
    info = json.loads((tmp_path / "final" / "policies.json").read_text())
    model = PeftModel.from_pretrained(base, info["policies"]["speaker"])
    trained = trainer.policies["speaker"].trainable_state_dict()
    loaded = {n.replace(".default.", ".speaker."): p for n, p in model.named_parameters() if ".lora_" in n}
    assert loaded.keys() == trained.keys()
    assert any(float(v.abs().sum()) > 0 for k, v in trained.items() if "lora_B" in k)  # it did train
    for k, v in trained.items():
        assert torch.equal(loaded[k].detach(), v), k


def test_exported_adapter_directory_is_an_agent(tmp_path):
    """``hf:final/<policy>`` (what the eval CLI builds) loads the base model plus the adapter."""
    from llm_envs.agents.base import ActRequest
    from llm_trainers.agents.hf import HFAgent, SamplingParams, resolve_adapter_path
    from llm_trainers.trainer import Trainer

    cfg = load_config("signalling_at_grpo_l2", [f"run.output_dir={tmp_path}", "run.steps=2", "run.eval_every=-1",
                                                 "run.progress=false", "run.tensorboard=false", "env.num_envs=8"])
    trainer = Trainer(cfg)
    trainer.train()
    trainer.close()
    adapter_dir = json.loads((tmp_path / "final" / "policies.json").read_text())["policies"]["listener"]
    assert resolve_adapter_path(adapter_dir, None) == (str(tmp_path / "tiny_model"), adapter_dir)
    agent = HFAgent.from_pretrained(adapter_dir, sampling=SamplingParams(temperature=0.0, max_new_tokens=1),
                                    device="cpu")
    obs = {"instruction": "You are the listener.", "prompt": "Message: green"}
    out = agent.act_batch([ActRequest(obs, "listener")])[0]
    expected = trainer.learner.logprobs("listener", [out.prompt_token_ids], [out.token_ids])[0]
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-5)


def test_l1_lora_export_loads_from_final_shared(tmp_path):
    """An L1 LoRA run's adapter is at ``final/shared`` (the path docs/training.md gives), not
    peft's nested ``final/shared/shared``; an older nested export loads under the outer path too."""
    import shutil

    from llm_envs.agents.base import ActRequest
    from llm_trainers.agents.hf import HFAgent, SamplingParams
    from llm_trainers.trainer import Trainer

    cfg = load_config("signalling_at_grpo_l1", [f"run.output_dir={tmp_path / 'run'}", "run.steps=1",
                                                 "run.eval_every=-1", "run.progress=false", "run.tensorboard=false",
                                                 "env.num_envs=4", "rollout.k=2", "model.lora={r: 4, alpha: 8}",
                                                 "train.lr=1e-2"])
    trainer = Trainer(cfg)
    trainer.train()
    trainer.close()
    final = tmp_path / "run" / "final" / "shared"
    assert (final / "adapter_config.json").is_file() and not (final / "shared").exists()
    assert json.loads((tmp_path / "run" / "final" / "policies.json").read_text())["policies"]["shared"] == str(final)
    obs = {"instruction": "You are the listener.", "prompt": "Message: green"}
    legacy = tmp_path / "legacy" / "shared"
    shutil.copytree(final, legacy / "shared")
    for path in (final, legacy):
        agent = HFAgent.from_pretrained(str(path), sampling=SamplingParams(temperature=0.0, max_new_tokens=1),
                                        device="cpu", threads=1)
        out = agent.act_batch([ActRequest(obs, "listener")])[0]
        expected = trainer.learner.logprobs("shared", [out.prompt_token_ids], [out.token_ids])[0]
        assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-5), path


def test_a_step_without_gradient_runs_no_update(tmp_path):
    """Greedy candidates are identical, so every AT-GRPO group is all-equal and every advantage
    is 0: the policy is neither scored nor updated (weights and optimizer untouched, the
    schedule still advances) and the step says so. With an entropy bonus the loss has a gradient
    even at A = 0, and the update runs."""
    from llm_trainers.trainer import Trainer

    def run(out, *extra):
        cfg = load_config("signalling_at_grpo_l1", [f"run.output_dir={out}", "run.steps=1", "run.eval_every=-1",
                                                     "run.progress=false", "run.tensorboard=false", "env.num_envs=4",
                                                     "rollout.k=2", "rollout.temperature=0", "run.export_final=false",
                                                     *extra])
        trainer = Trainer(cfg)
        before = {k: v.clone() for k, v in trainer.policies["shared"].trainable_state_dict().items()}
        metrics = trainer.train_step()
        after = trainer.policies["shared"].trainable_state_dict()
        trainer.close()
        changed = any(not torch.equal(before[k], after[k]) for k in before)
        return metrics, changed, trainer

    metrics, changed, trainer = run(tmp_path / "zero")
    assert metrics["rollout/uniform_group_frac"] == 1.0
    assert metrics["train/shared/skipped_zero_advantage"] == 1.0 and metrics["rollout/trained_records"] == 0
    # No forward or backward pass, but the optimizer steps on zero gradients (as the released
    # code's step does): on the run's first step AdamW has no momentum and no decay here, so
    # the weights stay.
    assert not changed and trainer.cfg.train.weight_decay == 0.0
    assert metrics["train/shared/zero_gradient_steps"] >= 1
    assert all(float(state["step"]) == metrics["train/shared/zero_gradient_steps"]
               for state in trainer.learner.optimizers["shared"].state.values())
    assert trainer.learner.schedulers["shared"].last_epoch == 1
    metrics, changed, _ = run(tmp_path / "entropy", "train.entropy_coef=0.01")
    assert metrics["train/shared/skipped_zero_advantage"] == 0.0 and changed


def test_cli_list_says_what_each_config_is_and_what_it_runs_on(capsys):
    assert main(["--list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(lines) == set(shipped_configs())
    assert "  CPU  " in lines["signalling_at_grpo_l1"] and "AT-GRPO, L1 (shared model)" in lines["signalling_at_grpo_l1"]
    assert "GPU (vLLM engine)" in lines["plan_path_at_grpo_l2"]
    assert "CPU (vLLM's CPU build)" in lines["signalling_smollm2_vllm_cpu"]  # model.device: cpu
    assert "GPUs (Ray)" in lines["plan_path_at_grpo_l3_2x8gpu"]


def test_cli_errors_say_what_to_do_at_once(capsys, tmp_path, monkeypatch):
    """A mistyped config name gets a suggestion (no Python list, no stray quotes); a missing
    model path, a hub model that cannot be fetched, and a GPU config on a CPU machine are
    refused before anything is loaded."""
    assert main(["signaling_at_grpo_l1"]) == 2
    err = capsys.readouterr().err
    assert "did you mean signalling_at_grpo_l1" in err and "['" not in err and "\"" not in err
    out = f"run.output_dir={tmp_path / 'run'}"
    assert main(["signalling_at_grpo_l1", out, "model.path=/nonexistent/model"]) == 2
    assert "no model at /nonexistent/model" in capsys.readouterr().err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["signalling_at_grpo_l1", out, "model.path=no-such-org/no-such-model-here"]) == 2
    err = capsys.readouterr().err
    assert "hub id that is not in the local cache, and HF_HUB_OFFLINE is set" in err
    if not torch.cuda.is_available():
        assert main(["plan_path_at_grpo_l2", out]) == 2
        assert "needs a GPU (rollout.engine: vllm)" in capsys.readouterr().err
    if importlib.util.find_spec("vllm") is None:  # a CPU vLLM config, in an environment without vLLM
        assert main(["signalling_smollm2_vllm_cpu", out]) == 2
        assert "need vLLM (rollout.engine: vllm)" in capsys.readouterr().err
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing was started


def test_a_config_that_is_not_valid_yaml_is_one_line_and_exit_2(capsys, tmp_path):
    # (a YAML syntax error in the file or in an override ended in a 30-line traceback, exit 1; a
    # missing base named the folder; a section given twice kept the last one without a word)
    broken = tmp_path / "broken.yaml"
    broken.write_text("run:\n  steps: [1\n")
    twice = tmp_path / "twice.yaml"
    twice.write_text("run:\n  steps: 2\nrun:\n  steps: 3\n")
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text("base: nosuchbase\n")
    for argv, words in (
        ([str(broken)], f"{broken} is not valid YAML"),
        (["signalling_at_grpo_l1", "run.steps=[1"], "override 'run.steps=[1': the value is not valid YAML"),
        ([str(twice)], "the key 'run' is given twice"),
        ([str(orphan)], f"no config file nosuchbase (named by {orphan})"),
    ):
        assert main([*argv, "--print-config"]) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_ctrl_c_exits_with_the_resume_command(tmp_path):
    """SIGINT during training: exit 130 and the command that continues the run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "run"
    arguments = ["signalling_at_grpo_l1", f"run.output_dir={out}", "run.steps=10000", "run.save_every=1",
                 "run.eval_every=-1", "run.eval_at_start=false", "run.progress=false", "env.num_envs=2", "rollout.k=2"]
    # A terminal's foreground process starts with SIGINT at its default; a test run started as a
    # background job of a non-interactive shell (`... &`, as CI scripts do) inherits SIGINT
    # *ignored*, and Python then never raises KeyboardInterrupt: the run would not stop at all.
    # (That, not the trainer, is why this test once failed on such runs.) So the child puts the
    # default back before it runs the real command line.
    command = [sys.executable, "-c",
               "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
               "sys.argv = ['llm-train', *sys.argv[1:]]; runpy.run_module('llm_trainers.cli', run_name='__main__')",
               *arguments]
    # PYTHONFAULTHANDLER: if the run ignores the interrupt, SIGABRT makes it print every
    # thread's stack, so the failure says where it was stuck.
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "latest").exists() and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            _, err = process.communicate(timeout=60)
            raise AssertionError("llm-train did not stop within 300 s of SIGINT; its threads:\n" + err[-6000:]) from None
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err[-3000:]
    assert "llm-train: interrupted at step" in err and "Traceback" not in err
    assert f"llm-train signalling_at_grpo_l1 run.output_dir={out}" in err and "--resume" in err


def test_config_description_is_the_first_sentence_never_cut_mid_phrase_silently(tmp_path):
    from llm_trainers.config import config_description

    path = tmp_path / "c.yaml"
    path.write_text("# AT-GRPO on the real testbed: SmolLM2-135M-\n# Instruct, one adapter. Second sentence.\nrun: {}\n")
    assert config_description(path) == "AT-GRPO on the real testbed: SmolLM2-135M-Instruct, one adapter."
    path.write_text("#\n# " + "word " * 40 + "\n# more\nrun: {}\n")
    cut = config_description(path, limit=30)
    assert cut == "word word word word word ..." and len(cut) <= 30
    path.write_text("run: {}\n# a comment after the start is not a description\n")
    assert config_description(path) == ""


def test_a_damaged_checkpoint_is_never_taken_for_no_run_nor_loaded_half(capsys, tmp_path):
    """``checkpoints/latest`` naming a removed step made the directory look empty: a new run
    (neither --resume nor --overwrite) cut the old run's metrics and replaced its checkpoints;
    an empty pointer resolved to the checkpoints directory itself (KeyError: 'policies'); a
    checkpoint missing a part, or with a truncated one, failed with a bare traceback."""
    import shutil

    from llm_trainers import checkpoint

    out = tmp_path / "run"
    ckpts = out / "checkpoints"
    parts = {"policies": {"shared": {}}, "learner": {}, "state": {"step": 0}}
    for step in (2, 4):
        checkpoint.save_checkpoint(ckpts, step, parts)
    shutil.rmtree(ckpts / "step_00000004")  # `latest` still names it
    base = ["signalling_at_grpo_l1", f"run.output_dir={out}", "model.path=tiny:llm/Signalling-v0"]
    for argv in (base, [*base, "--resume"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "names 'step_00000004'" in err and "the checkpoints left are step_00000002" in err, err
    assert (ckpts / "step_00000002").is_dir()  # nothing was touched
    for garbage in ("", "..", "step_00000004/../step_00000002"):
        (ckpts / "latest").write_text(garbage)
        with pytest.raises(checkpoint.CheckpointError, match="not a checkpoint directory"):
            checkpoint.latest_checkpoint(ckpts)
    (ckpts / "latest").unlink()
    with pytest.raises(checkpoint.CheckpointError, match="no 'latest' pointer"):
        checkpoint.latest_checkpoint(ckpts)
    assert checkpoint.latest_checkpoint(tmp_path / "nothing") is None
    checkpoint.save_checkpoint(ckpts, 6, parts)
    (ckpts / "step_00000006" / "policies.pt").unlink()
    with pytest.raises(checkpoint.CheckpointError, match="lacks policies.pt; the earlier checkpoints are step_00000002"):
        checkpoint.load_checkpoint(checkpoint.latest_checkpoint(ckpts), required=("policies", "learner", "state"))
    # (its manifest.json lists the part: a load of any part refuses the checkpoint)
    with pytest.raises(checkpoint.CheckpointError, match="lacks policies.pt, which its manifest.json lists"):
        checkpoint.load_checkpoint(ckpts / "step_00000006")
    checkpoint.save_checkpoint(ckpts, 8, parts)
    state = ckpts / "step_00000008" / "state.pt"
    state.write_bytes(state.read_bytes()[:20])
    with pytest.raises(checkpoint.CheckpointError, match=f"cannot read {state}"):
        checkpoint.load_checkpoint(ckpts / "step_00000008")
    (ckpts / "step_00000008" / "manifest.json").unlink()  # a checkpoint from before manifests: torch's own error
    with pytest.raises(checkpoint.CheckpointError, match=f"cannot read {state} \\("):
        checkpoint.load_checkpoint(ckpts / "step_00000008")


@pytest.mark.parametrize(("override", "says"), [
    ("env.id=llm/Signaling-v0", "did you mean llm/Signalling-v0"),
    ("env.kwargs.num_symbolz=3", "env.kwargs: llm/Signalling-v0 has no option 'num_symbolz'"),
    ("env.eval_kwargs.splt=test", "env.eval_kwargs: llm/Signalling-v0 has no option 'splt'"),
    ("env.curriculum={option: symbolz, levels: [1, 2]}", "env.curriculum.option: llm/Signalling-v0 has no option 'symbolz'"),
    ("sft.env_kwargs={roundz: 2}", "sft.env_kwargs: llm/Signalling-v0 has no option 'roundz'"),
    ("model.device=gpu", "model.device must be auto, cpu, cuda"),
    ("model.dtype=float8", "model.dtype must be one of"),
])
def test_environment_and_device_typos_are_config_errors_before_anything_runs(override, says):
    # (each passed --print-config and failed later with a traceback: PettingZoo's list of every
    # environment it knows, a TypeError when the first environment was built, torch's device parser)
    with pytest.raises(ValueError, match=re.escape(says)):
        load_config("signalling_at_grpo_l1", [override])


def test_llm_envs_make_names_the_closest_environment():
    import llm_envs
    from llm_envs.registry import UnknownEnvironmentError

    with pytest.raises(UnknownEnvironmentError, match="did you mean llm/Signalling-v0") as raised:
        llm_envs.make("llm/Signaling-v0")
    assert "atari" not in str(raised.value)
    with pytest.raises(KeyError):  # (a lookup error, as before)
        llm_envs.entry("llm/Nope-v0")
