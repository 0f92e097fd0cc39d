"""The HTTP agent against servers that refuse, abort, flood or leak: what counts as the model's
answer, what is a failure (and which kind), and what may be written (docs/evaluation.md,
"Infrastructure failures are not model results", "A response cache", "A hosted API")."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from llm_envs.agents import ActRequest, AgentError, ResponseCache
from llm_envs.agents.cache import cache_key
from llm_envs.agents.openai_http import MIN_RESPONSE_BYTES, OpenAIHTTPAgent, redact_text, redact_url
from llm_envs.agents.spec import AgentSpecError, build_agent, parse_agent_spec, spec_settings
from llm_envs.episodes import IncompleteRunError, load_episodes
from llm_envs.runner import run_episodes
from tests.agents.chat_server import ChatServer
from tests.runner.toy_envs import SumsEnv, solve_prompt

STEPS = 4  # decisions of a SumsEnv episode (two rounds of alice and bob)

# vLLM's words when max_tokens alone passes the context, and when a prompt leaves less room
# than max_tokens (the numbers are filled in per test).
VLLM_TOO_LARGE = ("'max_tokens' or 'max_completion_tokens' is too large: {n}. This model's maximum context "
                  "length is {c} tokens and your request has {i} input tokens ({n} > {c} - {i}).")
LLAMA_CPP_OVERFLOW = {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                "increasing it", "type": "exceed_context_size_error"}}


class HostileServer(ChatServer):
    """The test chat server with two more replies: ``gzip-bomb:N`` (a small gzip body that
    unpacks to an answer of N bytes) and ``big:N`` (an answer of N bytes, plainly). It takes
    requests with a query string too (kept in ``queries``)."""

    queries: list[str]

    def _handle(self, handler: Any) -> None:
        path, _, query = handler.path.partition("?")
        self.queries = [*getattr(self, "queries", []), query]
        handler.path = path
        super()._handle(handler)

    def _respond(self, handler: Any, action: str, body: dict[str, Any]) -> None:
        kind, _, arg = action.partition(":")
        if kind in ("gzip-bomb", "big"):
            reply = json.dumps({"choices": [{"message": {"content": "7" + " " * int(arg)}, "finish_reason": "stop"}]})
            payload = reply.encode()
            headers = {}
            if kind == "gzip-bomb":
                payload, headers = gzip.compress(payload), {"Content-Encoding": "gzip"}
            self._send_raw(handler, 200, payload, "application/json", headers)
            return
        super()._respond(handler, action, body)


@pytest.fixture
def server():
    with HostileServer() as chat:
        yield chat


def _agent(server: ChatServer, **kwargs: Any) -> OpenAIHTTPAgent:
    kwargs.setdefault("backoff_initial_s", 0.001)
    kwargs.setdefault("timeout_s", 10.0)
    return OpenAIHTTPAgent(server.base_url, "test-model", **kwargs)


def _request(seed: int = 0, decision: int = 0) -> ActRequest:
    env = SumsEnv()
    env.reset(seed=seed)
    return ActRequest(env.observe("alice"), "alice", episode_seed=seed, decision=decision)


def _refuse(server: ChatServer, payload: Any, status: int = 400) -> None:
    server.status_body = (status, payload)
    server.plan = lambda number, body: "body-status"


# ---------------------------------------------------------------------------- F1: context refusals
def test_max_tokens_that_alone_fills_the_context_is_a_configuration_error(server, tmp_path):
    """vLLM's "'max_tokens' ... is too large: 1024. This model's maximum context length is 512
    tokens" was played as the model's empty answer on every call (exit 0, a hopeless model);
    no prompt can ever fit, so it is a client error that stops the run at once."""
    _refuse(server, {"object": "error", "message": VLLM_TOO_LARGE.format(n=1024, c=512, i=41), "code": 400})
    [output] = _agent(server, max_retries=3).act_batch([_request()])
    assert output.meta["error_kind"] == "client_error" and "lower --max-tokens" in output.error
    assert len(server.requests) == 1
    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, _agent(server), num_episodes=4, concurrency=2, out_path=path)
    assert info.value.configuration_error is not None and load_episodes(path) == []
    assert "Check --max-tokens against the server's context length" in str(info.value)
    assert "API key" not in str(info.value)


def test_a_prompt_that_fits_with_less_room_than_max_tokens_is_answered_up_to_the_context(server):
    """The prompt fits (1500 of 2048 tokens) but not with 1024 more: sent again with the 548
    tokens left, the completion ends at the context as a local engine's does."""

    def plan(number: int, body: dict[str, Any]) -> str:
        if body["max_tokens"] > 548:
            server.status_body = (400, {"object": "error", "message": VLLM_TOO_LARGE.format(
                n=body["max_tokens"], c=2048, i=1500)})
            return "body-status"
        return "ok"

    server.plan = plan
    [output] = _agent(server, max_retries=0).act_batch([_request()])
    assert output.error is None and output.text == solve_prompt(_request().observation["prompt"])
    assert [r["max_tokens"] for r in server.requests] == [1024, 548] and output.meta["max_tokens_sent"] == 548


def test_a_run_whose_every_call_is_refused_for_context_writes_nothing_and_is_a_configuration_error(server, tmp_path):
    """A server that refuses every prompt as too long (llama.cpp gives no numbers) measured
    nothing about the model: before, every episode was written as the model's empty answers
    (exit 0). Now the run is a configuration error with no episode written, and a resume after
    the fix plays every episode."""
    _refuse(server, LLAMA_CPP_OVERFLOW)
    path = tmp_path / "e.jsonl"
    agent = _agent(server)
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, agent, num_episodes=3, concurrency=2, out_path=path)
    assert info.value.configuration_error is not None
    assert "context" in str(info.value.configuration_error) and "API key" not in str(info.value)
    assert load_episodes(path) == [] and {f.reason for f in info.value.failures} == {"client_error"}
    server.plan = lambda number, body: "ok"
    results = run_episodes(SumsEnv, agent, num_episodes=3, concurrency=2, out_path=path, resume=True)
    assert [e.success for e in results] == [1.0, 1.0, 1.0]


def test_episodes_refused_before_the_first_real_answer_are_written_once_it_comes(server, tmp_path):
    """The first episode's prompts are refused (too long) before any real answer: held, then
    written as the model's empty answers once the agent has answered for real; the summary's
    call counts say how many answers were refusals."""
    server.status_body = (400, LLAMA_CPP_OVERFLOW)
    server.plan = lambda number, body: "body-status" if number < STEPS else "ok"
    from llm_envs.runner import Runner

    runner = Runner(SumsEnv, _agent(server), 3, concurrency=1, out_path=tmp_path / "e.jsonl")
    results = runner.run()
    # (episode 0 waited for the first real answer, so it is written after episode 1)
    assert [e.index for e in load_episodes(tmp_path / "e.jsonl")] == [1, 0, 2]
    assert [s["meta"]["finish_reason"] for s in results[0].steps] == ["context_length"] * STEPS
    assert results[0].success == 0.0 and results[1].success == 1.0
    assert runner.stats[0]["context_length_answers"] == STEPS and runner.progress.context_length == STEPS


def test_real_answers_in_the_resumed_episodes_prove_that_the_prompts_can_fit(server, tmp_path):
    """A run extended by a resume whose new prompts are all refused: the episodes it keeps hold
    the agent's real answers, so the refusals are the model's empty answers, not a wrong server."""
    path = tmp_path / "e.jsonl"
    run_episodes(SumsEnv, _agent(server), num_episodes=2, concurrency=2, out_path=path)
    _refuse(server, LLAMA_CPP_OVERFLOW)
    results = run_episodes(SumsEnv, _agent(server), num_episodes=4, concurrency=2, out_path=path, resume=True)
    assert [e.success for e in results] == [1.0, 1.0, 0.0, 0.0]


def test_a_local_engines_own_context_answers_are_written_as_they_come(tmp_path):
    """Only a server's refusal can be a misconfigured server: the hf and vllm engines' empty
    answers to prompts past the model's context are facts about the model (no server_said)."""
    from llm_envs.agents import Agent, AgentOutput

    class TinyContext(Agent):
        name = "tiny-context"

        def act_batch(self, requests):
            return [AgentOutput(text="", meta={"finish_reason": "context_length"}) for _ in requests]

    results = run_episodes(SumsEnv, TinyContext(), num_episodes=2, concurrency=2, out_path=tmp_path / "e.jsonl")
    assert [e.success for e in results] == [0.0, 0.0] and len(load_episodes(tmp_path / "e.jsonl")) == 2


def test_refusals_and_aborts_are_never_cached_and_stored_ones_are_asked_again(server, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    _refuse(server, {"error": {"message": "This model's maximum context length is 2048 tokens. However, your "
                                          "request has 3000 input tokens."}})
    [refused] = _agent(server, cache=cache).act_batch([_request()])
    assert refused.meta["finish_reason"] == "context_length" and len(cache) == 0
    # A refusal an earlier version stored is not replayed against a server that now answers.
    agent = _agent(server, cache=cache)
    key = cache_key(agent.display_url, agent.request_body(_request().observation), 0, 0, "alice")
    cache.put(key, {"text": "", "finish_reason": "context_length", "server_said": "HTTP 400: ..."})
    server.plan = lambda number, body: "ok"
    [answer] = agent.act_batch([_request()])
    assert answer.text.isdigit() and not answer.meta.get("cached") and len(cache) == 1


# ---------------------------------------------------------------------------- F2: server aborts
@pytest.mark.parametrize("finish_reason", ["abort", "error"])
def test_a_reply_the_server_aborted_is_a_retried_server_error_never_the_answer(server, tmp_path, finish_reason):
    """HTTP 200 with no text and finish_reason "abort" (vLLM/SGLang) or "error" (OpenRouter) was
    scored as the model's empty answer and cached."""
    aborted = json.dumps({"choices": [{"message": {"role": "assistant", "content": ""},
                                       "finish_reason": finish_reason,
                                       "error": {"message": "provider went away"}}]})
    server.plan = lambda number, body: "body:" + aborted if number == 0 else "ok"
    cache = ResponseCache(tmp_path / "cache.sqlite")
    [output] = _agent(server, cache=cache).act_batch([_request()])
    assert output.error is None and output.text.isdigit() and output.meta["attempts"] == 2
    server.plan = lambda number, body: "body:" + aborted
    [failed] = _agent(server, max_retries=1, cache=cache).act_batch([_request(seed=5)])
    assert failed.meta["error_kind"] == "server_error" and "provider went away" in failed.error
    assert len(cache) == 1  # only the real answer


# ---------------------------------------------------------------------------- F3: reply size
def test_a_reply_larger_than_any_completion_is_malformed_not_the_answer(server):
    """A reply body had no size limit: 100 MB were read whole and played (and written). A body
    past the limit, here a small gzip body that unpacks to 20 MiB of "answer", is refused
    while it is read."""
    agent = _agent(server, max_tokens=16, max_retries=0)
    server.plan = lambda number, body: f"gzip-bomb:{20 * 2**20}"
    [output] = agent.act_batch([_request()])
    assert output.meta.get("error_kind") == "malformed_response" and "max_response_bytes" in output.error
    assert agent.max_response_bytes == MIN_RESPONSE_BYTES
    server.plan = lambda number, body: "big:5000"
    [output] = _agent(server, max_retries=0, max_response_bytes=4096).act_batch([_request()])
    assert output.meta["error_kind"] == "malformed_response" and "Content-Length" in output.error
    [output] = _agent(server, max_retries=0).act_batch([_request()])
    assert output.error is None and output.text.strip() == "7"


def test_the_reply_limit_grows_with_max_tokens_and_choices():
    def limit(**kwargs: Any) -> int:
        return OpenAIHTTPAgent("http://127.0.0.1:9/v1", "m", **kwargs).max_response_bytes

    assert limit() == MIN_RESPONSE_BYTES
    assert limit(max_tokens=8192) == 8192 * 4096 == 2 * limit(max_tokens=4096)
    assert limit(max_tokens=8192, extra_body={"n": 3}) == 3 * limit(max_tokens=8192)
    assert limit(max_tokens=None) > limit(max_tokens=8192)


# ---------------------------------------------------------------------------- F4: secrets in URLs
def test_url_credentials_are_sent_but_never_shown_or_written(server, tmp_path, sums_env_id):
    """openai:http://user:PW@host/v1?api_key=Q@m wrote the password in the agent's name, and so
    in run.json, summary.json, the report and every line of episodes.jsonl."""
    from llm_envs.evaluation import evaluate

    url = f"http://user:pw-S3CRET@127.0.0.1:{server.port}/v1?api-version=1&api_key=Q-S3CRET"
    spec = parse_agent_spec(f"openai:{url}@test-model")
    agent = build_agent(spec)
    shown = [str(spec), repr(spec), agent.name, json.dumps(agent.settings()), json.dumps(spec_settings(spec))]
    assert not any("S3CRET" in text for text in shown), shown
    assert agent.name == f"openai:http://***@127.0.0.1:{server.port}/v1?api-version=1&api_key=***@test-model"
    evaluate(sums_env_id, agent, episodes=2, concurrency=2, out_dir=tmp_path / "run", plot=False, progress=False)
    for path in (tmp_path / "run").iterdir():
        assert "S3CRET" not in path.read_text(), path.name
    # Sent as given: Basic auth from the user-info, the query after the path.
    assert server.headers[0]["authorization"].startswith("Basic ") and server.queries[0] == "api-version=1&api_key=Q-S3CRET"
    assert all(r.get("model") == "test-model" for r in server.requests)
    assert redact_url("https://h/v1?key=a&token=b&sig=c&x=d") == "https://h/v1?key=***&token=***&sig=***&x=d"
    assert redact_text(f"eval --agent openai:{url}@m --episodes 2") == (
        f"eval --agent openai:http://***@127.0.0.1:{server.port}/v1?api-version=1&api_key=***@m --episodes 2")


def test_a_server_that_echoes_the_key_does_not_get_it_into_the_error(server):
    server.status_body = (401, {"error": {"message": "Incorrect API key provided: Bearer sk-S3CRET-key"}})
    server.plan = lambda number, body: "body-status"
    [output] = _agent(server, api_key="sk-S3CRET-key").act_batch([_request()])
    assert output.meta["error_kind"] == "client_error" and "S3CRET" not in output.error and "***" in output.error


# ---------------------------------------------------------------------------- F5: later outages
@pytest.mark.parametrize("outage", ["401", "down"])
def test_an_agent_that_answered_in_an_earlier_run_meets_an_outage_not_a_configuration_error(outage, tmp_path):
    """A suite builds the agent once and plays each environment with a Runner of its own: a server
    that answered the first environment and then died or refused (401) was called a
    configuration error on the next environment's "first call" (exit 2, the suite stopped)."""
    with HostileServer() as server:
        agent = _agent(server, max_retries=1)
        run_episodes(SumsEnv, agent, num_episodes=2, concurrency=1)
        server.plan = lambda number, body: outage
        with pytest.raises(IncompleteRunError) as info:
            run_episodes(SumsEnv, agent, num_episodes=2, concurrency=1, out_path=tmp_path / "b.jsonl")
    assert info.value.configuration_error is None
    assert {f.reason for f in info.value.failures} <= {"client_error", "connection", "not_started", "stopped"}
    assert "unreachable" not in {f.reason for f in info.value.failures}


# ---------------------------------------------------------------------------- F6: keys and headers
@pytest.mark.parametrize("key, problem", [
    ("sk-S3CRET-123456\r", "carriage return"),
    ("sk-S3CRET-123456\n", "line feed"),
    ("sk-S3CRET-12\u20ac3456", "non-ASCII"),
    (" sk-S3CRET-123456", "space"),
])
def test_a_key_no_header_can_carry_is_a_configuration_error_that_never_shows_it(key, problem, monkeypatch):
    """A key with a stray "\\r" failed every request inside h11 with the key printed whole (on
    stderr and in summary.json), and was retried and filed as an outage (exit 3)."""
    with pytest.raises(ValueError) as info:
        OpenAIHTTPAgent("http://127.0.0.1:9/v1", "m", api_key=key)
    assert problem in str(info.value) and "S3CRET" not in str(info.value)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with pytest.raises(AgentSpecError) as info:
        build_agent("openai:http://127.0.0.1:9/v1@m")
    assert "$OPENAI_API_KEY" in str(info.value) and "S3CRET" not in str(info.value)
    with pytest.raises(ValueError, match="header 'X-Api-Key'"):
        OpenAIHTTPAgent("http://127.0.0.1:9/v1", "m", headers={"X-Api-Key": key})


def test_a_request_that_cannot_be_sent_is_a_client_error_with_the_secret_hidden(server):
    """Should an unsendable header get past the checks, h11's refusal quotes it: the message is
    redacted and the failure is the request's (not retried, not an outage)."""
    agent = _agent(server, api_key="sk-S3CRET-123456")
    agent._headers["Authorization"] = "Bearer sk-S3CRET-123456\r"
    with pytest.raises(AgentError) as info:
        agent.act(_request().observation)
    assert info.value.kind == "client_error" and info.value.attempts == 1
    assert "S3CRET" not in str(info.value) and server.requests == []


def test_the_table_and_the_report_say_how_many_answers_were_context_refusals():
    from llm_envs.evaluation.summary import context_length_note, format_summary

    summary = {"env_id": "x", "episodes": 3, "agents": {},
               "agent_calls": [{"agent": "openai:m", "calls": 9, "context_length_answers": 3},
                               {"agent": "reference", "calls": 9, "context_length_answers": 0}]}
    note = context_length_note(summary)
    assert "openai:m: 3 of 9 calls" in note and "reference" not in note
    assert note in format_summary(summary)
    assert context_length_note({"agent_calls": "n/a"}) == "" == context_length_note({})
