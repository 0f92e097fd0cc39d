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
from llm_envs.episodes import IncompleteRunError, load_episodes
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


def test_a_timed_out_request_is_cancelled_and_not_sent_again(chat_server):
    """The server may still be working on a request the client gave up on: sending it again
    would queue the same work twice. It fails (kind timeout) after one attempt."""
    chat_server.plan = lambda number, body: "sleep:3"
    started = time.perf_counter()
    [output] = _agent(chat_server, timeout_s=0.2, max_retries=3).act_batch(_requests(1))
    assert output.text == "" and "timed out after 0.2s" in output.error and "not re-sent" in output.error
    assert output.meta["error_kind"] == "timeout"
    assert len(chat_server.requests) == 1
    assert time.perf_counter() - started < 2.0


def test_retry_timeouts_sends_a_timed_out_request_again(chat_server):
    chat_server.plan = lambda number, body: "sleep:3" if number == 0 else "ok"
    [output] = _agent(chat_server, timeout_s=0.3, max_retries=1, retry_timeouts=True).act_batch(_requests(1))
    assert output.error is None and output.meta["attempts"] == 2
    chat_server.plan = lambda number, body: "sleep:3"
    [output] = _agent(chat_server, timeout_s=0.2, max_retries=1, retry_timeouts=True).act_batch(_requests(1))
    assert "gave up after 2 attempt(s)" in output.error and output.meta["error_kind"] == "timeout"


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


@pytest.mark.parametrize("action", ["not-json", "no-choices"])
def test_malformed_responses_give_an_error_output_without_retrying(chat_server, action):
    chat_server.plan = lambda number, body: action
    [output] = _agent(chat_server, max_retries=3).act_batch(_requests(1))
    assert output.text == ""
    assert output.error.startswith("malformed response")
    assert output.meta["error_kind"] == "malformed_response"
    assert len(chat_server.requests) == 1


def test_content_parts_and_usage_counts_that_no_reply_can_mean(chat_server):
    # (a part whose text was null raised TypeError and a count of 1e400 OverflowError: the
    # episode failed as an agent error instead of a malformed response; -5 and 1e30 were kept)
    parts = '{"choices": [{"message": {"content": [{"type": "text", "text": null}, {"type": "text", "text": "hi"}]}}]}'
    [output] = _played(chat_server, "body:" + parts)
    assert output.error is None and output.text == "hi"
    bad_part = '{"choices": [{"message": {"content": [{"type": "text", "text": 7}]}}]}'
    [output] = _played(chat_server, "body:" + bad_part)
    assert output.meta["error_kind"] == "malformed_response" and "not text" in output.error
    # parts that are plain strings were skipped: the reply "A" was played as an empty answer
    [output] = _played(chat_server, 'body:{"choices": [{"message": {"content": ["A"]}}]}')
    assert output.meta["error_kind"] == "malformed_response" and "not objects" in output.error
    for count in ("1e400", "-5", "1e30", "2.5", "true", "\"12\""):
        usage = '{"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": %s, "completion_tokens": 3}}'
        [output] = _played(chat_server, "body:" + usage % count)
        assert output.error is None and output.text == "ok", count
        assert (output.prompt_tokens, output.completion_tokens) == (0, 3), count


def _played(chat_server, action):
    chat_server.plan = lambda number, body: action
    return _agent(chat_server, max_retries=0).act_batch(_requests(1))


@pytest.mark.parametrize("status, body", [
    (400, {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested 3124 "
                                "tokens (2100 in the messages, 1024 in the completion).", "code": 400}}),
    (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, your request "
                                         "has 2100 input tokens. Please reduce the length of the input messages."}),
    (400, {"error": {"message": "Request too large", "code": "context_length_exceeded"}}),
    (400, {"error": {"message": "The decoder prompt (length 2049) is longer than the maximum model length of 2048."}}),
    (400, {"error": {"message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error"}}),
    (422, {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000"}),
])
def test_a_prompt_past_the_context_is_the_models_empty_answer(chat_server, status, body):
    """A prompt the model's context cannot take was a client error: its episodes were never
    scored (a resumed run called it a configuration error), so a summary left out exactly the
    long episodes. It is the model's empty answer, said so in its meta, and never re-sent."""
    chat_server.plan = lambda number, request: "body-status"
    chat_server.status_body = (status, body)
    [output] = _agent(chat_server, max_retries=3).act_batch(_requests(1))
    assert output.error is None and output.text == ""
    assert output.meta["finish_reason"] == "context_length" and "HTTP" in output.meta["server_said"]
    assert len(chat_server.requests) == 1


def test_a_client_error_that_is_not_about_the_context_is_still_a_failure(chat_server):
    chat_server.plan = lambda number, request: "body-status"
    chat_server.status_body = (400, {"error": {"message": "The model `m` does not exist.", "code": 400}})
    [output] = _agent(chat_server, max_retries=3).act_batch(_requests(1))
    assert output.meta["error_kind"] == "client_error"


def test_null_content_is_the_models_empty_answer_not_a_failure(chat_server):
    """A reasoning model cut off by max_tokens (or a tool call) has no visible content: that
    is what the model wrote, judged by the environment like any other answer."""
    chat_server.plan = lambda number, body: "null-content"
    [output] = _agent(chat_server).act_batch(_requests(1))
    assert output.text == "" and output.error is None


def test_a_reply_cut_off_mid_body_is_a_connection_error_and_retried(chat_server):
    chat_server.plan = lambda number, body: "reset" if number == 0 else "ok"
    [output] = _agent(chat_server, max_retries=1).act_batch(_requests(1))
    assert output.error is None and output.meta["attempts"] == 2
    chat_server.plan = lambda number, body: "reset"
    [output] = _agent(chat_server, max_retries=1).act_batch(_requests(1))
    assert output.meta["error_kind"] == "connection" and "connection error" in output.error


def test_act_async_raises_agent_errors_with_their_kind(chat_server):
    from llm_envs.agents import AgentError

    agent = _agent(chat_server, max_retries=1)

    async def one(action):
        chat_server.plan = lambda number, body: action
        try:
            return await agent.act_async(_requests(1)[0])
        finally:
            await agent.aclose()

    cases = [("500", "server_error", 500), ("429", "rate_limited", 429), ("404", "client_error", 404)]
    for action, kind, status in cases:
        with pytest.raises(AgentError) as info:
            asyncio.run(one(action))
        assert (info.value.kind, info.value.status) == (kind, status)
        assert info.value.is_configuration_error == (kind == "client_error")
    assert asyncio.run(one("ok")).text.isdigit()


def test_wrong_model_gets_the_servers_message():
    with ChatServer(model="the-model") as server:
        [output] = OpenAIHTTPAgent(server.base_url, "no-such-model", max_retries=3).act_batch(_requests(1))
    assert "HTTP 400" in output.error and "The model `no-such-model` does not exist" in output.error
    assert output.meta["error_kind"] == "client_error" and len(server.requests) == 1


def test_retry_after_pauses_every_request_of_the_agent(chat_server):
    """A 429 with Retry-After speaks for the client, not for one request: the other requests
    wait too instead of hammering the server."""
    times = {}
    lock = threading.Lock()

    def plan(number, body):
        with lock:
            times[number] = time.monotonic()
        return "429:0.5" if number == 0 else "ok"

    agent = _agent(chat_server, backoff_initial_s=0.001)

    async def two():
        first = asyncio.ensure_future(agent.act_async(_requests(1)[0]))
        while agent._state().resume_at == 0.0:  # until the 429 has come back
            await asyncio.sleep(0.005)
        second = await agent.act_async(_requests(1, seed=5)[0])
        result = [await first, second]
        await agent.aclose()
        return result

    chat_server.plan = plan
    outputs = asyncio.run(two())
    assert all(o.error is None for o in outputs)
    # The second prompt was not sent before the 0.5 s the server asked for were over.
    assert len(times) == 3 and times[1] - times[0] >= 0.45 and times[2] - times[0] >= 0.45


def test_a_retry_after_beyond_the_limit_fails_without_waiting(chat_server):
    chat_server.plan = lambda number, body: "429:120"
    started = time.perf_counter()
    [output] = _agent(chat_server, max_retry_after_s=5).act_batch(_requests(1))
    assert "asks to wait 120s" in output.error and output.meta["error_kind"] == "rate_limited"
    assert time.perf_counter() - started < 2.0 and len(chat_server.requests) == 1


def test_the_response_cache_never_pays_twice(chat_server, tmp_path):
    from llm_envs.agents import ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite")
    requests = _requests(3)
    for r in requests:
        r.episode_seed, r.decision = 7, 0
    first = _agent(chat_server, cache=cache, temperature=0.0).act_batch(requests)
    assert len(chat_server.requests) == 3 and len(cache) == 3
    again = _agent(chat_server, cache=tmp_path / "cache.sqlite", temperature=0.0).act_batch(requests)
    assert len(chat_server.requests) == 3  # nothing sent
    assert [o.text for o in again] == [o.text for o in first] and all(o.meta["cached"] for o in again)
    assert [o.completion_tokens for o in again] == [1, 1, 1]
    # Another sampling setting, another decision or another episode is another request.
    _agent(chat_server, cache=cache, temperature=0.5).act_batch(requests[:1])
    requests[1].decision = 1
    requests[2].episode_seed = 8
    _agent(chat_server, cache=cache, temperature=0.0).act_batch(requests[1:])
    assert len(chat_server.requests) == 6
    # Failures are not stored.
    chat_server.plan = lambda number, body: "400"
    requests[0].decision = 5
    [failed] = _agent(chat_server, cache=cache).act_batch(requests[:1])
    assert failed.error and len(cache) == 6


def test_settings_name_what_shapes_the_answers_and_nothing_else(chat_server):
    a = _agent(chat_server, temperature=0.2, max_concurrency=2, timeout_s=3)
    b = _agent(chat_server, temperature=0.2, max_concurrency=9, timeout_s=30, max_retries=0)
    c = _agent(chat_server, temperature=0.7)
    assert a.settings() == b.settings() != c.settings()
    assert a.settings()["sampling"] == {"temperature": 0.2, "max_tokens": 1024}


def test_sync_call_works_inside_a_running_event_loop(chat_server):
    agent = _agent(chat_server)

    async def inside():
        return agent.act_batch(_requests(2))

    outputs = asyncio.run(inside())
    assert [o.error for o in outputs] == [None, None]


def test_runner_never_plays_a_malformed_response_and_resume_completes(chat_server, tmp_path):
    """One bad response leaves its episode incomplete (not written); the other episodes finish
    with several requests in flight at once; a resume plays exactly the missing one."""
    chat_server.delay_s = 0.02
    chat_server.plan = lambda number, body: "not-json" if number == 5 else "ok"
    agent = _agent(chat_server, max_concurrency=4)
    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, agent, num_episodes=8, seed=0, concurrency=8, out_path=path)
    [failure] = info.value.failures
    assert failure.reason == "malformed_response" and "502 Bad Gateway" in failure.message
    finished = load_episodes(path)
    assert len(finished) == 7 and all(e.success == 1.0 for e in finished)
    assert all(s["error"] is None and s["completion_tokens"] == 1 for e in finished for s in e.steps)
    assert 1 < chat_server.max_in_flight <= 4
    sent = len(chat_server.requests)
    resumed = run_episodes(SumsEnv, agent, num_episodes=8, seed=0, concurrency=8, out_path=path, resume=True)
    assert [e.index for e in resumed] == list(range(8)) and all(e.success == 1.0 for e in resumed)
    assert len(chat_server.requests) - sent == 4  # one episode, four decisions


def test_episodes_whose_prompts_pass_the_context_are_scored_not_left_out(chat_server, tmp_path):
    """The first request of a run (or of a resumed run) answered with a context overflow made
    the runner call it a configuration error (exit 2, nothing resumable); later ones left their
    episodes unscored. Every episode is now played and scored, the overflowed decisions with
    the model's empty answer."""
    chat_server.status_body = (400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, "
                                               "your request has 5000 input tokens.", "code": "context_length_exceeded"}})
    chat_server.plan = lambda number, body: "body-status" if number % 3 == 0 else "ok"
    results = run_episodes(SumsEnv, _agent(chat_server), num_episodes=6, seed=0, concurrency=2,
                           out_path=tmp_path / "e.jsonl")
    assert [e.index for e in results] == list(range(6))
    steps = [s for e in results for s in e.steps]
    overflowed = [s for s in steps if s["meta"].get("finish_reason") == "context_length"]
    assert overflowed and all(s["error"] is None for s in steps)
    assert any(e.success < 1.0 for e in results)  # an empty answer is judged as one
