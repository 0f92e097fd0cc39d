"""The batched runner: batching, streaming to JSONL, resume after a crash, determinism."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence

import numpy as np
import pytest

from llm_envs.agents import ActRequest, Agent, AgentError, AgentOutput, RandomAgent, ReferenceAgent
from llm_envs.episodes import EpisodeResult, IncompleteRunError, RunnerError, load_episodes
from llm_envs.runner import Runner, run_episodes
from tests.runner.toy_envs import SumsEnv

STEPS_PER_EPISODE = 4  # SumsEnv default: 2 rounds x 2 agents


class CountingReference(ReferenceAgent):
    """The reference agent, recording the size of every batch it is sent."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        self.batch_sizes.append(len(requests))
        return super().act_batch(requests)


class CrashAfter(Agent):
    """Plays like ``inner`` for ``calls`` batch calls, then raises (a crashed process)."""

    def __init__(self, inner: Agent, calls: int) -> None:
        self.inner, self.calls_left = inner, calls
        self.name = inner.name  # the same player as far as the results are concerned

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        if self.calls_left == 0:
            raise KeyboardInterrupt  # what Ctrl-C or a kill during a model call looks like
        self.calls_left -= 1
        return self.inner.act_batch(requests)


class AsyncEcho(Agent):
    """An agent with its own ``act_batch_async`` (like the HTTP agent): answers right after a
    short sleep, and records how many of its requests were in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0

    def act_batch(self, requests):  # pragma: no cover - the runner uses the async form
        raise AssertionError("the runner must call act_batch_async")

    async def _one(self, request: ActRequest) -> AgentOutput:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        return AgentOutput(text=request.env.reference_action(request.agent), completion_tokens=2)

    async def act_batch_async(self, requests):
        return list(await asyncio.gather(*(self._one(r) for r in requests)))


def outcomes(results: Sequence[EpisodeResult]) -> list[dict]:
    return [r.outcome() for r in results]


# ---------------------------------------------------------------------------- batching
def test_one_agent_for_all_roles_gets_every_pending_request_in_one_call():
    agent = CountingReference()
    results = run_episodes(SumsEnv, agent, num_episodes=8, seed=0, concurrency=8)
    assert agent.batch_sizes == [8] * STEPS_PER_EPISODE  # one call per turn, all 8 envs in it
    assert [r.success for r in results] == [1.0] * 8


def test_each_agent_object_gets_its_own_batches():
    alice, bob = CountingReference(), CountingReference()
    run_episodes(SumsEnv, {"alice": alice, "bob": bob}, num_episodes=6, concurrency=6)
    assert alice.batch_sizes == [6, 6] and bob.batch_sizes == [6, 6]


def test_batches_follow_concurrency_and_max_batch_size():
    agent = CountingReference()
    run_episodes(SumsEnv, agent, num_episodes=10, concurrency=4)
    assert max(agent.batch_sizes) == 4 and sum(agent.batch_sizes) == 10 * STEPS_PER_EPISODE
    assert len(agent.batch_sizes) < 10 * STEPS_PER_EPISODE / 2

    agent = CountingReference()
    runner = Runner(SumsEnv, agent, 8, concurrency=8, max_batch_size=3)
    runner.run()
    assert max(agent.batch_sizes) == 3 and sum(agent.batch_sizes) == 8 * STEPS_PER_EPISODE
    assert runner.stats == [
        {
            "agent": "reference",
            "plays": ["alice", "bob"],
            "calls": len(agent.batch_sizes),
            "requests": 32,
            "failed_requests": 0,
            "context_length_answers": 0,
        }
    ]

    agent = CountingReference()
    run_episodes(SumsEnv, agent, num_episodes=5, concurrency=1)
    assert agent.batch_sizes == [1] * (5 * STEPS_PER_EPISODE)


def test_async_agents_get_requests_concurrently_beside_sync_agents():
    fast, reference = AsyncEcho(), CountingReference()
    results = run_episodes(SumsEnv, {"alice": fast, "bob": reference}, num_episodes=12, concurrency=6)
    assert [r.success for r in results] == [1.0] * 12
    assert fast.max_in_flight == 6
    assert all(s["completion_tokens"] == 2 for r in results for s in r.steps if s["agent"] == "alice")
    assert results[0].tokens("alice") == (0, 4) and results[0].tokens("bob") == (0, 0)


# ---------------------------------------------------------------------------- results and files
def test_every_finished_episode_is_on_disk_when_it_is_reported(tmp_path):
    path = tmp_path / "episodes.jsonl"
    lines_at_callback = []

    def on_episode(result):
        lines_at_callback.append(len(path.read_text().splitlines()))

    results = run_episodes(
        SumsEnv, ReferenceAgent(), 7, seed=3, concurrency=3, out_path=path, on_episode=on_episode
    )
    assert lines_at_callback == list(range(1, 8))
    stored = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(d["index"] for d in stored) == list(range(7))
    assert outcomes(load_episodes(path)) != [] and sorted(r.index for r in load_episodes(path)) == list(
        range(7)
    )
    for data in stored:
        episode = EpisodeResult.from_dict(data)
        assert episode.seed == 3 + episode.index
        assert episode.env_id == "runner_test_sums_v0"
        assert episode.agents == {"alice": "reference", "bob": "reference"}
        assert len(episode.records) == len(episode.steps) == STEPS_PER_EPISODE
        for agent_id, total in episode.rewards.items():  # records carry the delayed credit too
            assert total == pytest.approx(sum(r["reward"] for r in episode.records if r["agent"] == agent_id))
            assert total == pytest.approx(3.0)
        assert [s["record_index"] for s in episode.steps] == [0, 1, 2, 3]
        assert episode.metrics["success"] == 1.0 and episode.metrics["turns"] == 4.0
    assert outcomes(results) == outcomes(sorted(load_episodes(path), key=lambda r: r.index))


def test_an_existing_file_is_not_overwritten_without_resume(tmp_path):
    path = tmp_path / "e.jsonl"
    run_episodes(SumsEnv, ReferenceAgent(), 2, out_path=path)
    with pytest.raises(RunnerError, match="resume=True"):
        run_episodes(SumsEnv, ReferenceAgent(), 2, out_path=path)


def test_resume_refuses_the_file_of_another_run(tmp_path):
    path = tmp_path / "e.jsonl"
    run_episodes(SumsEnv, ReferenceAgent(), 3, seed=0, out_path=path)
    with pytest.raises(RunnerError, match="another run"):
        run_episodes(SumsEnv, ReferenceAgent(), 3, seed=10, out_path=path, resume=True)
    with pytest.raises(RunnerError, match="other agents"):
        run_episodes(SumsEnv, RandomAgent(), 3, seed=0, out_path=path, resume=True)


# ---------------------------------------------------------------------------- resume
@pytest.mark.parametrize("agent_kind", ["reference", "random"])
def test_resume_after_a_crash_gives_the_results_of_an_uninterrupted_run(tmp_path, agent_kind):
    def make_agent():
        return ReferenceAgent() if agent_kind == "reference" else RandomAgent(7, per_decision_seed=True)

    env_kwargs = {"stop_on_error": True}  # episodes of different lengths
    counting = CrashAfter(make_agent(), calls=10**9)
    full = run_episodes(SumsEnv, counting, 20, seed=11, concurrency=4, env_kwargs=env_kwargs)
    calls_needed = 10**9 - counting.calls_left

    path = tmp_path / "episodes.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_episodes(
            SumsEnv,
            CrashAfter(make_agent(), calls=calls_needed // 2),
            20,
            seed=11,
            concurrency=4,
            env_kwargs=env_kwargs,
            out_path=path,
        )
    finished = load_episodes(path)
    assert 0 < len(finished) < 20  # some episodes were saved, some were lost in play
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"index": 19, "seed": 30, "env_id": "runner_te')  # a write torn by the crash

    resumed = run_episodes(
        SumsEnv, make_agent(), 20, seed=11, concurrency=3, env_kwargs=env_kwargs, out_path=path, resume=True
    )
    assert outcomes(resumed) == outcomes(full)
    lines = path.read_text().splitlines()
    assert len(lines) == 20 and sorted(json.loads(line)["index"] for line in lines) == list(range(20))
    # Resuming a complete run plays nothing more.
    never_called = CrashAfter(make_agent(), calls=0)
    again = run_episodes(
        SumsEnv, never_called, 20, seed=11, env_kwargs=env_kwargs, out_path=path, resume=True
    )
    assert outcomes(again) == outcomes(full)


# ---------------------------------------------------------------------------- determinism
def test_same_seed_same_results_whatever_the_concurrency_and_global_rngs():
    def play(concurrency, global_seed):
        random.seed(global_seed)
        np.random.seed(global_seed)
        agent = RandomAgent(1, per_decision_seed=True)
        return outcomes(
            run_episodes(
                SumsEnv,
                agent,
                12,
                seed=5,
                concurrency=concurrency,
                env_kwargs={"stop_on_error": True, "upper": 4},
            )
        )

    baseline = play(1, 0)
    assert play(5, 123) == baseline
    assert play(12, 7) == baseline
    # The random agent really is random across seeds, and across episodes.
    other = outcomes(
        run_episodes(
            SumsEnv,
            RandomAgent(2, per_decision_seed=True),
            12,
            seed=5,
            env_kwargs={"stop_on_error": True, "upper": 4},
        )
    )
    assert other != baseline
    assert len({json.dumps([r["action"] for r in e["records"]]) for e in baseline}) > 3


# ---------------------------------------------------------------------------- errors and API
def test_agent_mapping_must_cover_the_environment():
    with pytest.raises(RunnerError, match="missing \\['bob'\\]"):
        run_episodes(SumsEnv, {"alice": ReferenceAgent()}, 1)
    with pytest.raises(RunnerError, match="unknown \\['carol'\\]"):
        run_episodes(
            SumsEnv, {"alice": ReferenceAgent(), "bob": ReferenceAgent(), "carol": ReferenceAgent()}, 1
        )


def test_an_agent_returning_the_wrong_number_of_outputs_is_an_error():
    class Short(ReferenceAgent):
        def act_batch(self, requests):
            return super().act_batch(requests)[:-1]

    with pytest.raises(RunnerError, match="returned 1 outputs for 2 requests"):
        run_episodes(SumsEnv, Short(), 2, concurrency=2)


def test_an_agent_that_raises_leaves_its_episodes_incomplete_never_finished(tmp_path):
    class Broken(ReferenceAgent):
        calls = 0

        def act_batch(self, requests):
            Broken.calls += 1
            if Broken.calls > 6:
                raise RuntimeError("model crashed")
            return super().act_batch(requests)

    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, Broken(), 10, concurrency=2, out_path=path)
    error = info.value
    # Calls 1-4 play episodes 0 and 1 to the end (4 steps, both in each batch); call 7 fails
    # the two episodes in play, and each later call fails the next two; after 5 failed calls
    # in a row no new episode starts.
    assert sorted(e.index for e in load_episodes(path)) == [0, 1]
    assert [e.index for e in error.results] == [0, 1]
    assert error.missing == list(range(2, 10))
    lost = [f for f in error.failures if f.reason == "agent_error"]
    assert lost and all("RuntimeError: model crashed" in f.message for f in lost)
    assert {f.reason for f in error.failures} <= {"agent_error", "not_started"}
    assert "8 of 10 episodes are incomplete" in str(error) and "resume" in str(error)
    assert error.stop_reason and "5 failed calls in a row" in error.stop_reason


def test_outputs_that_are_not_actions_are_never_played(tmp_path):
    """An error output (what the hf and vllm agents return for an engine failure) and a
    non-text action both stop the episode: nothing is played, nothing is written."""

    class Numbers(Agent):
        def act_batch(self, requests):
            return [AgentOutput(text=42) for _ in requests]  # type: ignore[arg-type]

    class OutOfMemory(Agent):
        def act_batch(self, requests):
            return [AgentOutput(text="", error="RuntimeError: CUDA out of memory") for _ in requests]

    cases = [(Numbers(), "bad_output", "not text"), (OutOfMemory(), "agent_error", "out of memory")]
    for agent, kind, words in cases:
        path = tmp_path / f"{kind}.jsonl"
        with pytest.raises(IncompleteRunError) as info:
            run_episodes(SumsEnv, agent, 3, concurrency=3, out_path=path)
        assert load_episodes(path) == [] and info.value.results == []
        assert [f.reason for f in info.value.failures] == [kind] * 3
        assert all(words in f.message and f.agent == "alice" and f.decisions == 0 for f in info.value.failures)


def test_a_configuration_error_on_the_first_calls_stops_the_run_at_once(tmp_path):
    class WrongModel(Agent):
        name = "openai:test@no-such-model"
        calls = 0

        def act_batch(self, requests):
            WrongModel.calls += 1
            raise AgentError("HTTP 404: model 'no-such-model' not found (not retried)", kind="client_error")

    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, WrongModel(), 20, concurrency=4, out_path=tmp_path / "e.jsonl")
    error = info.value
    assert WrongModel.calls == 1  # no other call was made
    assert error.configuration_error is not None and error.results == []
    assert "model 'no-such-model' not found" in str(error) and "model name" in str(error)
    assert len(error.failures) == 20
    assert not (tmp_path / "e.jsonl").read_text()


def test_a_client_error_after_successes_loses_one_episode_not_the_run(tmp_path):
    """HTTP 4xx on one request mid-run (a prompt too long for the context) is not a
    configuration error: that episode is incomplete, the others finish."""

    class TooLongOnce(ReferenceAgent):
        calls = 0

        def act_batch(self, requests):
            outputs = super().act_batch(requests)
            for i in range(len(requests)):
                TooLongOnce.calls += 1
                if TooLongOnce.calls == 10:
                    outputs[i] = AgentOutput(
                        text="", error="HTTP 400: context too long", meta={"error_kind": "client_error"}
                    )
            return outputs

    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, TooLongOnce(), 6, concurrency=3, out_path=path)
    failures = [(f.reason, f.message) for f in info.value.failures]
    assert failures == [("client_error", "HTTP 400: context too long")]
    assert len(load_episodes(path)) == 5 and info.value.configuration_error is None
    resumed = run_episodes(SumsEnv, ReferenceAgent(), 6, out_path=path, resume=True)
    assert [e.index for e in resumed] == list(range(6)) and all(e.success == 1.0 for e in resumed)


def test_registered_ids_and_running_inside_an_event_loop(sums_env_id):
    async def inside():
        return run_episodes(sums_env_id, ReferenceAgent(), 3, env_kwargs={"rounds": 1})

    results = asyncio.run(inside())
    assert [r.env_id for r in results] == [sums_env_id] * 3
    assert [len(r.records) for r in results] == [2, 2, 2]
    assert {r.episode_id for r in results} == {f"runner_test_sums_v0:s{i}:e0" for i in range(3)}


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="concurrency"):
        Runner(SumsEnv, ReferenceAgent(), 1, concurrency=0)
    with pytest.raises(ValueError, match="out_path"):
        Runner(SumsEnv, ReferenceAgent(), 1, resume=True)
    assert run_episodes(SumsEnv, ReferenceAgent(), 0) == []


# ---------------------------------------------------------------------------- no batch barrier
class PerRequest(Agent):
    """Serves each request on its own (like the HTTP agent). The first decision of episode 0
    waits until every other episode has finished: with any batch barrier this deadlocks
    (and the wait's deadline fails the test)."""

    name = "per-request"

    def __init__(self, others: int) -> None:
        self.others = others
        self.finished: asyncio.Event | None = None
        self.in_flight_seen: list[int] = []
        self.runner: Runner | None = None

    def act_batch(self, requests):  # pragma: no cover - the runner uses act_async
        raise AssertionError("the runner must call act_async")

    async def act_async(self, request):
        if self.runner is not None:
            self.in_flight_seen.append(self.runner.progress.in_flight)
        if request.episode_seed == 0 and request.decision == 0:
            await asyncio.wait_for(self.finished.wait(), timeout=10)
        else:
            await asyncio.sleep(0)
        return AgentOutput(text=request.env.reference_action(request.agent), completion_tokens=1)


def test_each_episode_goes_on_as_soon_as_its_own_reply_arrives():
    agent = PerRequest(others=5)
    order = []

    def on_episode(result):
        order.append(result.index)
        if len(order) == agent.others:
            agent.finished.set()

    async def play():
        agent.finished = asyncio.Event()
        runner = Runner(SumsEnv, agent, 6, concurrency=6, on_episode=on_episode)
        agent.runner = runner
        return await runner.arun(), runner

    results, runner = asyncio.run(play())
    assert order[-1] == 0 and sorted(order) == list(range(6))  # episode 0 finished last
    assert all(r.success == 1.0 for r in results)
    assert runner.stats[0]["calls"] == runner.stats[0]["requests"] == 6 * STEPS_PER_EPISODE
    progress = runner.progress
    assert (progress.finished, progress.failed, progress.in_flight) == (6, 0, 0)
    assert progress.calls == 24 and progress.completion_tokens == 24
    assert max(agent.in_flight_seen) == 6  # every episode had a request out at once


def test_an_agent_failing_after_some_episodes_stops_new_episodes_and_keeps_the_rest(tmp_path):
    class DiesAfter(PerRequest):
        calls = 0

        async def act_async(self, request):
            DiesAfter.calls += 1
            if DiesAfter.calls > 9:
                raise AgentError("connection error (ConnectError: refused)", kind="connection")
            return AgentOutput(text=request.env.reference_action(request.agent))

    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, DiesAfter(0), 30, concurrency=2, out_path=path, max_consecutive_failures=3)
    error = info.value
    finished = load_episodes(path)
    assert len(finished) == 2 and all(e.success == 1.0 for e in finished)
    assert DiesAfter.calls < 9 + 6  # no new episode after 3 failures in a row
    assert {f.reason for f in error.failures} == {"connection", "not_started"}
    assert len(error.failures) == 28
    DiesAfter.calls = -(10**6)  # the server is back
    resumed = run_episodes(SumsEnv, DiesAfter(0), 30, concurrency=4, out_path=path, resume=True)
    assert [e.index for e in resumed] == list(range(30)) and all(e.success == 1.0 for e in resumed)
    assert len(path.read_text().splitlines()) == 30


def test_a_failed_chunk_of_a_batch_fails_only_its_own_requests(tmp_path):
    class SecondChunkFails(ReferenceAgent):
        calls = 0

        def act_batch(self, requests):
            SecondChunkFails.calls += 1
            if SecondChunkFails.calls == 2:
                raise RuntimeError("engine hiccup")
            return super().act_batch(requests)

    path = tmp_path / "e.jsonl"
    with pytest.raises(IncompleteRunError) as info:
        run_episodes(SumsEnv, SecondChunkFails(), 4, concurrency=4, max_batch_size=2, out_path=path)
    # The first call served episodes 0 and 1, the second (failed) episodes 2 and 3.
    assert info.value.missing == [2, 3] and sorted(e.index for e in load_episodes(path)) == [0, 1]


def test_an_evaluation_of_proposer_solver_judge_does_not_depend_on_concurrency_or_resume(tmp_path):
    # (only the first instance committed its accepted questions to the shared pool, so what an
    # episode's proposer and solver were shown depended on which instance played the earlier
    # episodes: at concurrency 8, 5 of 16 episodes differed from concurrency 1)
    import llm_envs

    def play(concurrency, out_path=None, n=16, resume=False):
        return outcomes(run_episodes("llm/ProposerSolverJudge-v0", ReferenceAgent(), n, seed=0,
                                     concurrency=concurrency, out_path=out_path, resume=resume))

    baseline = play(1)
    assert play(8) == baseline
    out = tmp_path / "episodes.jsonl"
    play(4, out, n=8)
    assert play(4, out, resume=True) == baseline
    assert sum(e["metrics"].get("question_accepted", 0) for e in baseline) > 0  # questions were admitted
    env = llm_envs.make("llm/ProposerSolverJudge-v0")
    before = len(env.pool)
    run_episodes(lambda: env, ReferenceAgent(), 4, concurrency=1)
    assert len(env.pool) == before  # an evaluation grows no pool
