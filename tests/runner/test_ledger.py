"""RunLedger: the resume and failure bookkeeping that the local and the Ray runner share."""

from __future__ import annotations

import pytest

from llm_envs.agents.base import AgentError
from llm_envs.episodes import (
    EpisodeFailure,
    EpisodeResult,
    EpisodeWriter,
    IncompleteRunError,
    RunLedger,
    RunnerError,
    load_episodes,
)

ENV = "llm/Toy-v0"
AGENTS = {"a": "ReferenceAgent"}


def episode(index: int, seed: int = 10, env_id: str = ENV, agents: dict[str, str] | None = None) -> EpisodeResult:
    return EpisodeResult(
        index=index,
        seed=seed + index,
        env_id=env_id,
        episode_id=f"e{index}",
        agents=dict(agents or AGENTS),
        rewards={"a": 1.0},
        metrics={"success": 1.0, "turns": 1.0},
        records=[],
        steps=[],
    )


def write(path, results):
    writer = EpisodeWriter(path)
    for result in results:
        writer.write(result)
    writer.close()


def test_a_file_that_holds_episodes_is_refused_without_resume(tmp_path):
    path = tmp_path / "episodes.jsonl"
    write(path, [episode(0)])
    with pytest.raises(RunnerError, match="already holds episodes"):
        RunLedger(4, 10, path, resume=False).load()
    RunLedger(4, 10, tmp_path / "empty.jsonl", resume=False).load()  # a new file is fine


def test_resume_keeps_the_finished_episodes_and_plays_the_rest(tmp_path):
    path = tmp_path / "episodes.jsonl"
    write(path, [episode(0), episode(2), episode(7)])  # 7 lies beyond a 4-episode run
    ledger = RunLedger(4, 10, path, resume=True)
    ledger.load()
    ledger.check_resumed(ENV, AGENTS)
    assert sorted(ledger.resumed) == [0, 2]
    assert ledger.todo() == [1, 3]
    ledger.open()
    ledger.record(episode(1))
    ledger.record(episode(3))
    ledger.close()
    assert [r.index for r in ledger.finish()] == [0, 1, 2, 3]
    assert ledger.missing == []
    assert sorted(r.index for r in load_episodes(path)) == [0, 1, 2, 3, 7]


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (episode(1, env_id="llm/Other-v0"), "another run"),
        (episode(1, seed=99), "another run"),
        (episode(1, agents={"a": "RandomAgent"}), "other agents"),
        (episode(9, env_id="llm/Other-v0"), "another run"),  # beyond the run: still refused
    ],
)
def test_a_file_of_another_run_is_refused(tmp_path, other, message):
    path = tmp_path / "episodes.jsonl"
    write(path, [episode(0), other])
    ledger = RunLedger(4, 10, path, resume=True)
    ledger.load()
    with pytest.raises(RunnerError, match=message):
        ledger.check_resumed(ENV, AGENTS)


def test_finish_accounts_for_every_missing_episode(tmp_path):
    ledger = RunLedger(5, 10, None, resume=False)
    ledger.load()
    ledger.open()
    ledger.record(episode(0))
    ledger.fail(EpisodeFailure(1, 11, "sandbox", "the worker died", None, 2))
    with pytest.raises(IncompleteRunError) as raised:
        ledger.finish(in_play={2}, stop_reason="5 failed calls in a row of m")
    error = raised.value
    assert [r.index for r in error.results] == [0]
    assert [(f.index, f.reason) for f in error.failures] == [
        (1, "sandbox"), (2, "stopped"), (3, "not_started"), (4, "not_started")]
    assert error.failures[2].message == "5 failed calls in a row of m"
    assert error.failures[2].seed == 13
    assert ledger.missing == error.failures
    assert error.stop_reason == "5 failed calls in a row of m"


def test_a_configuration_error_names_the_agent_in_the_missing_episodes():
    ledger = RunLedger(2, 0, None, resume=False)
    ledger.fail(EpisodeFailure(0, 0, "client_error", "404", "a", 0))
    refused = AgentError("model not found", kind="client_error", status=404)
    with pytest.raises(IncompleteRunError) as raised:
        ledger.finish(configuration_error=refused, agent_name="openai:m")
    assert raised.value.configuration_error is refused
    assert raised.value.failures[1].message == "the run stopped: openai:m failed with a configuration error"
    assert "openai:m failed on its first call" in str(raised.value)
