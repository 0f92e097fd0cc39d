"""Many programs against the same tests in one sandbox run (`run_function_tests_slots`).

What the Coder–Tester's ``catch_runs="one_run"`` relies on: each program's report is the one a
run of its own gives; the slots run in an order drawn at random for every run; a test process
can leave nothing behind for a later slot (files, sockets, processes, signals are refused by
its filter); a test cannot tell the golden slot by its position; early stop never drops a
catch. Real sandboxes (bwrap, process), no mocks.
"""

from __future__ import annotations

import pytest

from sandboxes import harness
from sandboxes.harness import run_function_tests, run_function_tests_slots

GOLDEN = "def f(x):\n    return x + 1\n"
WRONG = [
    "def f(x):\n    return x + 2\n",
    "def f(x):\n    return x + 1 if x < 5 else 0\n",
    "def f(x):\n    return x - 1\n",
]


def outcomes(report):
    return [(r.passed, (r.error or "").split(":")[0], r.harness_failure is not None) for r in report.results]


def test_each_slot_reports_what_a_run_of_its_own_reports(isolated):
    tests = [
        "assert f(1) == 2",
        "assert f(10) == 11",
        "assert f(1) == 5",  # wrong: every program fails it
        "f(2)\nassert True",
        "assert f('a') == 1",  # raises in every program
        "import time\nassert f(3) == 4",
    ]
    programs = [GOLDEN, *WRONG]
    slots = run_function_tests_slots(isolated, programs, tests, entry_point="f", golden=0, early_stop=False)
    assert sorted(s.position for s in slots) == list(range(len(programs)))
    for program, slot in zip(programs, slots):
        alone = run_function_tests(isolated, program, tests, entry_point="f")
        assert slot.complete and slot.stopped_at is None
        assert outcomes(slot.report) == outcomes(alone), program
        assert (slot.report.compiled, slot.report.ran) == (alone.compiled, alone.ran)


REFUSED = {
    "a file in /tmp": "open('/tmp/vote', 'w').write('1')",
    "a file in the job directory": "import os\nopen(os.path.join(os.environ['HOME'], 'vote'), 'w').write('1')",
    "a file in /dev/shm": "open('/dev/shm/vote', 'w').write('1')",
    "a directory": "import os\nos.mkdir('/tmp/votes')",
    "a socket": "import socket\nsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
    "a fork": "import os\nos.fork()",
    "a process": "import subprocess\nsubprocess.run(['true'])",
    "a signal": "import os\nos.kill(os.getppid(), 0)",
    "a signal to itself": "import os, signal\nos.kill(os.getpid(), signal.SIGCONT)",
    "a nicer priority for another": "import os\nos.setpriority(os.PRIO_PROCESS, os.getppid(), 5)",
    # (lowering a limit is always allowed without the filter)
    "a new limit": "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))",
}
ALLOWED = {
    "reading a file": "import json, os\nassert os.path.exists(json.__file__)\nopen(json.__file__).read()",
    "a thread": "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()",
    "reading a limit": "import resource\nresource.getrlimit(resource.RLIMIT_NOFILE)",
}


def test_a_test_process_can_leave_nothing_behind_for_a_later_slot(isolated):
    names = list(REFUSED) + list(ALLOWED)
    tests = [REFUSED.get(name) or ALLOWED[name] for name in names]
    slots = run_function_tests_slots(isolated, [GOLDEN, GOLDEN], tests + ["assert f(1) == 2"], entry_point="f", golden=0)
    for slot in slots:
        assert slot.complete
        results = slot.report.results
        for name, result in zip(names, results):
            if name in REFUSED:
                # EPERM (Python words it "not allowed ..." for setrlimit)
                error = result.error or ""
                assert not result.passed and ("PermissionError" in error or "not allowed" in error), (name, error)
            else:
                assert result.passed, (name, result.error)
        assert results[-1].passed  # the run goes on after every refusal


@pytest.mark.parametrize("path", ["'/tmp/left'", "'left'", "os.path.join(os.environ['HOME'], 'left')", "'/dev/shm/left'"])
def test_a_file_a_program_leaves_reaches_no_later_slot(isolated, path):
    """The programs are trusted, not filtered: what one leaves where the next slot's would find
    it is removed when its slot ends, as a run of its own finds those directories wiped."""
    writer = f"import os\ndef f(x):\n    open({path}, 'w').close()\n    return x + 1\n"
    reader = f"import os\ndef f(x):\n    return x + 1 + os.path.exists({path})\n"
    tests = ["assert f(1) == 2", "assert f(2) == 3"]
    assert run_function_tests(isolated, reader, tests, entry_point="f").all_passed
    # (the order is drawn per run: with two writers and three readers, a reader follows a writer 9 times in 10)
    slots = run_function_tests_slots(isolated, [writer, reader, writer, reader, reader], tests, entry_point="f", early_stop=False)
    assert all(slot.complete and slot.report.all_passed for slot in slots), [outcomes(s.report) for s in slots]


def test_no_process_of_a_slot_outlives_it_and_the_order_is_drawn_per_run(isolated):
    # Counts the run's live processes: the slot's test process and zygote, the test processes
    # still waiting for their turn, and no process of an earlier slot (each is killed and reaped
    # before the next slot starts). Passes in the last slot only: it fails on its position.
    position_test = (
        "import os\n"
        "parent = os.getppid()\n"
        "children = 0\n"
        "for name in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        fields = open('/proc/%s/stat' % name).read().rsplit(')', 1)[1].split()\n"
        "    except (OSError, IndexError):\n"
        "        continue\n"
        "    children += fields[1] == str(parent) and fields[0] != 'Z'\n"
        "assert children <= 2, children\n"
    )
    firsts, golden_failed = set(), []
    for _ in range(10):
        golden, wrong = run_function_tests_slots(
            isolated, [GOLDEN, WRONG[0]], [position_test], entry_point="f", golden=0, early_stop=False
        )
        firsts.add(golden.position)
        # Exactly one of the two fails it, the one that ran first, whichever it is: the golden
        # fails a test on its position as often as a wrong program does.
        assert golden.report.results[0].passed != wrong.report.results[0].passed
        assert golden.report.results[0].passed == (golden.position == 1)
        golden_failed.append(not golden.report.results[0].passed)
    assert firsts == {0, 1}  # P(the same order 10 times) = 2 / 2**10
    assert any(golden_failed) and not all(golden_failed)


def test_early_stop_ends_a_wrong_program_at_its_first_catch_after_the_golden_passed_it(isolated):
    tests = [
        "assert f(1) == 5",  # the golden fails it: never a reason to stop
        "assert f(10) == 11",  # catches WRONG[0] and WRONG[1]
        "assert f(3) == 4",
    ]
    seen_stop = seen_full = False
    for _ in range(8):
        slots = run_function_tests_slots(isolated, [GOLDEN, *WRONG[:2]], tests, entry_point="f", golden=0)
        golden = slots[0]
        assert golden.complete and golden.stopped_at is None
        assert [r.passed for r in golden.report.results] == [False, True, True]
        for slot, passes_third in zip(slots[1:], [False, True]):  # f(3) == 4: WRONG[0] no, WRONG[1] yes
            assert slot.report.results[1].error.startswith("AssertionError")  # caught either way
            if slot.position > golden.position:
                assert slot.stopped_at == 1
                # The test process may report test 2 (or finish) before the stop reaches it; a
                # test it did report keeps its real outcome, one it did not says why.
                third = slot.report.results[2]
                if not slot.complete and "stopped after test 1" in (third.error or ""):
                    assert not third.passed
                else:
                    assert third.passed == passes_third
                seen_stop = True
            else:
                assert slot.stopped_at is None and slot.complete
                seen_full = True
    assert seen_stop and seen_full  # each missed with probability (1/3) ** 8


def test_a_run_that_cannot_filter_its_test_processes_establishes_nothing(isolated, monkeypatch):
    monkeypatch.setattr(harness, "_test_process_filter", lambda: "")
    slots = run_function_tests_slots(isolated, [GOLDEN, WRONG[0]], ["assert f(1) == 2"], entry_point="f", golden=0)
    assert [s.report for s in slots] == [None, None]
    assert not any(s.complete for s in slots)


def test_a_test_process_never_sees_the_programs_nor_other_slots_secrets(isolated):
    # The programs' file is read only after every test process forked; a test looking for the
    # golden's source in its own process's memory finds nothing.
    marker = "golden_marker_7c1f"
    golden = GOLDEN + f"# {marker}\n"
    test = (
        "import gc\n"
        "gc.unfreeze()  # the run's process froze what it held before the forks\n"
        "needle = 'golden_marker' + '_7c1f'\n"
        "def strings(o):\n"
        "    if type(o) is dict:\n"
        "        return [v for v in list(o.values()) + list(o) if type(v) is str]\n"
        "    if type(o) in (list, tuple):\n"
        "        return [v for v in o if type(v) is str]\n"
        "    return []\n"
        "found = [s for o in gc.get_objects() for s in strings(o) if needle in s and s is not needle]\n"
        "assert not found, found[:1]\n"
    )
    slots = run_function_tests_slots(isolated, [golden, WRONG[0]], [test], entry_point="f", golden=0)
    assert all(s.report.results[0].passed for s in slots), [s.report.results[0].error for s in slots]
    # The same search finds what the test process does hold (the tests' own text).
    slots = run_function_tests_slots(
        isolated, [golden], [test, f"x = '{marker}'\nassert True"], entry_point="f", golden=0
    )
    assert not slots[0].report.results[0].passed


@pytest.mark.parametrize("count", [1, 3])
def test_a_program_that_fails_to_load_fails_its_own_slot_only(isolated, count):
    programs = [GOLDEN] + ["raise SystemExit(3)\n"] * count
    slots = run_function_tests_slots(isolated, programs, ["assert f(1) == 2"], entry_point="f", golden=0)
    assert slots[0].report.results[0].passed
    for slot in slots[1:]:
        assert slot.complete and not slot.report.ran and not slot.report.results[0].passed


def test_a_slot_that_never_ends_is_cut_at_its_own_time_limit_and_is_not_complete(isolated):
    # The test ignores its timer: the run's process ends the slot at a run of its own's limit
    # (0.1 s x (1 test + 3) + 2 s); nothing of it is complete, and the caller grades again.
    never = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n"
    (slot,) = run_function_tests_slots(isolated, [GOLDEN], [never], entry_point="f", time_s=0.1, golden=0)
    assert not slot.complete and slot.report is not None
    assert slot.report.results[0].error == "not run: the slot hit its time limit"


def test_a_fresh_server_after_an_abandoned_call_starts_from_the_top_levels_state(isolated):
    # The slot's solution process answers the calls itself; after a call the test process had to
    # abandon (the program ignores its timer), the next test gets a new solution process that ran
    # the top level again: the state a zygote's fresh copy would hold, as in a run of its own.
    program = (
        "import signal\n"
        "calls = [0]\n"
        "def f(x):\n"
        "    calls[0] += 1\n"
        "    if x < 0:\n"
        "        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "        while True:\n"
        "            pass\n"
        "    return calls[0]\n"
    )
    tests = ["assert f(1) == 1", "assert f(1) == 2", "f(-1)", "assert f(1) == 1", "assert f(1) == 2"]
    (slot,) = run_function_tests_slots(isolated, [program], tests, entry_point="f", time_s=0.3, golden=0)
    alone = run_function_tests(isolated, program, tests, entry_point="f", time_s=0.3)
    assert slot.complete
    assert outcomes(slot.report) == outcomes(alone)
    assert [r.passed for r in slot.report.results] == [True, True, False, True, True]
    assert slot.report.results[2].harness_failure is not None
