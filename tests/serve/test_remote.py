"""``llm_envs.remote`` against ``llm-envs serve``: PettingZoo's ``api_test`` and our contract
suite (tests/envs/test_contract.py, the same test functions) on served environments, and what a
client sees when the server is killed and restarted.

The contract tests run unchanged with ``make`` pointing at a remote environment; the one left
out is ``test_clone_is_independent`` (OpenEnv's protocol cannot copy a session, see
``llm_envs/interop/remote.py``). Reference agents read the reference action the server exposes
(``--expose-reference``); random agents play generic random text (an environment's well-formed
random actions stay on the server).
"""

from __future__ import annotations

import contextlib
import warnings

import pytest

import llm_envs
from llm_envs.interop.remote import (
    RemoteConnectionError,
    RemoteEnv,
    RemoteEnvError,
    RemoteInfrastructureError,
)
from tests.envs import test_contract
from tests.serve import toy_envs
from tests.serve.conftest import in_process_server, subprocess_server

#: A game, a puzzle, a delayed-credit team game, a free-text debate and a code-running env.
SERVED = ["llm/Signalling-v0", "llm/Sudoku-v0", "llm/TicTacToe-v0", "llm/Debate-v0", "llm/CoderTester-v0"]
CONTRACT_TESTS = [
    "test_pettingzoo_api_test",
    "test_pettingzoo_seed_test",
    "test_pettingzoo_render_test",
    "test_observations_are_valid_for_every_agent_at_any_time",
    "test_record_sums_equal_pettingzoo_rewards",
    "test_same_seed_same_episode_whatever_the_global_rngs",
    "test_reference_agents_solve_and_random_agents_do_worse",
    "test_fuzzed_actions_never_raise",
]


@pytest.fixture(scope="module")
def servers():
    with contextlib.ExitStack() as stack:
        yield {env_id: stack.enter_context(in_process_server(env_id, max_sessions=64, expose_reference=True))
               for env_id in SERVED}


@pytest.mark.parametrize("test_name", CONTRACT_TESTS)
@pytest.mark.parametrize("env_id", SERVED)
def test_contract_suite_on_a_served_environment(env_id, test_name, servers, monkeypatch):
    opened = []

    def remote_make(env_id, **kwargs):
        env = llm_envs.remote(servers[env_id], **kwargs)
        opened.append(env)
        return env

    monkeypatch.setattr(test_contract, "make", remote_make)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            getattr(test_contract, test_name)(env_id)
    finally:
        for env in opened:
            env.close()


def test_remote_matches_the_local_environment_step_for_step(servers):
    local, env = llm_envs.make("llm/Debate-v0"), llm_envs.remote(servers["llm/Debate-v0"])
    for e in (local, env):
        e.reset(seed=5)
    for agent in env.agent_iter(max_iter=10_000):
        assert agent == local.agent_selection
        assert env.last() == local.last()
        assert all(env.observe(a) == local.observe(a) for a in env.possible_agents)
        action = None if env.terminations[agent] or env.truncations[agent] else local.reference_action(agent)
        env.step(action)
        local.step(action)
        assert env.rewards == local.rewards and env._cumulative_rewards == local._cumulative_rewards
    assert not local.agents
    assert [r.to_dict() for r in env.records] == [r.to_dict() for r in local.records]
    assert env.transcript() == local.transcript() and env.episode_metrics() == local.episode_metrics()
    env.close()


def test_a_lone_surrogate_in_an_action_is_played_and_the_session_goes_on(servers):
    # The step was played, then its reply failed to encode (pydantic's JSON cannot carry a lone
    # surrogate): the client was told it failed, and every later reply of the session failed.
    local, env = llm_envs.make("llm/Debate-v0"), llm_envs.remote(servers["llm/Debate-v0"])
    for e in (local, env):
        e.reset(seed=0)
        e.step("my answer \ud800 is 4")
        e.step("#### 4")
    assert env.agent_selection == local.agent_selection
    assert env.records[0].action == "my answer \ufffd is 4"  # (the server's episode keeps it as sent)
    assert env.agent_rewards() == local.agent_rewards()
    env.close()


def test_remote_errors_are_exceptions_and_change_nothing():
    gen = toy_envs.register()
    toy_id = next(gen)
    try:
        with in_process_server(toy_id) as url:
            with pytest.raises(RemoteEnvError, match="invalid option"):
                llm_envs.remote(url, bogus=1).reset(seed=0)
            env = llm_envs.remote(url)
            env.reset(seed=0)
            env.step("ab")
            before = env.state()
            with pytest.raises(RemoteInfrastructureError, match="episode is unchanged"):
                env.step("crash")
            assert env.state() == before and env.agent_selection == "b"
            env.step("xyz")
            assert env.agent_rewards() == {"a": 2.0, "b": 3.0}
            assert not hasattr(env, "clone")
            with pytest.raises(NotImplementedError, match="expose-reference"):
                env.reference_action("a")
            env.close()
    finally:
        gen.close()


def test_a_server_at_capacity_says_so_instead_of_a_lost_episode():
    """One session more than ``--max-sessions``: OpenEnv sends CAPACITY_REACHED and closes; the
    client names that (and the option to raise), not a connection "lost mid-episode"."""
    with in_process_server("llm/Signalling-v0", max_sessions=1) as url:
        first = llm_envs.remote(url)
        first.reset(seed=0)
        second = llm_envs.remote(url)
        with pytest.raises(RemoteConnectionError, match="CAPACITY_REACHED") as refused:
            second.reset(seed=0)
        assert "--max-sessions" in str(refused.value) and "mid-episode" not in str(refused.value)
        first.close()


def test_a_server_killed_and_restarted_mid_episode():
    with subprocess_server("llm/Signalling-v0") as (url, process):
        env = RemoteEnv(url)
        env.reset(seed=0)
        port = int(url.rsplit(":", 1)[1])
        process.kill()
        process.wait(timeout=30)
        with pytest.raises(RemoteConnectionError, match="lost mid-episode"):
            env.step("red")
        with pytest.raises(RemoteEnvError, match="call reset"):
            env.last()  # no observation is made up after the loss
    with subprocess_server("llm/Signalling-v0", port=port):  # restarted on the same port
        env.reset(seed=0)  # reconnects: a new session, a new episode
        assert env.agent_selection == "speaker" and not env.episode_over
        env.close()


def test_eval_with_env_url_equals_a_local_eval(tmp_path, servers):
    import json

    from llm_envs.cli import main

    common = ["--episodes", "3", "--concurrency", "2", "--no-plot", "--no-progress", "--no-report"]
    assert main(["eval", "--env-url", servers["llm/Sudoku-v0"], "--agent", "reference", "--out", str(tmp_path / "remote"), *common]) == 0
    assert main(["eval", "llm/Sudoku-v0", "--agent", "reference", "--out", str(tmp_path / "local"), *common]) == 0

    def episodes(run):
        rows = [json.loads(line) for line in (tmp_path / run / "episodes.jsonl").read_text().splitlines()]
        for row in rows:
            for record in row["records"]:
                record["info"].pop("sandbox_s", None)  # wall time of the sandbox run
        return sorted((row["seed"], row["metrics"]["success"], json.dumps(row["records"], sort_keys=True)) for row in rows)

    assert episodes("remote") == episodes("local") and len(episodes("local")) == 3
    # A server that serves another environment than the one named is refused.
    assert main(["eval", "llm/TicTacToe-v0", "--env-url", servers["llm/Sudoku-v0"], "--out", str(tmp_path / "x"), *common]) == 2


def test_arena_with_env_url_equals_a_local_arena(tmp_path, servers):
    import json

    from llm_envs.cli import main

    # Two reference players: a remote random agent plays generic text (see llm_envs/interop/remote.py).
    common = ["--agent", "a=reference", "--agent", "b=reference", "--games", "2", "--no-plot", "--no-progress", "--no-report"]
    url = servers["llm/TicTacToe-v0"]
    assert main(["arena", "llm/TicTacToe-v0", "--env-url", url, "--out", str(tmp_path / "remote"), *common]) == 0
    assert main(["arena", "llm/TicTacToe-v0", "--out", str(tmp_path / "local"), *common]) == 0

    def outcomes(run):
        rows = [json.loads(line) for line in (tmp_path / run / "games.jsonl").read_text().splitlines()]
        for row in rows:
            row["episode"].pop("duration_s")  # wall time
        return sorted(json.dumps(row, sort_keys=True) for row in rows)

    assert outcomes("remote") == outcomes("local") and outcomes("local")
    assert main(["arena", "llm/KuhnPoker-v0", "--env-url", url, "--out", str(tmp_path / "x"), *common]) == 2


def test_a_proposer_solver_judge_eval_through_a_server_equals_a_local_one(tmp_path):
    # (a session's first episode committed its question to the session's pool, later ones did
    # not: what an episode was shown depended on which session played which episode)
    import json

    from llm_envs.cli import main

    common = ["--agent", "reference", "--episodes", "16", "--no-plot", "--no-progress", "--no-report"]
    with in_process_server("llm/ProposerSolverJudge-v0", expose_reference=True) as url:
        assert main(["eval", "--env-url", url, "--concurrency", "4", "--out", str(tmp_path / "remote"), *common]) == 0
    assert main(["eval", "llm/ProposerSolverJudge-v0", "--concurrency", "1", "--out", str(tmp_path / "local"), *common]) == 0

    def episodes(run):
        rows = [json.loads(line) for line in (tmp_path / run / "episodes.jsonl").read_text().splitlines()]
        return sorted((row["seed"], json.dumps(row["metrics"], sort_keys=True), json.dumps(row["records"], sort_keys=True))
                      for row in rows)

    assert episodes("remote") == episodes("local") and len(episodes("local")) == 16


def test_reference_agents_on_a_server_that_does_not_expose_them_are_a_usage_error(tmp_path, capsys):
    # (every episode failed as an infrastructure failure, exit 3 with advice to --resume, which
    # failed the same way)
    from llm_envs.cli import main

    common = ["--no-plot", "--no-progress", "--no-report"]
    with in_process_server("llm/TicTacToe-v0") as url:
        assert main(["eval", "--env-url", url, "--agent", "reference", "--episodes", "2",
                     "--out", str(tmp_path / "eval"), *common]) == 2
        assert "does not expose reference actions" in capsys.readouterr().err
        assert main(["arena", "llm/TicTacToe-v0", "--env-url", url, "--agent", "a=reference", "--agent", "b=random",
                     "--out", str(tmp_path / "arena"), *common]) == 2
        assert "does not expose reference actions" in capsys.readouterr().err
        assert main(["eval", "--env-url", url, "--agent", "random", "--episodes", "2",
                     "--out", str(tmp_path / "random"), *common]) == 0
    assert not (tmp_path / "eval").exists() and not (tmp_path / "arena").exists()


def test_an_eval_whose_server_goes_away_is_incomplete_and_resumes(tmp_path):
    import json
    import time

    import httpx

    from llm_envs.agents import ReferenceAgent
    from llm_envs.evaluation import evaluate
    from llm_envs.interop.remote import remote_runner
    from llm_envs.runner import IncompleteRunError
    from tests.serve.conftest import free_port

    class StopsTheServer(ReferenceAgent):
        """The reference agent, which stops the server after its fifth decision."""

        calls = 0
        server = None

        def act_batch(self, requests):
            outputs = super().act_batch(requests)
            StopsTheServer.calls += len(requests)
            if StopsTheServer.calls >= 5 and StopsTheServer.server is not None:
                StopsTheServer.server.should_exit = True
                StopsTheServer.server = None
                for _ in range(300):  # until it is gone, so that this very step finds it gone
                    try:
                        httpx.get(f"{url}/health", timeout=0.5)
                    except httpx.HTTPError:
                        break
                    time.sleep(0.05)
            return outputs

    env_id, port, out = "llm/TicTacToe-v0", free_port(), tmp_path / "run"
    servers: list = []
    options = dict(episodes=4, concurrency=1, out_dir=out, progress=False, plot=False)
    with in_process_server(env_id, port=port, servers=servers, expose_reference=True) as url:
        StopsTheServer.server = servers[0]
        with pytest.raises(IncompleteRunError) as caught:
            evaluate(env_id, StopsTheServer(), runner=remote_runner(url), **options)
    assert caught.value.failures, "the lost connection was not an infrastructure failure"
    messages = [f.message for f in caught.value.failures]
    assert any("lost mid-episode" in m or "cannot connect" in m for m in messages), messages
    assert len(caught.value.results) + len(caught.value.failures) == 4
    with in_process_server(env_id, port=port, expose_reference=True) as url:  # the server is back
        summary = evaluate(env_id, StopsTheServer(), runner=remote_runner(url), resume=True, **options)
    local = evaluate(env_id, ReferenceAgent(), **{**options, "out_dir": tmp_path / "local"})
    assert summary["episodes"] == local["episodes"] == 4

    def records(run):
        rows = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
        return sorted((row["seed"], json.dumps(row["records"], sort_keys=True)) for row in rows)

    assert records(out) == records(tmp_path / "local")  # each episode once, as a local run plays it


# A broken peer: /info is right, and the WebSocket answers every message with one chosen frame.
_GOOD = {"agent": "speaker", "instruction": "i", "prompt": "p", "role": "speaker", "turn": 0,
         "agents": ["speaker", "listener"], "possible_agents": ["speaker", "listener"],
         "rewards": {"speaker": 0.0, "listener": 0.0}, "cumulative_rewards": {"speaker": 0.0, "listener": 0.0},
         "terminations": {"speaker": False, "listener": False}, "truncations": {"speaker": False, "listener": False},
         "infos": {"speaker": {}, "listener": {}}, "episode_id": "e", "metrics": None, "num_records": 0}


def _observation(**changes):
    import json

    return json.dumps({"type": "observation", "data": {"observation": {**_GOOD, **changes}, "reward": None, "done": False}})


_BROKEN_FRAMES = {
    "a proxy's error page": "<html><body>502 Bad Gateway</body></html>",
    "a JSON array": "[1, 2]",
    "an observation without data": '{"type": "observation"}',
    "an observation missing its fields": '{"type": "observation", "data": {"observation": {"agent": "speaker"}}}',
    "an error whose data is text": '{"type": "error", "data": "boom"}',
    "an agent the environment does not have": _observation(agent="mallory", agents=["mallory"]),
    "a NaN reward": _observation(rewards={"speaker": float("nan"), "listener": 0.0}),
    "flags missing for live agents": _observation(terminations={}, truncations={}),
    "a state frame for a step": '{"type": "state", "data": {}}',
}


@pytest.fixture(scope="module")
def broken_server():
    import json
    import threading

    from websockets.datastructures import Headers
    from websockets.http11 import Response
    from websockets.sync.server import serve

    current = {"frame": ""}

    def handler(ws):
        with contextlib.suppress(Exception):
            for message in ws:
                kind = json.loads(message).get("type")
                if kind == "close":
                    return
                ws.send(current.get(kind, current["frame"]))

    def process_request(connection, request):
        if request.path != "/info":
            return None
        body = json.dumps({"env_id": "llm/Signalling-v0", "possible_agents": ["speaker", "listener"]}).encode()
        return Response(200, "OK", Headers([("Content-Type", "application/json"), ("Content-Length", str(len(body)))]), body)

    server = serve(handler, "127.0.0.1", 0, process_request=process_request)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield current, f"http://127.0.0.1:{server.socket.getsockname()[1]}"
    server.shutdown()


@pytest.mark.parametrize("what", list(_BROKEN_FRAMES))
def test_a_malformed_server_frame_is_a_lost_episode_never_a_crash_or_a_state(broken_server, what):
    # They came out as JSONDecodeError, AttributeError or KeyError (which the runner does not
    # catch: a proxy's error page crashed an evaluation), or were copied into the AEC state (an
    # agent the environment does not have, a NaN reward).
    current, url = broken_server
    current["frame"] = _BROKEN_FRAMES[what]
    env = RemoteEnv(url, timeout_s=10)
    try:
        with pytest.raises(RemoteConnectionError, match="the episode is lost"):
            env.reset(seed=0)
        with pytest.raises(RemoteEnvError, match="call reset"):
            env.last()
    finally:
        env.close()
    current["frame"] = _observation()
    healthy = RemoteEnv(url, timeout_s=10)
    try:
        healthy.reset(seed=0)
        assert healthy.agent_selection == "speaker" and healthy.last()[1] == 0.0
    finally:
        healthy.close()


def test_a_malformed_state_frame_is_a_lost_episode(broken_server):
    # (its fields were read as they came: a KeyError out of transcript(), agent_rewards(), ...)
    current, url = broken_server
    current["frame"] = _observation()
    current["state"] = '{"type": "state", "data": {"transcript": 3}}'
    env = RemoteEnv(url, timeout_s=10)
    try:
        env.reset(seed=0)
        with pytest.raises(RemoteConnectionError, match="a state frame without"):
            env.transcript()
    finally:
        env.close()
        current.pop("state")


def test_a_session_option_that_changes_the_agents_is_followed():
    # Debate with num_agents=3 on a server whose /info names two agents: the reset frame names
    # the session's agents, which the client adopts (its frames are not refused as malformed).
    with in_process_server("llm/Debate-v0") as url:
        env = llm_envs.remote(url, num_agents=3)
        try:
            assert len(env.possible_agents) == 2
            env.reset(seed=0)
            assert len(env.possible_agents) == 3 and set(env.agents) <= set(env.possible_agents)
            while not env.episode_over:
                env.step(env.random_action(env.agent_selection, __import__("numpy").random.default_rng(0)))
            assert set(env.agent_rewards()) == set(env.possible_agents)
        finally:
            env.close()
