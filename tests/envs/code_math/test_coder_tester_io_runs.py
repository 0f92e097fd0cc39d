"""The Coder–Tester's catch reward on stdin/stdout problems in one sandbox run per step
(:mod:`llm_envs.envs.coder_tester.io_runs`): the same mutants, counts and rewards as one run per
program (``catch_runs="per_program"``), in fewer sandbox runs; a golden solution that could run
its input as code keeps one run per program; what the one run does not establish is graded one
run per program."""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import io_runs, mutants
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.tasks import Problem
from tests.envs.helpers import ListSource

SOLUTIONS = {
    "max": (
        "n = int(input())\nxs = list(map(int, input().split()))\nbest = xs[0]\n"
        "for x in xs[1:]:\n    if x > best:\n        best = x\nprint(best)\n",
        [("3\n1 5 2\n", "5\n"), ("1\n-4\n", "-4\n"), ("4\n2 2 9 1\n", "9\n"), ("2\n-1 -2\n", "-1\n")],
    ),
    "prime": (
        "n = int(input())\nok = n > 1\ni = 2\nwhile i * i <= n:\n    if n % i == 0:\n        ok = False\n"
        "        break\n    i += 1\nprint('YES' if ok else 'NO')\n",
        [("2\n", "YES\n"), ("9\n", "NO\n"), ("97\n", "YES\n"), ("1\n", "NO\n")],
    ),
    "sort": (
        "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = sorted(map(int, data[1:1 + n]))\nprint(*xs)\n",
        [("3\n3 1 2\n", "1 2 3\n"), ("1\n5\n", "5\n"), ("4\n4 -1 0 2\n", "-1 0 2 4\n"), ("2\n2 2\n", "2 2\n")],
    ),
    "aborts": (  # a case the golden cannot run: its process ends by a signal
        "import os\nn = int(input())\nif n < 0:\n    os.abort()\ncount = 0\nfor i in range(n + 1):\n"
        "    if i % 3 == 0:\n        count += 1\nprint(count)\n",
        [("0\n", "1\n"), ("3\n", "2\n"), ("10\n", "4\n")],
    ),
}
PROBLEMS = [
    Problem(id=f"io/{name}", prompt=f"Solve {name}.", split="test", solution=solution, tests=tuple(tests), style="io")
    for name, (solution, tests) in SOLUTIONS.items()
]



def reply(*cases: tuple[str, str]) -> str:
    """A tester's reply in the released code's format."""
    return "\n\n".join(f"**Test Input:**\n```\n{i}\n```\n**Test Output:**\n```\n{o}\n```" for i, o in cases)


# The tester's replies: cases the golden passes, cases it fails, and a case it cannot run.
TESTER_REPLIES = {
    "max": [reply(("3\n1 5 2", "5"), ("2\n7 7", "7")), reply(("2\n1 2", "1"))],
    "prime": [reply(("4", "NO"), ("13", "YES")), reply(("13", "NO"))],
    "sort": [reply(("3\n9 8 7", "7 8 9"), ("2\n-5 5", "-5 5"))],
    "aborts": [reply(("6", "3"), ("-1", "0")), reply(("9", "4"))],
}


class CountingSandbox:
    """A real sandbox that counts the runs made through it."""

    def __init__(self, inner):
        self.inner, self.runs = inner, 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return self.inner.run(*args, **kwargs)

    def run_batch(self, jobs, *args, **kwargs):
        self.runs += len(jobs)
        return self.inner.run_batch(jobs, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _tester_step(env, index: int, reply: str) -> dict:
    env.reset(seed=0, options={"problem_index": index})
    env.step(env.reference_action("coder"))
    runs = env.sandbox.runs
    env.step(reply)
    tester = env.records[1]
    return {"reward": env.rewards["tester"], "runs": env.sandbox.runs - runs, **{
        key: tester.info.get(key) for key in ("golden_solution_pass_rate", "wrong_programs", "wrong_programs_caught")
    }}


@pytest.fixture
def envs(sandbox, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    mutants.clear_cache()
    counting = CountingSandbox(sandbox)
    source = ListSource(PROBLEMS)
    made = {mode: CoderTesterEnv(task_source=source, sandbox=counting, max_turns=1, catch_runs=mode)
            for mode in ("by_value", "per_program")}
    yield made
    mutants.clear_cache()


def test_one_run_chooses_the_same_mutants_and_pays_what_one_run_per_program_pays(envs):
    one, each = envs["by_value"], envs["per_program"]
    for index, problem in enumerate(PROBLEMS):
        one.reset(seed=0, options={"problem_index": index})
        assert io_runs.enabled(one)
        chosen_in_one_run = one._mutants()
        mutants.clear_cache()
        each.reset(seed=0, options={"problem_index": index})
        assert not io_runs.enabled(each)
        assert each._mutants() == chosen_in_one_run, problem.id
        assert chosen_in_one_run, problem.id
        for text in TESTER_REPLIES[problem.id.split("/")[1]]:
            for _ in range(2):  # (the second step finds the mutants cached)
                got, want = _tester_step(one, index, text), _tester_step(each, index, text)
                assert {k: v for k, v in got.items() if k != "runs"} == {
                    k: v for k, v in want.items() if k != "runs"
                }, (problem.id, text)
                assert got["wrong_programs"] == len(chosen_in_one_run)
                if problem.id != "io/aborts" or "-1\n" not in text:
                    # golden + wrong programs in one run, the coder's code one run per case
                    assert got["runs"] == 1 + text.count("Test Input"), (problem.id, got)
                    assert want["runs"] == (2 + len(chosen_in_one_run)) * text.count("Test Input")
                else:  # the golden's case ended by a signal: every program in runs of its own
                    assert got["runs"] > 1 + text.count("Test Input"), (problem.id, got)
    caught = _tester_step(one, 0, TESTER_REPLIES["max"][0])["wrong_programs_caught"]
    assert caught > 0  # the counts compared above are not all zero


def test_a_golden_that_can_run_its_input_as_code_is_graded_one_run_per_program(sandbox):
    assert io_runs.keeps_input_as_data(SOLUTIONS["sort"][0])
    for solution in (
        "print(eval(input()))\n",
        "exec(input())\n",
        "import pickle, sys\nprint(pickle.loads(sys.stdin.buffer.read()))\n",
        "import os\nos.system(input())\n",
        "x = input()\nprint(getattr(x, 'upper')())\n",
        "print((lambda: 0).__globals__)\n",
        "def f(:\n",
    ):
        assert not io_runs.keeps_input_as_data(solution), solution
    problem = Problem(id="io/eval", prompt="Evaluate.", split="test", solution="print(eval(input()))\n",
                      tests=(("1+2\n", "3\n"), ("2*3\n", "6\n")), style="io")
    env = CoderTesterEnv(task_source=ListSource([problem]), sandbox=sandbox, max_turns=1)
    env.reset(seed=0, options={"problem_index": 0})
    assert not io_runs.enabled(env) and not env._grades_in_one_run()


def test_graded_ahead_in_a_batch_it_pays_what_it_pays_one_step_at_a_time(sandbox, monkeypatch):
    from llm_envs.envs import grading

    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    source = ListSource(PROBLEMS[:3])
    envs = [CoderTesterEnv(task_source=source, sandbox=sandbox, max_turns=1) for _ in range(3)]

    def coder_turn(env, index):
        env.reset(seed=0, options={"problem_index": index})
        env.step(env.reference_action("coder"))
        return env.reference_action("tester")

    paid = []
    for cached in (False, True):  # the first batch plans the choice of mutants, the second the step
        if not cached:
            mutants.clear_cache()
        pairs = [(env, coder_turn(env, index)) for index, env in enumerate(envs)]
        # (first the choice's run each; then each step's two: the one run, and the coder's code)
        assert grading.grade_ahead(pairs) == (6 if cached else 3)
        for env, action in pairs:
            env.step(action)
        paid.append([(env.rewards["tester"], env.records[1].info["wrong_programs_caught"]) for env in envs])
    alone = []
    for index, env in enumerate(envs):
        env.step(coder_turn(env, index))
        alone.append((env.rewards["tester"], env.records[1].info["wrong_programs_caught"]))
    assert paid[0] == paid[1] == alone
    assert any(caught for _, caught in alone)
    mutants.clear_cache()
