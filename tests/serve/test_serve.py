"""``llm-envs serve`` against OpenEnv's own client (``openenv.core.GenericEnvClient``, unchanged):
full episodes of every ``llm/`` environment, concurrent sessions, every bad input, a step that
blocks, a sandbox failure, idle expiry, capacity, and a server killed or stopped mid-episode.

Most servers run in-process (a uvicorn thread on 127.0.0.1); the shutdown tests start
``llm-envs serve`` as a subprocess so that it can be killed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import httpx
import pytest
from openenv.core import GenericEnvClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import llm_envs
from tests.serve import toy_envs
from tests.serve.conftest import in_process_server, subprocess_server

LLM_IDS = [env_id for env_id in llm_envs.env_ids() if env_id.startswith("llm/")]


def local_reference_episode(env_id: str, seed: int, **options):
    """The same episode played in-process by the reference agents: (transcript, agent rewards)."""
    env = llm_envs.make(env_id, **options)
    env.reset(seed=seed)
    while not env.episode_over:
        env.step(env.reference_action(env.agent_selection))
    return env.transcript(), env.agent_rewards(), env.episode_metrics()


def play_reference(client, seed: int, max_steps: int = 500):
    """Play one episode through an OpenEnv sync client, the action read from ``state``'s
    ``reference_action``; returns (every rewards dict received, final state)."""
    result = client.reset(seed=seed)
    received = []
    for _ in range(max_steps):
        if result.done:
            break
        observation = result.observation
        state = client.state()
        assert observation["agent"] == state["agent_selection"]
        assert {"instruction": observation["instruction"], "prompt": observation["prompt"]} == state["observations"][observation["agent"]]
        result = client.step({"agent": observation["agent"], "text": state["reference_action"]})
        received.append(result.observation["rewards"])
    assert result.done, "the episode did not end"
    return received, client.state()


@pytest.mark.parametrize("env_id", LLM_IDS)
def test_openenv_client_plays_full_episodes(env_id):
    with in_process_server(env_id, max_sessions=2, expose_reference=True) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            for seed in (0, 1):
                received, state = play_reference(client, seed)
                transcript, agent_rewards, metrics = local_reference_episode(env_id, seed)
                assert state["transcript"] == transcript, "the served episode differs from the in-process one"
                assert state["agent_rewards"] == pytest.approx(agent_rewards)
                assert state["metrics"] == pytest.approx(metrics) and metrics["success"] == 1.0
                # The rewards sent step by step add up to what the records hold (delayed credit included).
                sums = {a: sum(r.get(a, 0.0) for r in received) for a in agent_rewards}
                assert sums == pytest.approx(agent_rewards)
                assert len(state["records"]) == len(received)


def test_concurrent_sessions_are_neither_mixed_nor_lost():
    env_id, sessions = "llm/PlanPath-v0", 12

    async def one_session(url, seed):
        client = GenericEnvClient(base_url=url)
        async with client:
            result = await client.reset(seed=seed)
            while not result.done:
                state = await client.state()
                result = await client.step({"agent": result.observation["agent"], "text": state["reference_action"]})
                await asyncio.sleep(0)  # let the other sessions step in between
            return (await client.state())["transcript"]

    async def all_sessions(url):
        return await asyncio.gather(*(one_session(url, seed) for seed in range(sessions)))

    with in_process_server(env_id, max_sessions=sessions, expose_reference=True) as url:
        transcripts = asyncio.run(all_sessions(url))
        assert httpx.get(f"{url}/info").json()["active_sessions"] == 0  # every session was closed
    assert transcripts == [local_reference_episode(env_id, seed)[0] for seed in range(sessions)]
    assert len(set(transcripts)) == sessions


@pytest.fixture
def toy_id():
    yield from toy_envs.register()


def send(ws, message) -> dict:
    ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def test_every_bad_input_gets_an_error_frame_and_changes_nothing(toy_id):
    with in_process_server(toy_id, max_message_bytes=4096) as url:
        with connect(url.replace("http", "ws") + "/ws") as ws:
            reply = send(ws, {"type": "step", "data": {"agent": "a", "text": "x"}})
            assert reply["type"] == "error" and "reset first" in reply["data"]["message"]
            first = send(ws, {"type": "reset", "data": {"seed": 3}})
            assert first["type"] == "observation" and first["data"]["observation"]["agent"] == "a"
            before = send(ws, {"type": "state"})["data"]
            bad_inputs = {
                "malformed JSON": ("{not json", "INVALID_JSON", "Invalid JSON"),
                "unknown message type": ({"type": "teleport"}, "UNKNOWN_TYPE", "Unknown message type"),
                "wrong agent": ({"type": "step", "data": {"agent": "b", "text": "hi"}}, "EXECUTION_ERROR", "'a''s turn, not 'b''s"),
                "unknown agent": ({"type": "step", "data": {"agent": "zed", "text": "hi"}}, "EXECUTION_ERROR", "not 'zed''s"),
                "text not a string": ({"type": "step", "data": {"agent": "a", "text": 5}}, "VALIDATION_ERROR", "valid string"),
                "extra action field": ({"type": "step", "data": {"agent": "a", "text": "x", "cheat": 1}}, "VALIDATION_ERROR", "cheat"),
                "no agent": ({"type": "step", "data": {"text": "x"}}, "VALIDATION_ERROR", "agent"),
                "extra message field": ({"type": "state", "sneaky": 1}, "VALIDATION_ERROR", "sneaky"),
                "dead step for a live agent": ({"type": "step", "data": {"agent": "a", "text": None}}, "EXECUTION_ERROR", "only for a finished agent"),
                "unknown option": ({"type": "reset", "data": {"seed": 1, "no_such_option": 2}}, "EXECUTION_ERROR", "unknown or invalid option(s) ['no_such_option']"),
                "options not an object": ({"type": "reset", "data": {"options": 3}}, "EXECUTION_ERROR", "must be an object"),
                "negative seed": ({"type": "reset", "data": {"seed": -1}}, "EXECUTION_ERROR", "must be >= 0"),
                "server-only option": ({"type": "reset", "data": {"task_path": "/etc/passwd"}}, "EXECUTION_ERROR", "only be set by the server"),
                "oversized message": ({"type": "step", "data": {"agent": "a", "text": "x" * 10_000}}, "MESSAGE_TOO_LARGE", "over this server's limit"),
                "binary frame": (b"\x00\x01", "MESSAGE_TOO_LARGE", "binary frames"),
                # JSON that is not an object (the session and its episode were closed)
                "an array": ("[]", "VALIDATION_ERROR", "got an array"),
                "null": (" null", "VALIDATION_ERROR", "got null"),
                "a number": ("1", "VALIDATION_ERROR", "got a number"),
                "a string": ('"state"', "VALIDATION_ERROR", "got a string"),
                # JSON Python cannot read as data: it escaped OpenEnv's handler and closed the
                # session with its episode
                "nested too deep": ("[" * 2000 + "]" * 2000, "INVALID_JSON", "RecursionError"),
                "nested too deep in a step": ('{"type": "step", "data": ' + "[" * 2000 + "]" * 2000 + "}",
                                              "INVALID_JSON", "RecursionError"),
            }
            for name, (message, code, words) in bad_inputs.items():
                reply = send(ws, message)
                assert reply["type"] == "error", name
                assert reply["data"]["code"] == code, (name, reply)
                assert words in json.dumps(reply["data"]), (name, reply)
                assert send(ws, {"type": "state"})["data"] == before, f"{name} changed the session"
            # The session still plays normally after all of that.
            reply = send(ws, {"type": "step", "data": {"agent": "a", "text": "abc"}})
            assert reply["type"] == "observation"
            assert reply["data"]["reward"] == 3.0 and reply["data"]["observation"]["agent"] == "b"


def test_an_infrastructure_failure_is_an_error_and_the_episode_is_unchanged(toy_id):
    with in_process_server(toy_id) as url, GenericEnvClient(base_url=url).sync() as client:
        client.reset(seed=0)
        client.step({"agent": "a", "text": "ab"})
        before = client.state()
        with pytest.raises(RuntimeError, match="infrastructure error.*SandboxFailure.*episode is unchanged"):
            client.step({"agent": "b", "text": "crash"})
        assert client.state() == before
        result = client.step({"agent": "b", "text": "xyz"})  # the same agent steps again
        assert result.reward == 3.0 and client.state()["agent_rewards"] == {"a": 2.0, "b": 3.0}


def test_a_blocking_step_does_not_stall_other_sessions(toy_id):
    toy_envs.RELEASE.clear()
    toy_envs.BLOCKED.clear()
    with in_process_server(toy_id, max_sessions=4) as url:
        slow = GenericEnvClient(base_url=url).sync()
        fast = GenericEnvClient(base_url=url).sync()
        with slow, fast:
            slow.reset(seed=0)
            outcome = {}
            thread = threading.Thread(target=lambda: outcome.update(result=slow.step({"agent": "a", "text": "block"})))
            thread.start()
            assert toy_envs.BLOCKED.wait(timeout=30)
            # While the slow session's step blocks its worker thread, another session plays a
            # whole episode and the health endpoint answers.
            result = fast.reset(seed=1)
            while not result.done:
                result = fast.step({"agent": result.observation["agent"], "text": "go"})
            assert httpx.get(f"{url}/health").json()["status"] == "healthy"
            assert "result" not in outcome, "the blocked step finished before it was released"
            toy_envs.RELEASE.set()
            thread.join(timeout=30)
            assert outcome["result"].reward == 5.0


def test_capacity_and_idle_sessions_expire(toy_id):
    with in_process_server(toy_id, max_sessions=2, idle_timeout_s=0.4) as url:
        ws_url = url.replace("http", "ws") + "/ws"
        with connect(ws_url) as one, connect(ws_url) as two:
            assert send(one, {"type": "reset", "data": {}})["type"] == "observation"
            assert send(two, {"type": "reset", "data": {}})["type"] == "observation"
            with connect(ws_url) as three:
                reply = json.loads(three.recv(timeout=30))
                assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"
            # Keep one session busy; let the other idle past the timeout.
            for _ in range(8):
                assert send(one, {"type": "state"})["type"] == "state"
                threading.Event().wait(0.15)
            reply = json.loads(two.recv(timeout=30))  # told, then disconnected
            assert reply["type"] == "error" and "session expired" in reply["data"]["message"]
            with pytest.raises(ConnectionClosed):
                two.recv(timeout=30)
            assert send(one, {"type": "step", "data": {"agent": "a", "text": "x"}})["type"] == "observation"
            with connect(ws_url) as three:  # the expired session's slot is free again
                assert send(three, {"type": "reset", "data": {}})["type"] == "observation"


def test_health_schema_and_info_endpoints():
    with in_process_server("llm/Sudoku-v0", {"size": 4}, max_sessions=3) as url:
        assert httpx.get(f"{url}/health").json() == {"status": "healthy"}
        schema = httpx.get(f"{url}/schema").json()
        assert set(schema["action"]["properties"]) >= {"agent", "text"}
        assert set(schema["observation"]["properties"]) >= {"agent", "instruction", "prompt", "rewards", "done"}
        assert "transcript" in schema["state"]["properties"] or schema["state"].get("additionalProperties", True)
        info = httpx.get(f"{url}/info").json()
        assert info["env_id"] == "llm/Sudoku-v0" and info["max_sessions"] == 3 and info["options"] == {"size": 4}


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_server_gone_mid_episode_is_a_clear_error_never_an_observation(how):
    with subprocess_server("llm/Signalling-v0", "--max-sessions", "4") as (url, process):
        clients = [GenericEnvClient(base_url=url).sync() for _ in range(3)]
        for client in clients:
            client.connect()
            result = client.reset(seed=0)
            assert not result.done
        process.send_signal(signal.SIGKILL if how == "killed" else signal.SIGTERM)
        process.wait(timeout=30)
        for client in clients:
            with pytest.raises(Exception) as caught:
                client.step({"agent": "speaker", "text": "red"})
            assert "ConnectionClosed" in type(caught.value).__name__ or "closed" in str(caught.value).lower()
            client.close()


def test_serve_cli_refuses_unknown_ids_and_options():
    import subprocess
    import sys

    for args, words in ((["llm/NoSuch-v0"], "unknown environment"), (["llm/Sudoku-v0", "--env-arg", "bogus=1"], "unknown option")):
        result = subprocess.run([sys.executable, "-m", "llm_envs.cli", "serve", *args, "--port", "1"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and words in result.stderr, result.stderr


def test_a_failing_reset_leaves_the_episode_and_fixed_options_refuse_all():
    with in_process_server("llm/CoderTester-v0") as url, GenericEnvClient(base_url=url).sync() as client:
        client.reset(seed=0)
        before = client.state()
        with pytest.raises(RuntimeError, match="out of range"):
            client.reset(seed=1, options={"problem_index": 10**9})  # the env's own reset raises
        assert client.state() == before
    with in_process_server("llm/Sudoku-v0", {"size": 4}, client_options=False) as url, GenericEnvClient(base_url=url).sync() as client:
        with pytest.raises(RuntimeError, match="fixes every option"):
            client.reset(seed=0, size=9)
        assert client.reset(seed=0).observation["agent"]


def test_stateless_http_step_is_refused_with_a_hint():
    with in_process_server("llm/Signalling-v0") as url:
        response = httpx.post(f"{url}/step", json={"action": {"agent": "speaker", "text": "red"}})
        assert response.status_code == 409 and "WebSocket" in response.json()["detail"]
        reset = httpx.post(f"{url}/reset", json={"seed": 0})
        assert reset.status_code == 200 and reset.json()["observation"]["agent"] == "speaker"


def test_a_client_cannot_pick_the_game_its_files_or_the_sandbox_limits():
    # efg_game(filename=...) read any server file and quoted its lines in the error; OpenSpiel's
    # C++ segfaults on connect_four(rows=0), taking every session of the server with it.
    from llm_envs.serve.session import SERVER_ONLY_OPTIONS

    for name in ("game", "params", "game_kwargs", "reference_options", "program_time_s", "program_memory_mb"):
        assert name in SERVER_ONLY_OPTIONS
    with in_process_server("llm/Signalling-v0") as url, GenericEnvClient(base_url=url).sync() as client:
        client.reset(seed=0)
        for options in ({"game": "efg_game(filename=/etc/passwd)"}, {"params": {"rows": 0}}, {"program_time_s": 600}):
            with pytest.raises(RuntimeError, match="can only be set by the server") as caught:
                client.reset(seed=0, **options)
            assert "root:" not in str(caught.value)
        assert client.reset(seed=0).observation["agent"] == "speaker"


def test_an_option_value_the_environment_refuses_is_a_clear_error_over_http_and_websocket():
    with in_process_server("llm/Sudoku-v0") as url:
        reset = httpx.post(f"{url}/reset", json={"seed": 0, "max_turns": 0})
        assert reset.status_code == 409 and "max_turns" in reset.json()["detail"]
        with GenericEnvClient(base_url=url).sync() as client:
            with pytest.raises(RuntimeError, match="refused by llm/Sudoku-v0"):
                client.reset(seed=0, max_turns=0)
            assert client.reset(seed=0).observation["agent"]


def test_an_http_body_over_the_limit_is_refused_unread():
    with in_process_server("llm/Signalling-v0", max_message_bytes=4096) as url:
        big = {"seed": 0, "pad": "x" * 100_000}
        response = httpx.post(f"{url}/reset", json=big)
        assert response.status_code == 413 and "4096 bytes" in response.json()["detail"]

        def chunks():  # no Content-Length: counted as it streams in
            yield b'{"seed": 0, "pad": "'
            for _ in range(50):
                yield b"x" * 4096
            yield b'"}'

        streamed = httpx.post(f"{url}/reset", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        assert httpx.post(f"{url}/reset", json={"seed": 0}).status_code == 200


def test_a_client_cannot_make_the_server_build_a_huge_environment_or_open_sessions_without_a_socket():
    # num_agents=1000000 in one 60-byte reset grew the server by 8 GB, and went on after the
    # client left; stateless POST /mcp session/create filled every slot with no connection.
    with in_process_server("llm/Debate-v0", max_sessions=2) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            for options, limit in (({"num_agents": 1_000_000}, "limit 64"), ({"max_shown_chars": 1e9}, "limit 64000"),
                                   ({"num_turns": float("nan")}, "limit 64")):
                with pytest.raises(RuntimeError, match="too large for a client") as caught:
                    client.reset(seed=0, **options)
                assert limit in str(caught.value)
            # within 8x the default, or the floor: accepted
            assert len(client.reset(seed=0, num_agents=3, max_shown_chars=20_000).observation["agent"]) > 0
            # an object-typed option as a JSON string broke every later step
            with pytest.raises(RuntimeError, match="can only be set by the server"):
                client.reset(seed=0, verifier="x")
        with connect(url.replace("http", "ws") + "/ws") as ws:  # an integer Python will not read
            reply = send(ws, '{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}")
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON", reply
            assert send(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        for method in ("post", "get"):
            response = httpx.request(method.upper(), f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                                          "method": "openenv/session/create"})
            assert response.status_code in (404, 405), response.text
    # an option whose default is not a number: up to 1,024 (Sudoku's num_clues=70 was refused)
    with in_process_server("llm/Sudoku-v0") as url, GenericEnvClient(base_url=url).sync() as client:
        assert client.reset(seed=0, size=9, num_clues=70).observation["agent"]
        with pytest.raises(RuntimeError, match="limit 1024"):
            client.reset(seed=0, size=9, num_clues=5000)
    # the server's own --env-arg sets any value
    with in_process_server("llm/Debate-v0", {"max_shown_chars": 100_000}) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            assert client.reset(seed=0, max_shown_chars=500_000).observation["agent"]
