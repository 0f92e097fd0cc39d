"""The human agent: shows the observation, reads a multi-line action from a stream."""

from __future__ import annotations

import io

import pytest

from llm_envs.agents import ActRequest
from llm_envs.agents.human import HumanAgent
from tests.runner.toy_envs import SumsEnv


def _agent(text: str, **kwargs) -> tuple[HumanAgent, io.StringIO]:
    shown = io.StringIO()
    return HumanAgent(io.StringIO(text), shown, **kwargs), shown


@pytest.mark.parametrize(
    "typed,expected",
    [
        ("42\n", "42"),
        ("first line\nsecond line\n\nnext entry\n", "first line\nsecond line"),  # blank line ends it
        ("a\nb\nEOF\nnext\n", "a\nb"),  # the end marker ends it and is not part of it
        ("\n\n  \n42\n\n", "42"),  # leading empty lines are skipped
        ("no newline at the end", "no newline at the end"),  # end of stream ends it
        ("EOF\n", ""),  # an empty action on purpose
        ("```python\ndef f():\n\n    return 1\n```\n\n", "```python\ndef f():\n\n    return 1\n```"),
    ],
)
def test_entry_rules(typed, expected):
    agent, _ = _agent(typed)
    assert agent.read_entry() == expected


def test_consecutive_entries_and_a_custom_marker():
    agent, _ = _agent("one\n.\ntwo\nlines\n.\n", end_marker=".")
    assert agent.read_entry() == "one"
    assert agent.read_entry() == "two\nlines"
    with pytest.raises(EOFError):
        agent.read_entry()


def test_exhausted_input_raises_eof():
    agent, _ = _agent("\n\n")
    with pytest.raises(EOFError, match="input stream ended"):
        agent.read_entry()


def test_shows_instruction_once_per_agent_and_the_prompt_every_time():
    env = SumsEnv()
    env.reset(seed=0)
    agent, shown = _agent("1\n\n2\n\n")
    request = ActRequest(env.observe("alice"), "alice", env)
    outputs = agent.act_batch([request, request])
    assert [o.text for o in outputs] == ["1", "2"]
    text = shown.getvalue()
    assert text.count("You are alice. Answer with the number only.") == 1
    assert text.count(env.observe("alice")["prompt"]) == 2
    assert "you play alice" in text and "end with an empty line or a line 'EOF'" in text

    agent, shown = _agent("1\n\n2\n\n", show_instruction="always")
    agent.act_batch([request, request])
    assert shown.getvalue().count("You are alice.") == 2


def test_bad_arguments():
    with pytest.raises(ValueError):
        HumanAgent(show_instruction="never")
    with pytest.raises(ValueError):
        HumanAgent(end_marker="  ")
