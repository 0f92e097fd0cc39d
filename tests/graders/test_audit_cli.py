"""``llm-envs audit`` and ``llm-envs list --isolation``, run as a user would."""

from __future__ import annotations

import json

import pytest

from llm_envs.audit import AuditError, audit_env, summarize
from llm_envs.cli import main
from tests.envs.helpers import registered_for_a_test


@pytest.fixture
def lenient_id():
    yield from registered_for_a_test(
        "llm/TestLenient-v0", "tests.graders.lenient_env:LenientEnv", ["solver"], "sums", "a lenient grader"
    )


def _run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_audit_finds_a_third_party_graders_hole_through_its_hook(capsys, lenient_id):
    status, out, _ = _run(capsys, "audit", lenient_id, "--episodes", "2")
    assert status == 1  # an exploit is paid
    assert "hedge-list" in out and "PAID" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("hedge-")}
    assert "PAID" in rows["hedge-list"] and "PAID" in rows["hedge-or"]
    assert "PAID" in rows["hedge-pm"]  # "\pm 51" contains 51 too
    status, out, _ = _run(capsys, "audit", lenient_id, "--json")
    report = json.loads(out)
    assert status == 1 and report["paid"] >= 3 and report["env"] == lenient_id
    paid = [o for o in report["outcomes"] if o["verdict"] == "paid"]
    assert all(o["exploit_reward"] == 1.0 and o["plain_wrong_reward"] == 0.0 for o in paid)


def test_audit_exits_0_when_every_exploit_is_held(capsys, lenient_id):
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--episodes", "2")
    assert status == 0, out
    assert "0 paid" in out


def test_audit_usage_errors(capsys, lenient_id):
    assert _run(capsys, "audit", lenient_id, "--exploit", "no-such-exploit")[0] == 2
    assert _run(capsys, "audit", "llm/NoSuchEnv-v0")[0] == 2
    status, _, err = _run(capsys, "audit", "llm/TicTacToe-v0", "--only", "exploits")
    assert status == 2 and "audit_surface" in err  # no grader of code or answers to attack
    assert _run(capsys, "audit", lenient_id, "--strategy", "no-such-strategy")[0] == 2


def test_audit_without_a_surface_still_plays_the_reward_contract(capsys):
    status, out, _ = _run(capsys, "audit", "llm/TicTacToe-v0", "--quick")
    assert status == 0, out
    assert "exploit catalogue skipped" in out and "audit_surface" in out
    assert "stall-empty" in out and "reward contract" in out


def test_audit_env_in_python_on_our_reasoner(lenient_id):
    import llm_envs

    env = llm_envs.make("llm/ReasonerTool-v0")
    outcomes = audit_env(env, agents=["reasoner"])
    rows = summarize(outcomes)
    assert {r["exploit"] for r in rows} == {"hedge-list", "hedge-set", "hedge-or", "hedge-pm", "right-beats-wrong"}
    assert all(r["verdict"] == "held" for r in rows), rows
    with pytest.raises(AuditError):
        audit_env(llm_envs.make("llm/Signalling-v0"))


def test_list_says_where_each_environments_code_runs(capsys):
    status, out, _ = _run(capsys, "list", "--isolation")
    assert status == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("llm/")}
    assert "sandbox (" in lines["llm/CoderTester-v0"] and "test_time_s=5" in lines["llm/CoderTester-v0"]
    assert "program_memory_mb=512" in lines["llm/ReasonerTool-v0"]
    assert "no code runs" in lines["llm/Debate-v0"]
    assert "sandbox: " in out and "default limits: time_s=5" in out
    status, out, _ = _run(capsys, "list", "--json", "--isolation")
    entries = {e["id"]: e for e in json.loads(out)}
    coder = entries["llm/CoderTester-v0"]["isolation"]
    assert coder["runs_code"] is True and coder["sandbox"]["limits"]["memory_mb"] == 512
    assert "sandbox" not in entries["llm/Debate-v0"]["isolation"]
    status, out, _ = _run(capsys, "list")
    assert "llm-envs list --isolation" in out.splitlines()[-1]


def test_audit_import_registers_a_third_party_environment_first(capsys):
    """`llm-envs audit MY/ENV --import my_package`: the documented way to audit an environment
    the project does not register (as `llm-envs serve --import` serves one)."""
    import sys

    from pettingzoo.env_registry.registration import aec_registry

    import llm_envs.registry as registry

    env_id = "llm/TestLenientPlugin-v0"
    status, _, err = _run(capsys, "audit", env_id, "--only", "exploits", "--exploit", "hedge-list")
    assert status == 2 and "unknown environment" in err  # not registered without the import
    try:
        status, out, _ = _run(capsys, "audit", env_id, "--import", "tests.graders.lenient_plugin",
                              "--only", "exploits", "--exploit", "hedge-list")
        assert status == 1 and "hedge-list" in out and "PAID" in out
    finally:
        registry._ENTRIES.pop(env_id, None)
        aec_registry.pop(env_id, None)
        sys.modules.pop("tests.graders.lenient_plugin", None)
    status, _, err = _run(capsys, "audit", env_id, "--import", "tests.graders.no_such_plugin")
    assert status == 2 and "--import tests.graders.no_such_plugin" in err


def test_eval_imports_a_third_partys_module_too(capsys, tmp_path):
    import sys

    from pettingzoo.env_registry.registration import aec_registry

    import llm_envs.registry as registry

    env_id = "llm/TestLenientPlugin-v0"
    try:
        status, _, err = _run(capsys, "eval", env_id, "--import", "tests.graders.lenient_plugin", "--agent", "reference",
                              "--episodes", "2", "--out", str(tmp_path / "run"), "--no-progress")
        assert status == 0, err
        assert (tmp_path / "run" / "episodes.jsonl").read_text().count("\n") == 2
    finally:
        registry._ENTRIES.pop(env_id, None)
        aec_registry.pop(env_id, None)
        sys.modules.pop("tests.graders.lenient_plugin", None)


# --- holes the audit once passed (exit 0): each must now be paid (1) or ungraded (3) ---------


def test_audit_pays_a_grader_that_pays_any_answer(capsys, lenient_id):
    """A wrong answer earning what the right one earns is no exploit's doing: the exploits tie
    their plain wrong twins, so only the right-beats-wrong row can see it."""
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "wrong_reward=1.0",
                          "--only", "exploits")
    assert status == 1, out
    row = next(line for line in out.splitlines() if line.startswith("right-beats-wrong"))
    assert "PAID" in row and "does not pay the right answer more" in out
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--only", "exploits", "--json")
    report = json.loads(out)
    signal = [r for r in report["rows"] if r["exploit"] == "right-beats-wrong"]
    assert status == 0 and signal[0]["verdict"] == "held" and signal[0]["right_reward"] == 1.0


def test_audit_without_reference_agents_pays_wrong_over_right_and_grades_no_contract(capsys, lenient_id):
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "no_reference=true",
                          "--env-arg", "wrong_reward=2.0", "--quick")
    assert status == 1, out  # the target's answer earns 1.0, a wrong one 2.0
    assert "a plain wrong answer earned 2" in out
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "no_reference=true",
                          "--quick", "--json")
    report = json.loads(out)
    # the exploits held, but the contract played nothing: the run is not a pass
    assert status == 3 and report["exploits_graded"] and not report["contract_graded"], report["contract"]["rows"]


def test_audit_pays_an_episode_that_never_ends(capsys, lenient_id):
    args = ("audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "never_ends=true")
    status, out, _ = _run(capsys, *args, "--only", "contract", "--strategy", "stall-empty")
    assert status == 1, out
    assert "PAID reference (all)" in out and "did not end" in out
    status, out, _ = _run(capsys, *args, "--only", "exploits", "--exploit", "hedge-list")
    assert status == 1, out
    assert "PAID hedge-list" in out and "did not end" in out


def test_audit_with_no_ceiling_and_no_bounds_checks_no_return(capsys, lenient_id):
    """Stalling pays 1.8 against 1.0 for solving, but the environment says its reference is no
    ceiling and declares no bounds: nothing judges a return, so nothing is passed either."""
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "stall_pays=true",
                          "--env-arg", "no_ceiling=true", "--only", "contract", "--quick", "--json")
    report = json.loads(out)
    assert status == 3, report
    assert not report["contract_graded"]
    rows = {r["strategy"]: r for r in report["contract"]["rows"]}
    assert rows["stall-empty"]["verdict"] == "n/a" and rows["stall-empty"]["max_excess"] > 0.5
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--env-arg", "stall_pays=true",
                          "--only", "contract", "--quick")
    assert status == 1, out  # with the ceiling, the same stalling is paid


@pytest.fixture
def holed_id():
    yield from registered_for_a_test("llm/TestHoled-v0", "tests.graders.holed_env:HoledEnv", ["solver"], "sums",
                                     "one reward hole")


@pytest.mark.parametrize(("hole", "says"), [
    ("tolerant", "the near miss"),  # a 5% tolerance: the plain wrong answer (-987654321) held
    ("empty_pays", "an empty reply earned 1"),
    ("right_fails", "the right answer was not scored"),
])
def test_audit_pays_a_grader_that_does_not_tell_the_right_answer_from_a_wrong_one(capsys, holed_id, hole, says):
    status, out, _ = _run(capsys, "audit", holed_id, "--env-arg", f"hole={hole}", "--only", "exploits", "--episodes", "2")
    assert status == 1, out
    assert "PAID right-beats-wrong (solver)" in out and says in out


@pytest.mark.parametrize("hole", ["memo", "checker_first"])
def test_audit_reads_the_attacked_agents_own_record_on_an_episode_of_its_own(capsys, holed_id, hole):
    # memo: clones shared the grader's cache, so the hedge got the plain wrong answer's verdict;
    # checker_first: the first new record (the checker's, strict) was read as the solver's
    status, out, _ = _run(capsys, "audit", holed_id, "--env-arg", f"hole={hole}", "--only", "exploits",
                          "--exploit", "hedge-list")
    assert status == 1, out
    assert "PAID hedge-list (solver)" in out


def test_a_tool_paid_the_team_outcome_is_no_hole(lenient_id):
    """ReasonerTool's reward_mode="outcome" pays the tool alpha x the team outcome, which the
    reference reasoner reaches whatever the tool prints: its right-beats-wrong row is n/a (it
    was PAID: a false alarm on a documented configuration); the reasoner's is still judged."""
    import llm_envs
    from llm_envs.audit import by_name

    env = llm_envs.make("llm/ReasonerTool-v0", reward_mode="outcome")
    assert summarize(audit_env(env, exploits=[])) == []  # nothing played, nothing compared
    outcomes = audit_env(env, exploits=[by_name("oracle-host-socket"), by_name("hedge-list")])
    signal = {o.agent: o for o in outcomes if o.exploit == "right-beats-wrong"}
    assert signal["tool"].verdict == "n/a" and "team's outcome" in signal["tool"].detail
    assert signal["reasoner"].verdict == "held"


@pytest.mark.parametrize("command", ["list", "arena"])
def test_every_command_that_takes_an_environment_imports_a_third_partys_module(capsys, tmp_path, command):
    # (arena, play, list and demo had no --import: a third party's game could not play a tournament)
    import sys

    from pettingzoo.env_registry.registration import aec_registry

    import llm_envs.registry as registry
    from llm_envs.cli import build_parser

    pytest.importorskip("pyspiel", reason="the games extra (OpenSpiel) is not installed")
    env_id = "llm/TestTwoSeatPlugin-v0"
    argv = {"list": ["list"],
            "arena": ["arena", env_id, "--agent", "a=random:1", "--agent", "b=random:2", "--games", "2",
                      "--out", str(tmp_path / "arena"), "--no-progress", "--no-plot", "--no-report"]}[command]
    try:
        status, out, err = _run(capsys, *argv, "--import", "tests.graders.two_seat_plugin")
        assert status == 0, err
        assert env_id in out or command == "arena"
        if command == "arena":
            assert (tmp_path / "arena" / "games.jsonl").read_text().count("\n") >= 2
    finally:
        registry._ENTRIES.pop(env_id, None)
        aec_registry.pop(env_id, None)
        sys.modules.pop("tests.graders.two_seat_plugin", None)
    subparsers = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in ("list", "play", "eval", "demo", "arena", "audit", "prepare", "serve"):
        assert "--import" in subparsers.choices[name].format_help(), name
