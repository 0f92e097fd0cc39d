"""Agent specs: parsing, per-agent assignments, the YAML file, and building agents."""

from __future__ import annotations

import importlib
import importlib.util
import textwrap

import pytest

from llm_envs.agents import RandomAgent, ReferenceAgent
from llm_envs.agents.human import HumanAgent
from llm_envs.agents.openai_http import OpenAIHTTPAgent
from llm_envs.agents.spec import (
    AgentSpec,
    AgentSpecError,
    build_agent,
    load_agents_config,
    parse_agent_spec,
    parse_assignment,
    parse_assignments,
    resolve_agents,
)
from llm_envs.runner import run_episodes
from tests.runner.toy_envs import SumsEnv


@pytest.mark.parametrize(
    "text,kind,target,model",
    [
        ("reference", "reference", "", ""),
        ("random", "random", "", ""),
        ("random:12", "random", "12", ""),
        ("human", "human", "", ""),
        ("openai:http://127.0.0.1:8000/v1@my-model", "openai", "http://127.0.0.1:8000/v1", "my-model"),
        ("openai:https://user@host/v1@org/model@v2", "openai", "https://user@host/v1@org/model", "v2"),
        ("openai:gpt-4o-mini", "openai", "", "gpt-4o-mini"),
        ("hf:/models/qwen", "hf", "/models/qwen", ""),
        ("vllm:Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct", ""),
        ("py:my_pkg.agents:make_agent", "py", "my_pkg.agents:make_agent", ""),
    ],
)
def test_parse_and_round_trip(text, kind, target, model):
    spec = parse_agent_spec(text)
    assert (spec.kind, spec.target, spec.model) == (kind, target, model)
    # A URL's user-info is never shown (it may be a password); everything else round-trips.
    shown = text.replace("://user@", "://***@")
    assert str(spec) == shown
    if shown == text:
        assert parse_agent_spec(str(spec)) == spec


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "empty"),
        ("gpt4", "unknown agent kind"),
        ("reference:3", "takes no argument"),
        ("random:x", "integer seed"),
        ("openai:", "needs an argument"),
        ("openai:http://host/v1@", "no model"),
        ("openai:localhost:8000/v1@m", "not a URL"),
        ("py:module_only", "MODULE:ATTR"),
        # A server address where the model name goes: never sent to the default (hosted) server.
        ("openai:http://127.0.0.1:1/v1", "server address, not a model name"),
        ("openai:https://example.org/v1", "server address"),
        ("openai:http:/127.0.0.1:8000/v1", "server address"),
        ("openai:localhost:8000", "server address"),
        ("openai:10.0.0.5:8000/v1", "server address"),
        ("openai:www.example.org", "server address"),
        ("openai:my-server/v1", "server address"),
        ("openai:http://h:1/v1@http://h:1/v1", "server address"),
        ("openai:http//127.0.0.1:8000/v1@m", "not a URL"),
        ("openai:ftp://host/v1@m", "not a URL"),
    ],
)
def test_bad_specs_say_what_is_wrong(text, message):
    with pytest.raises(AgentSpecError, match=message):
        parse_agent_spec(text)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "meta-llama/Llama-3.1-8B-Instruct", "llama3:70b", "org/v2-chat"])
def test_model_names_are_not_mistaken_for_addresses(model):
    assert parse_agent_spec(f"openai:{model}").model == model
    assert parse_agent_spec(f"openai:http://h:1/v1@{model}").model == model


def test_the_hosted_api_without_a_key_is_refused_before_any_request(monkeypatch):
    """``openai:MODEL`` with neither OPENAI_BASE_URL nor a key would send the prompts to the
    hosted API only to be refused: an error before anything is sent."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AgentSpecError, match="hosted OpenAI API.*OPENAI_API_KEY is not set"):
        build_agent("openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    agent = build_agent("openai:gpt-4o-mini")
    assert agent.base_url.startswith("http://127.0.0.1:9")
    agent.close()
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    build_agent("openai:gpt-4o-mini").close()


def test_assignments():
    assert parse_assignment("tool=hf:/a=b") == ("tool", AgentSpec("hf", "/a=b"))
    assert parse_assignment("hf:/a=b") == (None, AgentSpec("hf", "/a=b"))
    assert parse_assignment("default=random") == (None, AgentSpec("random"))
    assert parse_assignment("plan=openai:http://h:1/v1@m")[0] == "plan"
    with pytest.raises(AgentSpecError, match="assigned twice"):
        parse_assignments(["tool=reference", "tool=random"])


def test_resolve_shares_identical_specs_and_applies_model_defaults():
    agents = resolve_agents(
        parse_assignments(["alice=openai:http://127.0.0.1:9/v1@m", "openai:http://127.0.0.1:9/v1@m"]),
        ["alice", "bob"],
        model_defaults={"temperature": 0.2, "max_tokens": 64, "top_p": None},
    )
    assert agents["alice"] is agents["bob"]  # one model for both roles: shared batches
    assert isinstance(agents["alice"], OpenAIHTTPAgent)
    assert agents["alice"].sampling == {"temperature": 0.2, "max_tokens": 64}
    assert agents["alice"].name == "openai:http://127.0.0.1:9/v1@m"

    agents = resolve_agents(
        {"alice": "random:3", None: "reference"}, ["alice", "bob"], model_defaults={"temperature": 1.0}
    )
    assert isinstance(agents["alice"], RandomAgent) and agents["alice"].name == "random:3"
    assert isinstance(agents["bob"], ReferenceAgent)


def test_resolve_errors_name_the_agents():
    with pytest.raises(AgentSpecError, match="its agents are: alice, bob"):
        resolve_agents({"carol": "reference"}, ["alice", "bob"])
    with pytest.raises(AgentSpecError, match="no agent for 'bob'"):
        resolve_agents({"alice": "reference"}, ["alice", "bob"])
    assert isinstance(resolve_agents({}, ["alice"], default="human")["alice"], HumanAgent)


def test_yaml_file_with_options(tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(
        textwrap.dedent(
            """
        agents:
          default: reference
          alice:
            spec: openai:http://127.0.0.1:9/v1@m
            temperature: 0.7
            max_concurrency: 3
        """
        )
    )
    assignments = load_agents_config(path)
    assert set(assignments) == {None, "alice"}
    agents = resolve_agents(
        assignments, ["alice", "bob"], model_defaults={"temperature": 0.0, "max_tokens": 9}
    )
    alice = agents["alice"]
    assert alice.sampling == {"temperature": 0.7, "max_tokens": 9}  # the file's value wins
    assert alice.max_concurrency == 3
    assert isinstance(agents["bob"], ReferenceAgent)

    path.write_text("alice:\n  spec: openai:http://h/v1@m\n  temprature: 0.7\n")
    with pytest.raises(AgentSpecError, match="unknown option.*temprature"):
        resolve_agents(load_agents_config(path), ["alice"])
    path.write_text("alice: [1, 2]\n")
    with pytest.raises(AgentSpecError, match="must be a spec string"):
        load_agents_config(path)
    # A key given twice: YAML kept the last one, and the run played it without a word.
    path.write_text("speaker: random\nspeaker: reference\n")
    with pytest.raises(AgentSpecError, match="'speaker' is given twice"):
        load_agents_config(path)
    path.write_text("alice:\n  spec: random\n  temperature: 0.1\n  temperature: 0.2\n")
    with pytest.raises(AgentSpecError, match="'temperature' is given twice"):
        load_agents_config(path)


class EchoAgent(ReferenceAgent):
    name = "echo"

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix


def make_echo(prefix: str = "") -> EchoAgent:
    return EchoAgent(prefix)


def test_py_spec_builds_any_agent():
    agent = build_agent(parse_agent_spec(f"py:{__name__}:make_echo").with_options({"prefix": "x"}))
    assert isinstance(agent, EchoAgent) and agent.prefix == "x" and agent.name == "echo"
    with pytest.raises(AgentSpecError, match="cannot import"):
        build_agent(f"py:{__name__}:missing")


def test_torch_agents_explain_missing_extras(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("torch", "vllm") else real_find_spec(name, *a),
    )
    with pytest.raises(AgentSpecError, match=r"need torch.*pip install 'llm-envs\[train\]'"):
        build_agent("hf:/some/model")
    with pytest.raises(AgentSpecError, match=r"need vllm.*pip install 'llm-envs\[vllm\]'"):
        build_agent("vllm:/some/model")


@pytest.mark.slow  # imports torch and transformers (a few seconds)
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs the torch extras",
)
def test_hf_spec_builds_a_local_model_that_plays(tmp_path):
    from llm_trainers.tiny import build_tiny_model
    env = SumsEnv()
    env.reset(seed=0)
    texts = [env.observe("alice")["instruction"], env.observe("alice")["prompt"]] + [
        str(i) for i in range(100)
    ]
    path = build_tiny_model(
        tmp_path / "tiny",
        texts,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
    )
    agents = resolve_agents(
        {None: f"hf:{path}"},
        ["alice", "bob"],
        model_defaults={"max_tokens": 4, "temperature": 1.0, "stop": ["x"]},
    )
    agent = agents["alice"]
    assert agents["bob"] is agent and agent.name == f"hf:{path}"
    results = run_episodes(SumsEnv, agent, 4, concurrency=4)
    steps = [s for r in results for s in r.steps]
    assert len(steps) == 16 and all(s["error"] is None for s in steps)
    assert all(0 < s["completion_tokens"] <= 4 and s["prompt_tokens"] > 0 for s in steps)


@pytest.mark.parametrize(
    "spec",
    [
        AgentSpec("reference"),
        AgentSpec("random", "3"),
        AgentSpec("random"),
        parse_agent_spec("openai:http://127.0.0.1:9/v1@m").with_options(
            {"temperature": 0.2, "max_tokens": 64, "timeout_s": 5.0, "max_concurrency": 2, "name": "x"}
        ),
    ],
    ids=str,
)
def test_spec_settings_equal_the_built_agents_settings(spec, tmp_path):
    """What an evaluation on Ray records (computed in the driver) is what a local run records."""
    from llm_envs.agents.spec import spec_settings

    cache = tmp_path / "cache.sqlite"
    if spec.kind == "openai":
        spec = spec.with_options({"cache": str(cache)})
    recorded = spec_settings(spec)
    assert not cache.exists(), "reading the settings opens no cache, no connection"
    agent = build_agent(spec)
    try:
        assert recorded == agent.settings()
    finally:
        agent.close()
    assert spec_settings(AgentSpec("py", "tests.distributed.crash_agent:FlakyAgent")) is None


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_model_agents_settings_come_from_the_spec_alone(kind):
    """hf/vllm settings are computed without loading a model: Agent.settings' default plus every
    effective sampling setting, defaults included (that an agent built from the spec reports the
    same is tested in tests/trainers/test_threads_and_sampling_settings.py)."""
    pytest.importorskip("torch", reason="the hf/vllm agent classes need the 'train' extra")
    from llm_envs.agents.base import Agent
    from llm_envs.agents.spec import _load_torch_agent, spec_settings

    cls = _load_torch_agent("hf") if kind == "hf" else importlib.import_module("llm_trainers.agents.vllm").VLLMAgent
    assert cls.settings is not Agent.settings
    spec = AgentSpec(kind, "/models/m", options=(("max_tokens", 8), ("temperature", 0.5), ("timeout_s", 3)))
    assert spec_settings(spec) == {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "name": f"{kind}:/models/m",
        "spec": f"{kind}:/models/m",
        "options": {"max_tokens": 8, "temperature": 0.5},
        "sampling": {"temperature": 0.5, "top_p": 1.0, "top_k": 0, "max_new_tokens": 8, "stop_token_ids": [],
                     "seed": 0},
    }


def test_hf_model_typos_are_user_errors_before_anything_loads(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    with pytest.raises(AgentSpecError, match=r"did you mean hf:smollm2"):
        build_agent("hf:smolm2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AgentSpecError, match="neither a local model nor in the Hugging Face cache"):
        build_agent("hf:no-such-org/no-such-model-here")


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("openai:http://127.0.0.1:9/v1@m", {"temperature": "hot"}, "option temperature must be a number, got 'hot'"),
        ("openai:http://127.0.0.1:9/v1@m", {"max_tokens": 2.5}, "option max_tokens must be a whole number"),
        ("openai:http://127.0.0.1:9/v1@m", {"logprobs": "yes"}, "option logprobs must be true or false"),
        ("random:1", {"per_decision_seed": 1}, "option per_decision_seed must be true or false"),
        # numbers of the right kind out of range (a temperature of -1 was sent to the server)
        ("openai:http://127.0.0.1:9/v1@m", {"temperature": -1}, "option temperature must be a finite number >= 0"),
        ("openai:http://127.0.0.1:9/v1@m", {"temperature": float("nan")}, "option temperature must be a number, got NaN"),
        ("openai:http://127.0.0.1:9/v1@m", {"top_p": 2.0}, r"option top_p must be in \(0, 1\]"),
        # text, texts, paths and mappings ('int' object is not iterable, naming no option)
        ("openai:http://127.0.0.1:9/v1@m", {"extra_body": 5}, "option extra_body must be a mapping, got 5"),
        ("openai:http://127.0.0.1:9/v1@m", {"stop": 5}, "option stop must be text or a list of texts"),
        ("openai:http://127.0.0.1:9/v1@m", {"stop": ["a", 1]}, "option stop must be text or a list of texts"),
        ("openai:http://127.0.0.1:9/v1@m", {"cache": {"a": 1}}, "option cache must be a path"),
        ("openai:http://127.0.0.1:9/v1@m", {"api_key_env": 5}, "option api_key_env must be text, got 5"),
        ("openai:http://127.0.0.1:9/v1@m", {"headers": {"X-A": 1}}, "option headers must be a mapping of text to text"),
    ],
)
def test_an_option_of_the_wrong_kind_is_refused_before_anything_is_sent(spec, options, message):
    # (an agents file's `temperature: hot` went to the server as it was)
    with pytest.raises(AgentSpecError, match=message):
        build_agent(parse_agent_spec(spec).with_options(options))
    build_agent(parse_agent_spec("openai:http://127.0.0.1:9/v1@m").with_options({"temperature": None, "max_tokens": 64.0}))
    build_agent(parse_agent_spec("openai:http://127.0.0.1:9/v1@m").with_options(
        {"stop": ["a", "b"], "extra_body": {"top_k": 5}, "headers": {"X-A": "1"}}))
