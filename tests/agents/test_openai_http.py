"""The OpenAI-compatible HTTP agent against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import collections
import email.utils
import socket
import threading
import time

import httpx
import pytest

from llm_envs.agents import ActRequest
from llm_envs.agents.openai_http import OpenAIHTTPAgent, parse_retry_after
from llm_envs.runner import run_episodes
from tests.agents.chat_server import ChatServer
from tests.runner.toy_envs import SumsEnv, solve_prompt


def _requests(count: int, seed: int = 0) -> list[ActRequest]:
    """Observations of distinct SumsEnv episodes (no env attached: a model sees text only)."""
    requests = []
    for i in range(count):
        env = SumsEnv()
        env.reset(seed=seed + i)
        requests.append(ActRequest(env.observe("alice"), "alice"))
    return requests


def _agent(server: ChatServer, **kwargs) -> OpenAIHTTPAgent:
    kwargs.setdefault("backoff_initial_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIHTTPAgent(server.base_url, "test-model", **kwargs)


def test_batch_answers_in_order_with_usage_and_request_fields(chat_server, monkeypatch):
    monkeypatch.setenv("MY_TEST_KEY", "sk-test-123")
    agent = _agent(
        chat_server,
        api_key_env="MY_TEST_KEY",
        temperature=0.3,
        top_p=0.9,
        max_tokens=17,
        stop=["\n\n"],
        seed=5,
        logprobs=True,
    )
    requests = _requests(10)
    outputs = agent.act_batch(requests)

    assert [o.text for o in outputs] == [solve_prompt(r.observation["prompt"]) for r in requests]
    assert all(o.error is None for o in outputs)
    assert all(o.completion_tokens == 1 and o.prompt_tokens > 5 for o in outputs)
    assert all(o.logprobs == [-0.25] and o.meta["attempts"] == 1 for o in outputs)
    assert len(chat_server.requests) == 10
    body = chat_server.requests[0]
    assert body["model"] == "test-model"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"], body["seed"]) == (
        0.3,
        0.9,
        17,
        ["\n\n"],
        5,
    )
    assert body["logprobs"] is True
    assert chat_server.headers[0]["authorization"] == "Bearer sk-test-123"


def test_no_authorization_header_without_a_key(chat_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _agent(chat_server).act_batch(_requests(1))
    assert "authorization" not in chat_server.headers[0]


@pytest.mark.parametrize("limit", [1, 3])
def test_requests_in_flight_never_exceed_the_limit(limit):
    with ChatServer(delay_s=0.05) as server:
        agent = _agent(server, max_concurrency=limit)

        async def two_batches():
            # Two batches at once on one loop share the agent's limit.
            first, second = await asyncio.gather(
                agent.act_batch_async(_requests(6)), agent.act_batch_async(_requests(6, seed=100))
            )
            await agent.aclose()
            return first + second

        outputs = asyncio.run(two_batches())
    assert all(o.error is None for o in outputs)
    assert len(server.requests) == 12
    assert server.max_in_flight == limit  # reached, never exceeded


def test_retries_after_429_and_500_then_succeeds(chat_server):
    attempts_per_prompt = collections.Counter()
    lock = threading.Lock()

    def plan(number, body):
        prompt = body["messages"][-1]["content"]
        with lock:
            attempts_per_prompt[prompt] += 1
            seen = attempts_per_prompt[prompt]
        return {1: "429", 2: "500"}.get(seen, "ok")

    chat_server.plan = plan
    requests = _requests(4)
    outputs = _agent(chat_server, max_retries=2).act_batch(requests)
    assert [o.text for o in outputs] == [solve_prompt(r.observation["prompt"]) for r in requests]
    assert all(o.error is None and o.meta["attempts"] == 3 for o in outputs)
    assert len(chat_server.requests) == 12


def test_gives_up_after_max_retries_with_a_clear_error(chat_server):
    chat_server.plan = lambda number, body: "503"
    [output] = _agent(chat_server, max_retries=2).act_batch(_requests(1))
    assert output.text == ""
    assert "gave up after 3 attempt(s)" in output.error and "HTTP 503" in output.error
    assert "server says 503" in output.error
    assert len(chat_server.requests) == 3


def test_client_errors_are_not_retried(chat_server):
    chat_server.plan = lambda number, body: "400"
    [output] = _agent(chat_server, max_retries=3).act_batch(_requests(1))
    assert output.text == "" and "HTTP 400" in output.error and "not retried" in output.error
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize("action,wait", [("429:0.4", 0.4), ("429ms:300", 0.3)])
def test_retry_after_is_honoured(chat_server, action, wait):
    chat_server.plan = lambda number, body: action if number == 0 else "ok"
    started = time.perf_counter()
    [output] = _agent(chat_server, backoff_initial_s=0.001).act_batch(_requests(1))
    assert output.error is None and output.meta["attempts"] == 2
    assert time.perf_counter() - started >= wait


def test_parse_retry_after_forms():
    assert parse_retry_after(httpx.Headers({"Retry-After": "2.5"})) == 2.5
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "150"})) == 0.15
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after(httpx.Headers({"Retry-After": date}), now=now) <= 31
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_a_slow_server_times_out_and_the_retry_recovers(chat_server):
    chat_server.plan = lambda number, body: "sleep:3" if number == 0 else "ok"
    started = time.perf_counter()
    [output] = _agent(chat_server, timeout_s=0.3, max_retries=1).act_batch(_requests(1))
    assert output.error is None and output.meta["attempts"] == 2
    assert time.perf_counter() - started < 2.0


def test_timeouts_exhaust_retries_into_an_error(chat_server):
    chat_server.plan = lambda number, body: "sleep:3"
    started = time.perf_counter()
    [output] = _agent(chat_server, timeout_s=0.2, max_retries=1).act_batch(_requests(1))
    assert output.text == "" and "timed out after 0.2s" in output.error
    assert time.perf_counter() - started < 2.0


def test_connection_errors_are_retried_then_reported():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = OpenAIHTTPAgent(
        f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_initial_s=0.01, timeout_s=2
    )
    [output] = agent.act_batch(_requests(1))
    assert output.text == "" and "connection error" in output.error
    assert output.meta["attempts"] == 3


@pytest.mark.parametrize("action", ["not-json", "no-choices", "null-content"])
def test_malformed_responses_give_an_error_output_without_retrying(chat_server, action):
    chat_server.plan = lambda number, body: action
    [output] = _agent(chat_server, max_retries=3).act_batch(_requests(1))
    assert output.text == ""
    assert output.error.startswith("malformed response")
    assert len(chat_server.requests) == 1


def test_sync_call_works_inside_a_running_event_loop(chat_server):
    agent = _agent(chat_server)

    async def inside():
        return agent.act_batch(_requests(2))

    outputs = asyncio.run(inside())
    assert [o.error for o in outputs] == [None, None]


def test_runner_plays_on_through_a_malformed_response(chat_server, tmp_path):
    """One bad response is an empty action (a format error) for that step; the run goes on,
    and the runner keeps several requests in flight at once."""
    chat_server.delay_s = 0.02
    chat_server.plan = lambda number, body: "not-json" if number == 5 else "ok"
    agent = _agent(chat_server, max_concurrency=4)
    results = run_episodes(
        SumsEnv, agent, num_episodes=8, seed=0, concurrency=8, out_path=tmp_path / "e.jsonl"
    )

    assert len(results) == 8
    failed_steps = [(e.index, s) for e in results for s in e.steps if s["error"]]
    assert len(failed_steps) == 1
    index, step = failed_steps[0]
    assert "malformed response" in step["error"]
    episode = results[index]
    assert episode.records[step["record_index"]]["format_ok"] is False
    assert episode.success == 0.0
    assert sum(e.success for e in results) == 7
    assert all(s["completion_tokens"] == 1 for e in results for s in e.steps if not s["error"])
    assert 1 < chat_server.max_in_flight <= 4
    assert len(chat_server.requests) == 8 * 4
