"""benchmarks/smollm2_envs.py: environment options, the counting of actions, and the table rebuilt
from kept episodes (played by the scripted reference agent: no model needed)."""

from __future__ import annotations

import pytest

from llm_envs.agents.spec import build_agent
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/smollm2_envs.py")


def test_parse_env_reads_typed_options(bench):
    assert bench.parse_env("llm/PlanPath-v0") == ("llm/PlanPath-v0", {})
    assert bench.parse_env("llm/PlanPath-v0:agents=single,max_turns=2") == (
        "llm/PlanPath-v0", {"agents": "single", "max_turns": 2})
    with pytest.raises(SystemExit, match="not key=value"):
        bench.parse_env("llm/PlanPath-v0:single")


def test_passive_records_are_not_actions(bench):
    records = [{"format_ok": False, "info": {}}, {"format_ok": True, "info": {"passive": True}},
               {"format_ok": True}]
    row = bench.summarize([({"success": 1.0}, records), ({"success": 0.0}, [])])
    assert (row["episodes"], row["success"], row["format_errors"], row["actions"]) == (2, 0.5, 1, 2)


def test_table_rebuilt_from_kept_episodes_matches_the_played_one(bench, tmp_path):
    spec = "llm/TicTacToe-v0"
    played = bench.play(spec, build_agent("reference"), 2, bench.runs_file(tmp_path, "ref", spec))
    rebuilt = bench.from_runs(tmp_path, "ref", spec)
    assert rebuilt is not None and played["episodes"] == 2 and played["actions"] > 0
    assert {k: rebuilt[k] for k in ("episodes", "success", "format_errors", "actions")} == {
        k: played[k] for k in ("episodes", "success", "format_errors", "actions")}
    assert bench.from_runs(tmp_path, "other", spec) is None
    assert "| `llm/TicTacToe-v0` |" in bench.markdown([rebuilt], {"max_tokens": 8})
