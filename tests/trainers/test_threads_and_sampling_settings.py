"""Torch threads from the CPUs a process may use; every effective sampling setting in run.json."""

from __future__ import annotations

import json
import os

import pytest
import torch

from llm_envs.agents.spec import AgentSpecError, resolve_specs, spec_settings
from llm_envs.cli import main as llm_envs_main
from llm_trainers.sampling import SamplingParams, effective_sampling
from llm_trainers.threads import cgroup_cpu_limit, resolve_threads, set_torch_threads, usable_cpus


def _cgroup(tmp_path, **files):
    for name, text in files.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_cgroup_quota_caps_the_thread_count(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    assert cgroup_cpu_limit(_cgroup(tmp_path / "v2max", **{"cpu.max": "max 100000\n"})) is None
    half = _cgroup(tmp_path / "v2half", **{"cpu.max": "50000 100000\n"})
    assert cgroup_cpu_limit(half) == 0.5 and usable_cpus(half) == 1  # never 0
    big = _cgroup(tmp_path / "v2big", **{"cpu.max": f"{(affinity + 8) * 100000} 100000\n"})
    assert usable_cpus(big) == affinity  # the affinity mask is the tighter bound
    v1 = _cgroup(tmp_path / "v1", **{"cpu__cpu.cfs_quota_us": "150000\n", "cpu__cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_limit(v1) == 1.5 and usable_cpus(v1) == 1
    unlimited = _cgroup(tmp_path / "v1u", **{"cpu__cpu.cfs_quota_us": "-1\n", "cpu__cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_limit(unlimited) is None
    assert usable_cpus(tmp_path / "nothing-here") == affinity


def test_thread_count_precedence():
    assert resolve_threads(3, environ={"OMP_NUM_THREADS": "1"}) == 3
    assert resolve_threads(None, environ={"OMP_NUM_THREADS": "2"}) == 2
    assert resolve_threads(None, environ={"OMP_NUM_THREADS": "junk"}) == usable_cpus()
    assert resolve_threads(None, environ={}) == usable_cpus()
    with pytest.raises(ValueError, match=">= 1"):
        resolve_threads(0)
    before = torch.get_num_threads()
    try:
        assert set_torch_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_llm_train_validates_threads():
    from llm_trainers.config import load_config

    with pytest.raises(ValueError, match="run.threads"):
        load_config("signalling_at_grpo_l1", ["run.threads=0"]).validate()


def test_sampling_params_refuse_values_that_mean_nothing():
    for bad in ({"max_new_tokens": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_k": -1}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_effective_sampling_records_defaults():
    assert effective_sampling({}) == {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 256,
                                      "stop_token_ids": [], "seed": 0}
    assert effective_sampling({"max_tokens": 7, "temperature": 0.0, "seed": 5})["max_new_tokens"] == 7


def test_max_tokens_zero_is_refused_for_local_models_and_means_no_limit_for_servers():
    defaults = {"max_tokens": 0}
    with pytest.raises(AgentSpecError, match="--max-tokens 0"):
        resolve_specs({None: "hf:some/model"}, ["a"], model_defaults=defaults)
    spec = resolve_specs({None: "openai:http://127.0.0.1:1/v1@m"}, ["a"], model_defaults=defaults)["a"]
    assert spec.option_dict["max_tokens"] is None
    assert "max_tokens" not in spec_settings(spec)["sampling"]  # nothing is sent: the server decides


def test_run_json_records_every_effective_sampling_setting(tiny_model_dir, tmp_path, capsys):
    """A default run shows that it decoded greedily (eval's default temperature 0), top-p 1,
    seed 0 and the CLI's completion limit; the fingerprint changes with the temperature even when it is the default
    written out (it must: a default is a setting), and the Ray path computes the same record."""
    def run(out, *extra):
        code = llm_envs_main(["eval", "llm/Signalling-v0", "--agent", f"hf:{tiny_model_dir}", "--episodes", "2",
                              "--max-tokens", "2", "--threads", "1", "--out", str(out), "--no-plot", "--no-report",
                              "--no-progress", *extra])
        assert code == 0, capsys.readouterr().err
        return json.loads((out / "run.json").read_text())

    before = torch.get_num_threads()
    try:
        default = run(tmp_path / "default")
        agent = default["settings"]["agents"]["speaker"]
        assert agent["sampling"] == {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 2,
                                     "stop_token_ids": [], "seed": 0}
        assert "threads" not in agent["options"]  # how fast, not what: no effect on the fingerprint
        cooler = run(tmp_path / "cooler", "--temperature", "0.5")
        assert cooler["settings"]["agents"]["speaker"]["sampling"]["temperature"] == 0.5
        assert cooler["fingerprint"] != default["fingerprint"]
        from llm_envs.agents.spec import parse_agent_spec

        spec = parse_agent_spec(f"hf:{tiny_model_dir}").with_options(
            {"max_new_tokens": 2, "threads": 1, "temperature": 0.0}
        )
        assert spec_settings(spec)["sampling"] == agent["sampling"]
        assert torch.get_num_threads() == 1  # --threads reached torch
    finally:
        torch.set_num_threads(before)


def test_hf_agent_settings_equal_those_computed_from_its_spec(tiny_model_dir):
    from llm_envs.agents.spec import build_agent, parse_agent_spec

    spec = parse_agent_spec(f"hf:{tiny_model_dir}").with_options(
        {"max_tokens": 3, "top_p": 0.9, "seed": 4, "threads": 1, "device": "cpu"})
    before = torch.get_num_threads()
    agent = build_agent(spec)
    try:
        assert agent.settings() == spec_settings(spec)
        assert agent.settings()["sampling"]["max_new_tokens"] == 3 and agent.settings()["sampling"]["seed"] == 4
    finally:
        agent.close()
        torch.set_num_threads(before)
