"""The results file: checksums, duplicates, corruption, repair, and files of the old format."""

from __future__ import annotations

import json

import pytest

from llm_envs.agents import ReferenceAgent
from llm_envs.episodes import EPISODES_FORMAT_VERSION, EpisodeFileError, load_episodes
from llm_envs.runner import run_episodes
from tests.runner.toy_envs import SumsEnv


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "episodes.jsonl"
    results = run_episodes(SumsEnv, ReferenceAgent(), 5, seed=2, concurrency=2, out_path=path)
    return path, results


def test_every_line_carries_its_version_and_a_checksum_of_its_bytes(run_file):
    path, results = run_file
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    for line in lines:
        data = json.loads(line)
        assert data["format_version"] == EPISODES_FORMAT_VERSION
        assert data["checksum"].startswith("sha256:") and line.endswith(f'"checksum": "{data["checksum"]}"}}')
    assert sorted(e.index for e in load_episodes(path)) == [r.index for r in results]


def test_bytes_garbled_inside_a_string_are_detected(run_file):
    path, _ = run_file
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    target = lines[2]
    position = target.index(b"What is ") + len(b"What is ")  # inside a prompt string
    digit = target[position : position + 1]
    lines[2] = target[:position] + (b"7" if digit != b"7" else b"8") + target[position + 1 :]
    path.write_bytes(b"\n".join(lines))
    json.loads(lines[2])  # still valid JSON: only the checksum can tell
    with pytest.raises(EpisodeFileError, match=r"line 3: corrupt: checksum mismatch"):
        load_episodes(path)
    problems = []
    assert len(load_episodes(path, problems=problems)) == 4
    assert [(p.line, p.kind) for p in problems] == [(3, "corrupt")]


def test_a_duplicate_line_appended_by_hand_is_detected_and_repaired(run_file):
    path, _ = run_file
    first = path.read_text(encoding="utf-8").splitlines()[0]
    with open(path, "a", encoding="utf-8") as f:
        f.write(first + "\n")
    with pytest.raises(EpisodeFileError, match=r"line 6: duplicate: episode \d+ again"):
        load_episodes(path)
    episodes = load_episodes(path, repair=True)
    assert len(episodes) == 5 and len({e.index for e in episodes}) == 5
    assert len(path.read_text().splitlines()) == 5
    rejected = path.with_name("episodes.jsonl.rejected").read_text()
    assert "duplicate" in rejected and first in rejected  # nothing is lost
    assert len(load_episodes(path)) == 5  # the repaired file is clean


def test_a_different_result_for_the_same_episode_is_a_conflict(run_file):
    path, results = run_file
    other = run_episodes(SumsEnv, ReferenceAgent(), 1, seed=2 + results[0].index)[0]
    other.index = results[0].index
    other.metrics["success"] = 0.0
    from llm_envs.episodes import encode_episode_line

    with open(path, "a", encoding="utf-8") as f:
        f.write(encode_episode_line(other))
    problems = []
    load_episodes(path, problems=problems)
    assert [p.kind for p in problems] == ["conflict"] and problems[0].index == results[0].index


def test_resume_repairs_the_file_and_replays_exactly_the_rejected_episodes(run_file):
    path, results = run_file
    lines = path.read_text(encoding="utf-8").splitlines()
    garbled_index = json.loads(lines[1])["index"]
    lines[1] = lines[1].replace('"success": 1.0', '"success": 0.0')  # an edit after the fact
    path.write_text("\n".join(lines + [lines[0]]) + "\n", encoding="utf-8")  # and a duplicate
    agent = _Counting()
    resumed = run_episodes(SumsEnv, agent, 5, seed=2, out_path=path, resume=True)
    assert [e.index for e in resumed] == list(range(5))
    assert agent.episodes_played == {garbled_index}  # only the rejected one was played again
    assert [e.outcome() for e in resumed] == [r.outcome() for r in results]
    assert sorted(e.index for e in load_episodes(path)) == list(range(5))


class _Counting(ReferenceAgent):
    def __init__(self):
        self.episodes_played = set()

    def act_batch(self, requests):
        self.episodes_played.update(r.episode_seed - 2 for r in requests)
        return super().act_batch(requests)


def test_files_of_the_old_format_still_load(tmp_path, run_file):
    path, results = run_file
    old = tmp_path / "old.jsonl"
    with open(old, "w", encoding="utf-8") as f:
        for result in results:
            f.write(json.dumps(result.to_dict()) + "\n")  # format 1: no version, no checksum
    assert [e.outcome() for e in load_episodes(old)] == [r.outcome() for r in results]
    # A resumed old run appends lines of the new format beside the old ones.
    more = run_episodes(SumsEnv, ReferenceAgent(), 7, seed=2, out_path=old, resume=True)
    assert [e.index for e in more] == list(range(7))
    assert sum('"checksum"' in line for line in old.read_text().splitlines()) == 2


def test_a_torn_last_line_is_skipped_then_cut_by_repair(run_file):
    path, _ = run_file
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"index": 9, "seed": 11, "env_')
    assert len(load_episodes(path)) == 5  # not an error: what a crash leaves
    problems = []
    load_episodes(path, repair=True, problems=problems)
    assert [p.kind for p in problems] == ["torn"]
    assert path.read_bytes().endswith(b"}\n")
    assert not path.with_name("episodes.jsonl.rejected").exists()
