"""The host's combination of the two records of a function-test run (issue 30, item 4).

The test process (T) writes each test's verdict; the solution's side (S0, S1) writes its own
ledger of calls with a secret T never holds (``sandboxes/_function_driver.py``). A test passes
only if T says so and the server recorded no harness event during it; a failure counts as a
catch (``mutants.checked_failure``) only if no harness event came before it on either side, no
call was left running and the ledger is complete. These tests build the run's stdout by hand
(both sides' lines in a chosen order) and read the report, as ``run_function_tests`` does.
"""

from __future__ import annotations

import json

from llm_envs.envs.coder_tester.mutants import checked_failure
from sandboxes import RunResult
from sandboxes.harness import Limits, _report_from_run

TESTS_SECRET = "t" * 32
SOLUTION_SECRET = "s" * 32


def t_line(record: dict) -> str:
    return "\n" + TESTS_SECRET + json.dumps(record) + "\n"


def s_line(event: dict) -> str:
    return "\n" + SOLUTION_SECRET + json.dumps(event) + "\n"


def verdict(index: int, error: str | None = None, harness: str | None = None) -> str:
    record = {"kind": "test", "index": index, "error": error, "stdout": "", "timed_out": False}
    if harness is not None:
        record["harness"] = harness
    return t_line(record)


def call(server: int, number: int, harness: str | None = None) -> str:
    return s_line({"e": "b", "s": server, "c": number}) + s_line(
        {"e": "e", "s": server, "c": number, "h": harness}
    )


START = t_line({"kind": "compiled", "ok": True}) + t_line({"kind": "ran", "ok": True, "error": None, "stdout": ""})
SERVER_1 = s_line({"e": "server", "s": 1})
FINAL = t_line({"kind": "done"}) + s_line({"e": "final", "servers": 1})
FAILED = "AssertionError: assert f(2) == 5"


def report(stdout: str, tests: int, solution_secret: str | None = SOLUTION_SECRET):
    run = RunResult(stdout=stdout, stderr="", exit_code=0)
    return _report_from_run(run, ["assert f()"] * tests, Limits(), TESTS_SECRET, solution_secret)


def caught(result) -> bool:
    return checked_failure(result, io_style=False)


def test_an_honest_run_passes_and_catches_as_the_test_process_says():
    stdout = START + SERVER_1 + call(1, 1) + verdict(0) + call(1, 2) + verdict(1, FAILED) + FINAL
    first, second = report(stdout, 2).results
    assert first.passed and first.harness_failure is None
    assert not second.passed and second.error == FAILED and second.harness_failure is None
    assert caught(second)


def test_a_harness_event_only_the_solution_saw_rules_out_every_later_catch():
    # The test process cleared its own marks (or forged its record): the server's ledger still
    # says the reply was over the frame limit, so this failure and every later one catch nothing.
    frame = "a reply of 18000038 bytes is over the 16777216-byte frame limit"
    stdout = (
        START + SERVER_1 + call(1, 1) + verdict(0, FAILED) + call(1, 2, frame) + verdict(1, FAILED)
        + call(1, 3) + verdict(2, FAILED) + FINAL
    )
    before, during, after = report(stdout, 3).results
    assert caught(before)  # an ordinary catch before the harness event still counts
    assert frame in during.harness_failure and not caught(during)
    assert frame in after.harness_failure and not caught(after)


def test_a_pass_during_which_the_server_recorded_a_harness_event_does_not_pass():
    # E.g. the program caught the harness's time-out and returned: the test process saw a value.
    stdout = START + SERVER_1 + call(1, 1, "timed out (the solution caught its time-out)") + verdict(0) + call(1, 2) + verdict(1) + FINAL
    first, second = report(stdout, 2).results
    assert not first.passed and first.error.startswith("not judged: the solution's side: timed out")
    assert first.harness_failure
    assert second.passed  # the next test's calls were ordinary


def test_a_call_left_running_rules_out_a_catch_where_it_stands():
    # The test ran the call in a thread, gave up after a second and failed by its own assertion;
    # the server had begun the call and never ended it (the zygote ended the server at the end).
    stdout = START + SERVER_1 + s_line({"e": "b", "s": 1, "c": 1}) + verdict(0, "AssertionError") + FINAL
    (result,) = report(stdout, 1).results
    assert "still running" in result.harness_failure and not caught(result)


def test_a_call_that_began_after_a_failure_does_not_touch_it():
    # The call of a later test: it cannot have informed the earlier record.
    stdout = START + SERVER_1 + call(1, 1) + verdict(0, FAILED) + s_line({"e": "b", "s": 1, "c": 2}) + FINAL
    assert caught(report(stdout, 1).results[0])


def test_an_incomplete_ledger_rules_out_every_catch_but_not_the_passes():
    honest = START + SERVER_1 + call(1, 1) + verdict(0) + call(1, 2) + verdict(1, FAILED)
    cases = {
        "no final event (the run cut short, its output flooded, the zygote killed)": honest + t_line({"kind": "done"}),
        "a malformed event": honest + "\n" + SOLUTION_SECRET + "{not json\n" + FINAL,
        "an end without its beginning": honest + s_line({"e": "e", "s": 1, "c": 9, "h": None}) + FINAL,
        "a server started after the final event": honest + FINAL + s_line({"e": "server", "s": 2}),
    }
    for why, stdout in cases.items():
        first, second = report(stdout, 2).results
        assert first.passed, why
        assert "incomplete" in (second.harness_failure or ""), why
        assert not caught(second), why
    # Without the solution's secret the host has no ledger at all: nothing is caught.
    (only,) = report(START + verdict(0, FAILED) + FINAL, 1, solution_secret=None).results
    assert "missing" in only.harness_failure and not caught(only)


def test_a_late_event_of_a_replaced_server_does_not_fail_the_next_tests_pass():
    # The test process gave up on server 1 (its own timer: marked by it); server 1 wrote its late
    # time-out before the zygote ended it; test 1 runs on server 2 and passes.
    stdout = (
        START + SERVER_1 + s_line({"e": "b", "s": 1, "c": 1})
        + verdict(0, "timed out after 5s", harness="timed out")
        + s_line({"e": "e", "s": 1, "c": 1, "h": "timed out"}) + s_line({"e": "server", "s": 2})
        + call(2, 1) + verdict(1) + FINAL
    )
    first, second = report(stdout, 2).results
    assert first.harness_failure == "timed out" and not first.passed
    assert second.passed


def test_the_last_server_may_end_a_call_after_the_final_event():
    # The zygote writes `final` when the test process is done; a call the test gave up on may end
    # later. It was open where the test's record stands: no catch; the ledger is complete.
    stdout = (
        START + SERVER_1 + call(1, 1) + verdict(0, FAILED) + s_line({"e": "b", "s": 1, "c": 2})
        + verdict(1, FAILED) + FINAL + s_line({"e": "e", "s": 1, "c": 2, "h": "timed out"})
    )
    first, second = report(stdout, 2).results
    assert caught(first) and first.harness_failure is None
    assert "still running" in second.harness_failure


def test_records_the_test_process_writes_in_the_solutions_name_need_its_secret():
    # A forged "final" and a forged ordinary end, written with the test process's own secret (the
    # only one it has), are not the ledger's: the open call stays open.
    forged = t_line({"e": "e", "s": 1, "c": 1, "h": None}) + t_line({"e": "final", "servers": 1})
    stdout = START + SERVER_1 + s_line({"e": "b", "s": 1, "c": 1}) + forged + verdict(0, FAILED) + FINAL
    (result,) = report(stdout, 1).results
    assert not caught(result)


def test_a_line_glued_to_garbage_without_a_newline_still_counts_for_its_writer():
    # Every record starts with a newline of its own, so bytes another process wrote without one
    # cannot hide it.
    stdout = START + SERVER_1 + "garbage" + call(1, 1, "timed out") + "more garbage" + verdict(0, FAILED) + FINAL
    (result,) = report(stdout, 1).results
    assert "timed out" in result.harness_failure
