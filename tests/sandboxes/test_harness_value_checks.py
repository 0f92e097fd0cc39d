"""Trusted programs graded by value in one run (`run_value_checks`).

What the Coder–Tester's default ``catch_runs="by_value"`` relies on: each program's outcome on a
check is what a run of its own gives on that test; each program runs in a process of its own (no
state reaches the next program); the calls of one program share its state in order; a harness
event ends what a program's checks establish; a program that ignores its timer is ended without
taking the others with it. Real sandboxes (bwrap, process, docker), no mocks.
"""

from __future__ import annotations

import sys

import pytest

from llm_envs.verifiers.code import value_check
from sandboxes.harness import ValueCheck, run_function_tests, run_function_tests_slots, run_value_checks

GOLDEN = "def f(x):\n    return x + 1\n"
PROGRAMS = [
    GOLDEN,
    "def f(x):\n    return x + 2\n",
    "def f(x):\n    return x + 1 if x < 5 else 0\n",
    "def f(x):\n    if x == 'a':\n        raise KeyError(x)\n    return x - 1\n",
    "def f(x):\n    return [x]\n",
]
TESTS = [
    "assert f(1) == 2",
    "assert 11 == f(10), 'got ' + str(f(10))",
    "assert f(1) == 5",
    "assert not f(0) == 0",
    "assert abs(f(2.5) - 3.5) < 1e-9",
    "assert len(f(3)) == 1",  # an error of the test's own where f returns an int
    "assert f('a') == 1",  # raises in f
]


def checks_of(tests):
    checks = [value_check(test, "f") for test in tests]
    assert all(isinstance(c, ValueCheck) for c in checks)
    return checks


def as_run_of_its_own(report):
    """The outcomes a run of its own gives, in `ValueCheckResult`'s words (pass/fail/other)."""
    words = []
    for result in report.results:
        if result.passed:
            words.append("pass")
        elif (result.error or "").startswith("AssertionError"):
            words.append("fail")
        else:
            words.append("other")
    return words


@pytest.mark.parametrize("parallel", [1, 2, 4])
def test_each_program_gets_what_a_run_of_its_own_gives(isolated, parallel):
    results = run_value_checks(isolated, PROGRAMS, checks_of(TESTS), entry_point="f", time_s=2.0, parallel=parallel)
    assert len(results) == len(PROGRAMS)
    for program, result in zip(PROGRAMS, results):
        assert result is not None and result.ran and len(result.outcomes) == len(TESTS)
        own = as_run_of_its_own(run_function_tests(isolated, program, TESTS, entry_point="f", time_s=2.0))
        words = [o if o in ("pass", "fail") else "other" for o in result.outcomes]
        assert words == own, program
    assert results[0].outcomes[5] == "error" and results[3].outcomes[6] == "raised KeyError"


def test_the_calls_of_a_program_share_its_state_and_programs_share_nothing(isolated):
    counting = (
        "import json\n"
        "calls = [0]\n"
        "def f(x):\n"
        "    calls[0] += 1\n"
        "    seen = getattr(json, 'left_by_an_earlier_program', 0)\n"
        "    json.left_by_an_earlier_program = seen + 1\n"
        "    return [calls[0], seen]\n"
    )
    tests = ["assert f(0) == [1, 0]", "assert f(0) == [2, 1]"]
    for parallel in (1, 3):  # one after another, and at the same time
        results = run_value_checks(isolated, [counting] * 3, checks_of(tests), entry_point="f", parallel=parallel)
        assert [r.outcomes for r in results] == [("pass", "pass")] * 3


# A program that leaves a file where the next program would find it, and one that passes only
# where it finds none (as in a run of its own, where the sandbox wiped those directories).
_LEAVES = {
    "the job's directory": "'left'",
    "/tmp": "'/tmp/left'",
    "HOME": "os.path.join(os.environ['HOME'], 'left')",
    "/dev/shm": "'/dev/shm/left'",
}


@pytest.mark.parametrize("where", sorted(_LEAVES))
def test_a_file_one_program_leaves_reaches_no_other(isolated, where):
    path = _LEAVES[where]
    writer = f"import os\ndef f(x):\n    try:\n        open({path}, 'w').close()\n    except OSError:\n        pass\n    return x + 1\n"
    # (the reader waits a little for the file: beside the writer, it finds it)
    reader = (
        f"import os, time\ndef f(x):\n    end = time.monotonic() + 0.2\n"
        f"    while not os.path.exists({path}) and time.monotonic() < end:\n        time.sleep(0.01)\n"
        f"    return x + 1 + os.path.exists({path})\n"
    )
    tests = ["assert f(1) == 2", "assert f(2) == 3"]
    checks = checks_of(tests)
    for program in (writer, reader):  # each passes in a run of its own
        assert as_run_of_its_own(run_function_tests(isolated, program, tests, entry_point="f")) == ["pass", "pass"]
    # One after another: the writer read only its own file, and what it left was removed before
    # the reader started.
    results = run_value_checks(isolated, [writer, reader, reader], checks, entry_point="f", parallel=1)
    assert [r.outcomes for r in results] == [("pass", "pass")] * 3
    # Side by side, and with the writer as the golden: whatever was alive beside the writer could
    # have read its file, so it is not established (the host grades it in a run of its own);
    # nothing is ever a fail there.
    for parallel, golden in ((2, None), (2, 0), (3, None)):
        results = run_value_checks(isolated, [writer, reader, reader], checks, entry_point="f", parallel=parallel, golden=golden)
        assert all(r is None or r.outcomes == ("pass", "pass") for r in results), (parallel, golden, results)
        assert results[0] is None and results[1] is None and (parallel == 2 or results[2] is None)


def test_on_the_unsafe_backend_nothing_in_the_hosts_tmp_is_removed(tmp_path):
    """The unsafe backend's /tmp is the host's: a file created there during the run (by any
    process of the host) stays, and no program is marked for it."""
    import os
    import uuid

    import sandboxes

    path = f"/tmp/llm-envs-unsafe-{uuid.uuid4().hex}"
    writer = f"def f(x):\n    open({path!r}, 'w').close()\n    return x + 1\n"
    try:
        with sandboxes.make_sandbox("unsafe", allow_unsafe=True, pool_size=1, preload=[]) as sandbox:
            for run in (run_value_checks, run_function_tests_slots):
                results = (
                    run(sandbox, [writer, GOLDEN], checks_of(["assert f(1) == 2"]), entry_point="f", parallel=2)
                    if run is run_value_checks
                    else run(sandbox, [writer, GOLDEN], ["assert f(1) == 2"], entry_point="f")
                )
                assert all(r is not None for r in results)
                assert os.path.exists(path), run.__name__
                os.unlink(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_a_harness_event_ends_the_checks_of_that_program_only(isolated):
    programs = [
        "def f(x):\n    while True:\n        pass\n",  # its timer fires
        "def f(x):\n    return object()\n",  # not data
        "def f(x):\n    while True:\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass\n",  # ignores its timer: ended
        "raise ValueError('at the top level')\n",
        "len = None\ndef f(x):\n    return [x]\n",  # a builtin a check names, rebound
        GOLDEN,
    ]
    tests = ["assert len(str(f(1))) == 1", "assert f(1) == 2"]
    results = run_value_checks(isolated, programs, checks_of(tests), entry_point="f", time_s=0.5)
    assert results[0].outcomes == ("timeout",)
    assert results[1].outcomes == ("uncrossable",)
    assert results[2] is None or results[2].outcomes == ("timeout",)
    assert results[3].ran is False and "at the top level" in results[3].error
    assert results[4].outcomes == ("unestablished",)
    assert results[5].outcomes == ("pass", "pass")


def test_no_program_no_run(isolated):
    assert run_value_checks(isolated, [], checks_of(["assert f(1) == 2"]), entry_point="f") == []
    with pytest.raises(ValueError, match="parallel"):
        run_value_checks(isolated, [GOLDEN], checks_of(["assert f(1) == 2"]), entry_point="f", parallel=0)


@pytest.mark.parametrize("parallel", [1, 2])
def test_with_a_golden_each_program_stops_at_its_first_catch(isolated, parallel):
    checks = checks_of(TESTS)
    full = run_value_checks(isolated, PROGRAMS, checks, entry_point="f", time_s=2.0, parallel=parallel)
    early = run_value_checks(isolated, PROGRAMS, checks, entry_point="f", time_s=2.0, parallel=parallel, golden=0)
    golden_passed = {i for i, outcome in enumerate(full[0].outcomes) if outcome == "pass"}
    assert early[0] == full[0]  # the golden runs every check
    stopped = 0
    for whole, cut in zip(full[1:], early[1:]):
        catches = [i for i, o in enumerate(whole.outcomes) if o == "fail" and i in golden_passed]
        if cut.stopped:
            stopped += 1
            assert cut.outcomes == whole.outcomes[: catches[0] + 1]
        else:
            assert cut.outcomes == whole.outcomes
    # One at a time, every program after the golden knows its passes; two at a time, those that
    # start while the golden runs (at least the first beside it) run all their checks.
    caught = sum(1 for whole in full[1:] if any(o == "fail" and i in golden_passed for i, o in enumerate(whole.outcomes)))
    assert caught >= 3
    if parallel == 1:
        assert stopped == caught
    else:
        assert stopped < caught


def test_a_stop_the_golden_does_not_bear_out_is_not_established(isolated):
    # A (trusted) program that writes its own result, a stop on a check the golden failed.
    forged = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'{\"ran\": true, \"error\": null, \"outcomes\": [\"fail\"], \"stopped\": true}')\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    tests = ["assert f(1) == 5", "assert f(1) == 2"]  # the golden fails the first
    results = run_value_checks(isolated, [GOLDEN, forged], checks_of(tests), entry_point="f", golden=0, parallel=1)
    assert results[0].outcomes == ("fail", "pass")
    assert results[1] is None


@pytest.mark.parametrize("parallel", [1, 2])
def test_with_enough_no_program_starts_after_that_many_wrong_ones(isolated, parallel):
    """The choice of a problem's mutants keeps the first wrong programs: once `enough` of the
    programs that have ended are wrong, no program starts (skipped, not judged); what did run is
    what a run without `enough` gives, and holds that many wrong programs."""
    wrong, right = "def f(x):\n    return x - 1\n", GOLDEN
    programs = [wrong, right, wrong, right, wrong, wrong, right]
    checks = checks_of(["assert f(1) == 2", "assert f(2) == 3"])
    full = run_value_checks(isolated, programs, checks, entry_point="f", parallel=parallel)
    results = run_value_checks(isolated, programs, checks, entry_point="f", parallel=parallel, enough=2)
    ran = [r for r in results if not r.skipped]
    assert all(r.skipped for r in results[len(ran):]) and not any(r.skipped for r in full)
    assert ran == full[: len(ran)] and sum("fail" in r.outcomes for r in ran) >= 2
    if parallel == 1:  # one at a time: the second wrong program is the third
        assert len(ran) == 3
    assert all(r.ran is False and r.outcomes == () for r in results[len(ran):])
    # Not enough wrong programs: every program runs.
    assert run_value_checks(isolated, programs, checks, entry_point="f", parallel=parallel, enough=5) == full
    for bad in (dict(enough=0), dict(enough=1, golden=0), dict(enough=True)):
        with pytest.raises(ValueError, match="enough"):
            run_value_checks(isolated, programs, checks, entry_point="f", **bad)


def test_what_enough_counts_as_a_wrong_program_is_what_the_mutant_choice_counts(isolated):
    """The run's process decides what is a wrong program by itself (it reads each report as it
    comes): it must agree with ``mutants.wrong_by_values`` on the host, outcome by outcome. A
    program is judged, then the next is skipped exactly when the host counts the first one
    wrong."""
    from llm_envs.envs.coder_tester import mutants

    checks = checks_of(["assert f(1) == 2", "assert f(2) == 3"])
    cases = {
        "fails": "def f(x):\n    return x - 1\n",
        "passes": GOLDEN,
        "fails then times out": "def f(x):\n    while x == 2:\n        pass\n    return 0\n",
        "raises AssertionError": "def f(x):\n    raise AssertionError('no')\n",
        "raises then fails": "def f(x):\n    if x == 1:\n        raise ValueError(x)\n    return 0\n",
        "cannot cross": "def f(x):\n    return object() if x == 2 else 0\n",
        "binds a builtin": "abs = 3\ndef f(x):\n    return x - 1\n",
        "does not run": "raise ValueError('top')\n",
    }
    checks_with_abs = checks_of(["assert f(1) == 2", "assert abs(f(2)) == 3"])
    for name, program in cases.items():
        used = checks_with_abs if name == "binds a builtin" else checks
        first, second = run_value_checks(
            isolated, [program, GOLDEN], used, entry_point="f", parallel=1, enough=1, time_s=0.5
        )
        assert first is not None and not first.skipped, name
        assert second.skipped is (mutants.wrong_by_values(first, len(used)) is True), (name, first)


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_program_that_eats_memory_ends_its_own_checks_not_the_run(isolated, parallel):
    """Each program's process may grow by `memory_mb`, as a run of its own may: programs that
    eat memory meet ``MemoryError`` in their own process, and what they reach is not established
    (a run of its own decides them), while every other program of the run keeps its results.
    Two of them at once used to take the whole run over its budget: nothing established."""
    from llm_envs.envs.coder_tester import mutants

    eats = "def f(x):\n    held = []\n    while True:\n        held.append(b'x' * (1 << 20))\n"
    fails_first = "def f(x):\n    if x == 1:\n        return 0\n    return f.__globals__['eat']()\n" + (
        "def eat():\n    held = []\n    while True:\n        held.append(b'x' * (1 << 20))\n"
    )
    programs = [eats, GOLDEN, eats, "def f(x):\n    return x - 1\n", fails_first]
    checks = checks_of(["assert f(1) == 2", "assert f(2) == 3"])
    results = run_value_checks(isolated, programs, checks, entry_point="f", memory_mb=64, parallel=parallel, time_s=10.0)
    assert all(r is not None for r in results), results
    assert results[0].ran and results[0].outcomes == ("unestablished",)
    assert results[2] == results[0]
    assert results[1].outcomes == ("pass", "pass") and results[3].outcomes == ("fail", "fail")
    # A catch before the program ran out of memory stands; after it nothing is settled.
    assert results[4].outcomes == ("fail", "unestablished")
    assert mutants.wrong_by_values(results[0], 2) is None and mutants.wrong_by_values(results[4], 2) is None
    assert mutants.caught_by_values(results[0], [0, 1], 2) is None
    assert mutants.caught_by_values(results[4], [0, 1], 2) is True


STUBBORN = {
    # Catches its time-out at every level of a recursion near the recursion limit, where the
    # timer's handler cannot always run.
    "a recursion that catches its time-out": (
        "def g(n):\n    return n if n < 2 else g(n - 1) + g(n - 2)\n"
        "def h(n):\n    try:\n        return h(n + 2)\n    except BaseException:\n        return g(n)\n"
    ),
    # One long loop in C that never looks for signals: no timer's handler runs during it.
    "a loop in C that never lets a handler run": (
        "import itertools\ndef h(n):\n    return any(itertools.repeat(False, 10 ** 12))\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(STUBBORN))
def test_a_check_that_outlives_its_time_out_ends_the_program_timed_out(isolated, kind):
    """A program whose check goes on after its time-out fired ends with that check timed out,
    after the outcomes before it: not killed at the run's deadline for the whole program (which
    established nothing, and sent the program to a run of its own)."""
    from llm_envs.envs.coder_tester import mutants

    program = STUBBORN[kind] + "def f(x):\n    if x == 0:\n        return 1\n    return h(x)\n"
    checks = checks_of(["assert f(0) == 2", "assert f(1) == 1", "assert f(0) == 1"])
    results = run_value_checks(isolated, [GOLDEN, program], checks, entry_point="f", time_s=0.5)
    assert results[1] is not None and results[1].ran and results[1].outcomes == ("fail", "timeout"), results
    assert mutants.wrong_by_values(results[1], 3) is False
    assert mutants.caught_by_values(results[1], [0, 1, 2], 3) is True


def test_the_epilogue_runs_after_each_program_but_the_golden(isolated):
    epilogue = "_unwrapped = f\ndef f(x):\n    return _unwrapped(x) * 10\n"
    tests = ["assert f(1) == 2", "assert f(1) == 20", "assert f(1) == 30"]
    checks = checks_of(tests)
    programs = [GOLDEN, "def f(x):\n    return x + 2\n"]
    got = run_value_checks(isolated, programs, checks, entry_point="f", golden=0, epilogue=epilogue)
    appended = run_value_checks(isolated, [p + epilogue for p in programs], checks, entry_point="f")
    unguarded = run_value_checks(isolated, programs, checks, entry_point="f")
    assert got[0] == unguarded[0] and got[0].outcomes == ("pass", "fail", "fail")
    assert got[1] == appended[1] and got[1].outcomes == ("fail", "fail", "pass")


def test_what_does_not_compile_is_reported_and_an_epilogue_that_does_not_compile_runs_nothing(isolated):
    checks = checks_of(["assert f(1) == 2"])
    results = run_value_checks(isolated, [GOLDEN, "def f(x) return x\n"], checks, entry_point="f")
    assert results[0].outcomes == ("pass",)
    assert results[1].ran is False and "SyntaxError" in results[1].error
    results = run_value_checks(isolated, [GOLDEN, GOLDEN], checks, entry_point="f", golden=0, epilogue="def (:\n")
    assert results[0].outcomes == ("pass",)  # the golden has no epilogue
    assert results[1].ran is False and "SyntaxError" in results[1].error
    with pytest.raises(ValueError, match="golden"):
        run_value_checks(isolated, [GOLDEN], checks, entry_point="f", golden=1)


def test_the_epilogue_alone_finds_the_golden_code_compiled_by_the_run(isolated, monkeypatch):
    setup = "import math\n"
    program = "seen_at_top = '__golden_code__' in globals()\ndef f(x):\n    return x\n"
    epilogue = (
        "_code = __golden_code__\n"
        "_found = [_code[0] == SETUP, type(_code[1]).__name__, _code[2] == GOLDEN, type(_code[3]).__name__]\n"
        "def f(x, _found=_found, _top=seen_at_top):\n"
        "    return [_top, '__golden_code__' in globals()] + _found\n"
    ).replace("SETUP", repr(setup)).replace("GOLDEN", repr(GOLDEN))
    checks = checks_of(["assert f(0) == [False, False, True, 'code', True, 'code']"])
    results = run_value_checks(isolated, [GOLDEN, program], checks, setup=setup, entry_point="f", golden=0, epilogue=epilogue)
    # Bound while the epilogue runs, not before it (the program's top level) nor after it.
    assert results[1].outcomes == ("pass",)
    # Without a golden there is none: the epilogue's first line raises.
    results = run_value_checks(isolated, [program], checks, setup=setup, entry_point="f", epilogue=epilogue)
    assert results[0].ran is False and "NameError" in results[0].error
    # A run without a golden among its programs finds its reference there instead, compiled
    # (sent by the host, or compiled by the run where the host's file is not for it), and does
    # not grade it.
    results = run_value_checks(
        isolated, [program], checks, setup=setup, entry_point="f", epilogue=epilogue, reference=GOLDEN
    )
    assert [r.outcomes for r in results] == [("pass",)]
    from sandboxes import harness

    monkeypatch.setattr(harness, "_value_checks_code", lambda *a: b"not the host's file")
    results = run_value_checks(
        isolated, [program], checks, setup=setup, entry_point="f", epilogue=epilogue, reference=GOLDEN
    )
    assert [r.outcomes for r in results] == [("pass",)]
    monkeypatch.undo()
    with pytest.raises(ValueError, match="reference"):
        run_value_checks(isolated, [GOLDEN, program], checks, entry_point="f", golden=0, reference=GOLDEN)


def test_the_setup_and_the_golden_run_once_and_each_program_starts_from_a_copy(isolated):
    """The run's process runs the setup, and the setup and the golden in the guard's namespace,
    once (each program's process would pay for that work again); each program's process starts
    from its own copy of both, so nothing one program does to them reaches another."""
    setup = "import os\nSETUP_PID = os.getpid()\nSEEN = []\n"
    program = "def f(x):\n    SEEN.append(x)\n    return [len(SEEN), SETUP_PID != os.getpid()]\n"
    epilogue = (
        "_golden = __golden_code__[4]\n"
        "_golden['SEEN'].append('guard')\n"
        "_found = [_golden['__name__'], len(_golden['SEEN']), _golden['SETUP_PID'] != os.getpid(), _golden['f'](0)]\n"
        "_unwrapped = f\n"
        "def f(x, _found=_found):\n"
        "    return _unwrapped(x) + _found\n"
    )
    golden = "def f(x):\n    return x + 1\n"
    checks = checks_of(["assert f(0) == [1, True, '__golden__', 1, True, 1]", "assert f(0) == [2, True, '__golden__', 1, True, 1]"])
    for parallel in (1, 3):
        results = run_value_checks(
            isolated, [golden] + [program] * 3, checks, setup=setup, entry_point="f", golden=0, epilogue=epilogue,
            parallel=parallel,
        )
        assert [r.outcomes for r in results[1:]] == [("pass", "pass")] * 3, [(r.outcomes, r.error) for r in results]


@pytest.mark.parametrize("setup", ["raise ValueError('in the setup')\n", "import time\ntime.sleep(30)\n"])
def test_a_setup_that_fails_in_the_runs_process_fails_each_program_as_a_run_of_its_own(isolated, setup):
    checks = checks_of(["assert f(1) == 2"])
    results = run_value_checks(isolated, [GOLDEN, GOLDEN], checks, setup=setup, entry_point="f", time_s=0.3)
    own = run_function_tests(isolated, GOLDEN, ["assert f(1) == 2"], setup=setup, entry_point="f", time_s=0.3)
    assert not own.ran
    for result in results:
        assert result is not None and result.ran is False and result.outcomes == ()
        assert ("in the setup" in result.error) if "raise" in setup else ("timed out" in result.error), result.error


def test_the_run_runs_the_code_the_host_compiled(isolated, monkeypatch):
    """The host sends the programs compiled (a problem's are the same at every step); the run
    falls back to the sources where that file is not for its interpreter or not well formed."""
    import marshal

    from sandboxes import harness

    checks = checks_of(["assert f(1) == 2"])
    expected = run_value_checks(isolated, [GOLDEN], checks, entry_point="f")[0].outcomes
    assert expected == ("pass",)
    real = harness._value_checks_code
    # Code compiled from another program: the run grades what the host compiled.
    other = compile("def f(x):\n    return x + 5\n", "solution.py", "exec", dont_inherit=True)
    tag = harness._CALLS_CODE_MAGIC + sys.implementation.cache_tag.encode("ascii") + b"\n"
    monkeypatch.setattr(harness, "_value_checks_code", lambda *a: tag + marshal.dumps((None, None, (other,))))
    assert run_value_checks(isolated, [GOLDEN], checks, entry_point="f")[0].outcomes == ("fail",)
    for content in (
        real("", "", [GOLDEN]).replace(sys.implementation.cache_tag.encode("ascii"), b"cpython-10"),  # another interpreter
        tag + b"not marshal data",
        tag + marshal.dumps((None, None, (other, other))),  # not one code per program
        tag + marshal.dumps((None, None, ("def f(x): return 0",))),  # not code
        tag + marshal.dumps([1, 2]),
    ):
        monkeypatch.setattr(harness, "_value_checks_code", lambda *a, content=content: content)
        assert run_value_checks(isolated, [GOLDEN], checks, entry_point="f")[0].outcomes == expected, content[:40]
