"""The persistent, thread-safe question pool of Multi-Agent Evolve."""

from __future__ import annotations

import copy
import json
import pickle
import threading

import numpy as np
import pytest

from llm_envs.envs.proposer_solver_judge.pool import PoolEntry, QuestionPool, question_key
from tests.envs.helpers import ListSource

from .conftest import math_problems


def test_seeded_from_a_task_source():
    source = ListSource(math_problems(10))
    pool = QuestionPool.from_task_source(source, size=4)
    assert len(pool) == 4
    assert [e.question for e in pool] == [p.prompt for p in source.problems[:4]]
    assert pool.lookup("What is 1 + 7?").answer == "8"
    assert (
        QuestionPool.from_task_source(source, size=100).entries()[-1].question
        == source.problems[-1].prompt
    )


def test_grows_only_with_quality_at_or_above_the_threshold():
    pool = QuestionPool(min_quality=0.7)
    assert not pool.add("Too vague?", 0.69)
    assert not pool.add("NaN?", float("nan"))
    assert pool.add("Good question?", 0.7)
    assert pool.add("Great question?", 1.0)
    assert not pool.add("Good  question?", 0.9)  # duplicate up to whitespace
    assert not pool.add("   ", 1.0)
    assert [e.question for e in pool] == ["Good question?", "Great question?"]
    assert "Good question?" in pool and "Other?" not in pool


def test_sampling_is_seeded_and_uniform():
    pool = QuestionPool(PoolEntry(f"q{k}") for k in range(4))
    draws = [pool.sample(np.random.default_rng(5)).question for _ in range(3)]
    assert len(set(draws)) == 1
    rng = np.random.default_rng(0)
    counts = {f"q{k}": 0 for k in range(4)}
    for _ in range(4000):
        counts[pool.sample(rng).question] += 1
    assert all(abs(c / 4000 - 0.25) < 0.03 for c in counts.values())
    with pytest.raises(ValueError):
        QuestionPool().sample(rng)


def test_save_and_load_round_trip(tmp_path):
    pool = QuestionPool([PoolEntry("seed q", "3", None, "seed:1")])
    pool.add("new q \U0001f600 with a lone surrogate \ud800", 0.8, answer=None)
    path = tmp_path / "pool.jsonl"
    pool.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["question"] for line in lines] == [
        "seed q",
        "new q \U0001f600 with a lone surrogate \ud800",
    ]
    loaded = QuestionPool.load(path)
    assert loaded.entries() == pool.entries()
    (tmp_path / "bad.jsonl").write_text('{"answer": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        QuestionPool.load(tmp_path / "bad.jsonl")


def test_open_appends_accepted_questions_across_runs(tmp_path):
    path = tmp_path / "pool.jsonl"
    first_run = QuestionPool.open(path, [PoolEntry("seed")])
    first_run.add("accepted", 0.9)
    first_run.add("rejected", 0.1)
    second_run = QuestionPool.open(path, [PoolEntry("seed")])
    assert [e.question for e in second_run] == ["seed", "accepted"]
    second_run.add("more", 0.75)
    assert [e.question for e in QuestionPool.load(path)] == ["seed", "accepted", "more"]


def test_a_pool_seeded_from_another_split_is_refused(tmp_path):
    # An evaluation env (split=validation) given the training run's pool file answered the
    # training split's questions and the proposer's.
    path = tmp_path / "pool.jsonl"
    train_seed = PoolEntry("Compute 41 - 29.", "12", None, "seed:arithmetic/train/105", "train")
    QuestionPool.open(path, [train_seed]).add("proposed", 0.9)
    with pytest.raises(ValueError, match=r"seeded from the train split.*validation split.*arithmetic/train/105.*pool_path of its own"):
        QuestionPool.open(path, [PoolEntry("What is 3 + 4?", "7", None, "seed:arithmetic/validation/0", "validation")])
    assert len(QuestionPool.load(path)) == 2  # the file is untouched
    # Other seeds of the same split (a curriculum's next level rebuilding the environments) and
    # a file written before the split was recorded are the pool as it is.
    again = QuestionPool.open(path, [PoolEntry("What is 9 + 9?", "18", None, "seed:arithmetic/train/3", "train")])
    assert [e.question for e in again] == ["Compute 41 - 29.", "proposed"]
    old = tmp_path / "old.jsonl"
    old.write_text('{"question": "seed q", "answer": "1", "quality": null, "source": "seed:x/1"}\n')
    assert len(QuestionPool.open(old, [PoolEntry("other", None, None, "seed:y", "validation")])) == 1


def test_concurrent_additions_are_safe(tmp_path):
    pool = QuestionPool(path=tmp_path / "pool.jsonl")
    barrier = threading.Barrier(8)

    def worker(worker_id):
        barrier.wait()
        for k in range(200):
            pool.add(f"q{k % 100}-{worker_id % 2}", 0.9)  # heavy overlap between workers
            pool.sample(np.random.default_rng(k))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(pool) == 200
    assert len({e.key for e in pool}) == 200
    assert len(QuestionPool.load(tmp_path / "pool.jsonl")) == 200
    assert len((tmp_path / "pool.jsonl").read_text().splitlines()) == 200


def test_copies_and_pickles_get_their_own_lock():
    pool = QuestionPool([PoolEntry("a")])
    for twin in (copy.deepcopy(pool), pickle.loads(pickle.dumps(pool))):
        twin.add("b", 1.0)
        assert len(twin) == 2 and len(pool) == 1
        assert twin._lock is not pool._lock


def test_question_key_ignores_only_what_does_not_change_the_question():
    assert question_key("a  b\n c") == question_key(" a b c ")
    # invisible characters, compatibility forms and case: the same question
    for same in ("a \u200bb c", "a b\u200d c\u00ad", "\u202aA B C", "ａ ｂ ｃ", "A b C", "a\u00a0b c"):
        assert question_key(same) == question_key("a b c"), same
    # any visible edit: another question
    for other in ("a b c!", "a b d", "a-b c", "ab c"):
        assert question_key(other) != question_key("a b c"), other


def test_checkpointed_pool_state_restores_exactly_and_rewrites_its_file(tmp_path):
    path = tmp_path / "pool.jsonl"
    pool = QuestionPool.open(path, [PoolEntry("What is 1 + 1?", "2")], min_quality=0.7)
    assert pool.add("What is 2 + 2?", 0.9)
    checkpoint = pool.state_dict()
    json.dumps(checkpoint)  # a checkpoint must be serialisable
    assert pool.add("What is 3 + 3?", 0.8)  # joins after the checkpoint
    pool.load_state_dict(checkpoint)
    assert [e.question for e in pool] == ["What is 1 + 1?", "What is 2 + 2?"]
    assert "What is 3 + 3?" not in pool
    reread = QuestionPool.load(path)
    assert [e.question for e in reread] == ["What is 1 + 1?", "What is 2 + 2?"]
    assert reread.lookup("What is 2 + 2?").quality == 0.9


def test_environment_state_dict_carries_the_shared_pool(math_source):
    from llm_envs.envs.proposer_solver_judge.env import ProposerSolverJudgeEnv

    env = ProposerSolverJudgeEnv(task_source=math_source, pool_seed_size=3)
    twin = env.clone()  # shares the pool, as the trainer's instances do
    state = env.state_dict()
    env.pool.add("A brand-new question?", 0.95)
    assert "A brand-new question?" in twin.pool
    twin.load_state_dict(state)
    assert "A brand-new question?" not in env.pool
    assert len(env.pool) == 3
