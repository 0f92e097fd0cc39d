"""An adversarial audit of the rewards of Sudoku, Sokoban, Plan-Path, Reasoner–Tool and
Coder–Tester (issue 30): attacks an RL policy could learn, each compared with solving at once
and with a plain wrong answer, per agent, summed over the episode and per turn where it matters.

Every expected value is computed by hand in the test's docstring (alpha = 1 unless told). The
puzzles use the Plan-Path grid of tests/envs/puzzles/test_puzzle_rewards.py:

    S.#.
    ..#G        d(S) = 6; the shortest path D D R R R U earns -0.06 + 6 + 1 + 0.5 = 7.44
    ....

so an agent that solves at once earns 7.44 + 7.44 = 14.88 (its local term and the team's).
Attacks that paid before this audit are marked "paid before" (the options' weight signs); the
others held, and stay here as regression tests: each also runs the paper's option (a reward
hole, asked for) where one exists, to show that the test can fail.
"""

from __future__ import annotations

import pytest

import sandboxes
from llm_envs.envs.coder_tester import rules as coder_rules
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.envs.plan_path import rules as path_rules
from llm_envs.envs.plan_path.env import PlanPathEnv
from llm_envs.envs.plan_path.rules import PathRewards
from llm_envs.envs.reasoner_tool import rules as reasoner_rules
from llm_envs.envs.reasoner_tool.env import ReasonerToolEnv
from llm_envs.envs.sokoban import rules as sokoban_rules
from llm_envs.envs.sokoban.env import SokobanEnv
from llm_envs.envs.sokoban.rules import SokobanRewards
from llm_envs.envs.sudoku.env import SudokuEnv
from llm_envs.envs.sudoku.rules import SudokuRewards
from tests.envs.helpers import ADD, TWELVE, ListSource, play

HAND = "3 4\nS.#.\n..#G\n...."
SHORTEST = "D D R R R U"
AT_ONCE = 7.44
# The same grid with the start one step closer: d(S) = 5, solving at once 6.45 per term.
NEAR = "3 4\n.S#.\n..#G\n...."
SUDOKU = "4\n1 0 0 4\n0 0 0 0\n0 0 0 0\n0 3 2 0"  # 4 clues, 12 empty cells
SOKOBAN = "6 7\n#######\n#@$.__#\n#_____#\n#.$___#\n#_____#\n#######"  # two boxes

RIGHT = "3 × 4 = 12, so \\boxed{12}"
WRONG = "3 × 4 = 11, so \\boxed{11}"
GOLDEN = "**Code:**\n```python\n" + ADD.solution + "```"
ZERO = "**Code:**\n```python\ndef add(a, b):\n    return 0\n```"  # passes 2 of 4 golden tests


def unit_tests(*lines: str) -> str:
    return "**Tests:**\n```python\n" + "\n".join(lines) + "\n```"


GOLDEN_TESTS = unit_tests(*ADD.tests)
STALLING_TESTS = unit_tests(*ADD.tests, "assert add(2, 2) == 5")  # the golden fails it


@pytest.fixture(scope="module")
def sandbox():
    return sandboxes.shared_sandbox("auto")


def program(body: str) -> str:
    return f"```python\n{body}```"


def printing(plan: str) -> str:
    return program(f"print({('#### ' + plan)!r})\n")


def rewards_of(env, agent: str) -> list[float]:
    """The agent's reward at each of its actions (its record's total)."""
    return [record.reward for record in env.records if record.agent == agent]


def by_turn(replies: dict[str, list[str]]):
    """A policy that plays ``replies[agent][turn]`` (the last one repeats)."""

    def policy(env, agent):
        sequence = replies[agent]
        return sequence[min(env.turn, len(sequence) - 1)]

    return policy


def plan_path(sandbox, **options) -> PlanPathEnv:
    return PlanPathEnv(sandbox=sandbox, **options)


def at_once_on(sandbox, puzzle: str, **options) -> dict[str, float]:
    def policy(env, agent):
        plan = " ".join(env.rules.solve(env.puzzle_state))
        return printing(plan) if agent == "tool" else "#### " + plan

    return play(plan_path(sandbox, **options), policy, options={"puzzle": puzzle})


# =================================================================== puzzles: episode attacks
def test_puzzle_lose_then_regain_does_not_pay_the_regained_level_again(sandbox):
    """Attack: the plan agent walks two steps (D D), walks back (U U), then solves; the tool
    posts the shortest path from the current cell every turn, hoping the regained progress is
    paid to it again.

    Plan agent (potential Φ = -d, the best potential B of the real states; a turn pays its move
    costs plus Φ(after) - B): D D 1.98 (B = -4); U U -2.02 (Φ = -6, B stays -4); then
    D D R R R U from S after 4 moves (no shortest-path bonus): -0.06 + 1 - (-4) = 4.94, the
    two steps it regains are not paid again. Per term 1.98 - 2.02 + 4.94 = 4.90, twice =
    9.80. Tool: its first copy 7.44 (best value 7.44); from (2,0) R R R U is worth 1.98 + 5.46
    = 7.44: 0; from S again -0.04 + 6.94 = 6.90: 0; plus the team's 4.90: 12.34. Solving at
    once: 14.88 each, in one turn. progress_reference="previous" (the pure potential
    difference) pays the regaining turn 6.94 a term: plan 13.80, tool 14.34. Paper shaping
    pays the tool every copy: 7.44 + 5.46 + 6.94 + 6.90 = 26.74.
    """
    replies = {"plan": ["#### D D", "#### U U", "#### " + SHORTEST]}

    def attack(env, agent):
        if agent == "tool":
            return printing(" ".join(env.rules.solve(env.puzzle_state)))
        return by_turn(replies)(env, agent)

    at_once = at_once_on(sandbox, HAND)
    assert at_once == pytest.approx({"tool": 2 * AT_ONCE, "plan": 2 * AT_ONCE})
    env = plan_path(sandbox)
    attacked = play(env, attack, options={"puzzle": HAND})
    assert attacked == pytest.approx({"tool": 7.44 + 4.90, "plan": 2 * 4.90})
    assert rewards_of(env, "tool") == pytest.approx([7.44 + 1.98, -2.02, 4.94])
    assert rewards_of(env, "plan") == pytest.approx([2 * 1.98, 2 * -2.02, 2 * 4.94])
    for agent in attacked:
        assert attacked[agent] <= at_once[agent]
        assert max(rewards_of(env, agent)) <= at_once[agent]
    previous = play(plan_path(sandbox, progress_reference="previous"), attack, options={"puzzle": HAND})
    assert previous == pytest.approx({"tool": 7.44 + 6.90, "plan": 2 * 6.90})
    farmed = play(
        plan_path(sandbox, reward_shaping="paper", allow_reward_holes=True),
        attack,
        options={"puzzle": HAND},
    )
    assert farmed["tool"] == pytest.approx(7.44 + 5.46 + 6.94 + 6.90)
    assert farmed["tool"] > at_once["tool"]


def test_puzzle_plan_agent_lowering_the_team_level_for_the_tool_does_not_pay(sandbox):
    """Attack (alternating agents): on the NEAR grid (S one step closer, d = 5) the tool posts a
    blocked move while the plan agent walks *away* (L, to a cell at d = 6), so that the tool's
    next copy, the whole path from the far cell, is credited against a lower return, and the
    plan agent's next turn is paid the progress from the far cell.

    Turn 1: tool -0.1 < B = 0: credit 0; plan L: -0.01 - 1 = -1.01 (Φ -5 -> -6; the best
    potential stays -5). Turn 2: the tool's copy D D R R R U is worth -1.01 + 6.94 = 5.93 (7
    moves in all: no bonus): credit 5.93; the plan agent plays it: -0.06 + 1 - (-5) = 5.94
    (the step back to d = 5 is not paid). Tool 5.93 + (-1.01 + 5.94) = 10.86; plan
    2 x (-1.01 + 5.94) = 9.86. Solving at once: -0.05 + 5 + 1 + 0.5 = 6.45 a term, 12.90
    each, in one turn. No turn pays more: the plan agent's second turn 11.88 (with
    progress_reference="previous", the pure potential difference, it paid 2 x 6.94 = 13.88,
    more than solving at once pays in its turn, though less summed: 11.86).
    """
    replies = {"tool": [printing("U"), printing(SHORTEST)], "plan": ["#### L", "#### " + SHORTEST]}
    at_once = at_once_on(sandbox, NEAR)
    assert at_once == pytest.approx({"tool": 12.90, "plan": 12.90})
    env = plan_path(sandbox)
    attacked = play(env, by_turn(replies), options={"puzzle": NEAR})
    assert attacked == pytest.approx({"tool": 10.86, "plan": 9.86})
    assert rewards_of(env, "plan") == pytest.approx([-2.02, 11.88])
    assert rewards_of(env, "tool") == pytest.approx([-1.01, 5.93 + 5.94])
    for agent in attacked:
        assert attacked[agent] < at_once[agent]
        assert max(rewards_of(env, agent)) < at_once[agent]
    previous_env = plan_path(sandbox, progress_reference="previous")
    previous = play(previous_env, by_turn(replies), options={"puzzle": NEAR})
    assert previous == pytest.approx({"tool": 11.86, "plan": 11.86})
    assert rewards_of(previous_env, "plan") == pytest.approx([-2.02, 13.88])
    assert max(rewards_of(previous_env, "plan")) > at_once["plan"]


def test_puzzle_tool_candidates_scored_on_clones_share_no_best_value(sandbox):
    """Attack (clones): AT-GRPO scores each tool candidate on a clone of the same state. If the
    clones shared the best value B, the first candidate's solving copy would raise B for the
    others (and for the real episode), and candidates would be ranked by their order.

    Two clones of the start each score the shortest path at 7.44; the real episode, stepped
    afterwards, still pays it 7.44; a clone taken after that pays a re-post 0 (B = 7.44 there).
    """
    env = plan_path(sandbox)
    env.reset(options={"puzzle": HAND})
    scores = []
    for _ in range(2):
        clone = env.clone()
        clone.step(printing(SHORTEST))
        scores.append(clone.records[-1].reward)
    assert scores == pytest.approx([7.44, 7.44])
    env.step(printing(SHORTEST))
    assert env.records[-1].reward == pytest.approx(7.44)
    env.step("#### U")  # blocked: -0.1, the episode's return -0.1 (B stays 7.44)
    clone = env.clone()
    clone.step(printing(SHORTEST))  # from S after one move: 6.94 - 0.1 < 7.44
    assert clone.records[-1].reward == pytest.approx(0.0)


def test_puzzle_truncation_pays_a_never_solving_team_less_than_solving(sandbox):
    """Attack (truncation at max_turns = 2): both agents walk to the cell next to the goal and
    then bump into the grid's edge, never solving, hoping a partial level is paid at the end.

    Turn 1: D D R R R (5 moves: -0.05 + 5 = 4.95), the tool's copy of it 4.95; turn 2: R off
    the grid, blocked (-0.1), the tool's copy 4.85 < B: 0. Tool 4.95 + 4.85 = 9.80; plan
    2 x 4.85 = 9.70. Solving at once 14.88 each; single agent: 9.70 against 14.88.
    """
    replies = {
        "tool": [printing("D D R R R"), printing("R")],
        "plan": ["#### D D R R R", "#### R"],
        "solver": ["#### D D R R R", "#### R"],
    }
    attacked = play(plan_path(sandbox, max_turns=2), by_turn(replies), options={"puzzle": HAND})
    assert attacked == pytest.approx({"tool": 9.80, "plan": 9.70})
    single = play(
        plan_path(sandbox, max_turns=2, agents="single"), by_turn(replies), options={"puzzle": HAND}
    )
    assert single == pytest.approx({"solver": 9.70})
    assert max(attacked.values()) < 2 * AT_ONCE and single["solver"] < 2 * AT_ONCE


def test_puzzle_format_penalty_is_never_paid_back(sandbox):
    """Attack (format penalty then a change reward): both agents reply without a plan in turn
    1, then solve. The penalty is a local term, not a level: nothing pays it back.

    Tool -2 then 7.44 (B = 0 before) + the team's 7.44 (the episode: 6 moves, a shortest
    path): 12.88; plan -2 + 2 x 7.44 = 12.88, both 2 below solving at once (14.88). A plain
    wrong answer (a blocked U each turn for 4 turns): tool 0 + 4 x -0.1 = -0.4, plan -0.8; the
    malformed turn never earns more than the blocked move would (-2 < -0.1 and -0.2).
    """
    replies = {"tool": ["no code", printing(SHORTEST)], "plan": ["no plan", "#### " + SHORTEST]}
    attacked = play(plan_path(sandbox), by_turn(replies), options={"puzzle": HAND})
    assert attacked == pytest.approx({"tool": 12.88, "plan": 12.88})
    wrong = play(
        plan_path(sandbox), by_turn({"tool": [printing("U")], "plan": ["#### U"]}),
        options={"puzzle": HAND},
    )
    assert wrong == pytest.approx({"tool": -0.4, "plan": -0.8})
    assert all(attacked[agent] < 2 * AT_ONCE for agent in attacked)


@pytest.mark.parametrize("alpha", [0.0, 10.0])
def test_puzzle_stall_with_extreme_alpha_earns_no_more_than_solving(sandbox, alpha):
    """Attack (options: alpha = 0, alpha = 10): the tool posts the shortest path every turn and
    the plan agent plays the no-op detour D U for three turns, then the path.

    Tool: its first copy 7.44, then 0; team alpha x (3 x -0.02 + 6.94) = alpha x 6.88. Plan:
    (1 + alpha) x 6.88. Solving at once: 7.44 + alpha x 7.44 for the tool, (1 + alpha) x 7.44
    for the plan agent.
    """

    def stall(env, agent):
        if agent == "tool":
            return printing(" ".join(env.rules.solve(env.puzzle_state)))
        return "#### " + (SHORTEST if env.turn == 3 else "D U")

    at_once = at_once_on(sandbox, HAND, alpha=alpha)
    attacked = play(plan_path(sandbox, alpha=alpha), stall, options={"puzzle": HAND})
    assert attacked == pytest.approx({"tool": 7.44 + alpha * 6.88, "plan": (1 + alpha) * 6.88})
    assert at_once == pytest.approx({"tool": (1 + alpha) * 7.44, "plan": (1 + alpha) * 7.44})
    assert all(attacked[agent] <= at_once[agent] for agent in attacked)


def test_puzzle_tool_plan_is_read_from_the_programs_output_only(sandbox):
    """Attack (answer extraction): the tool's reply carries the solving plan as a ``####`` line
    outside its program and the program prints it first, then ``#### U`` last; the plan
    agent's reply has two ``####`` lines (a wrong one last).

    The tool's plan is the output's last ``####`` line, U: worth -0.1 < B = 0, credit 0. The
    plan agent's answer is its last ``####`` line, U: -0.1 twice. Only one plan is ever read,
    so listing several cannot hedge: the attack earns what the plain wrong answer U earns.
    """
    tool = "#### " + SHORTEST + "\n" + program(f"print('#### {SHORTEST}')\nprint('#### U')\n")
    replies = {"tool": [tool], "plan": [f"#### {SHORTEST}\n#### U"]}
    env = plan_path(sandbox, max_turns=1)
    attacked = play(env, by_turn(replies), options={"puzzle": HAND})
    assert attacked == pytest.approx({"tool": -0.1, "plan": -0.2})
    assert env.records[0].parsed["plan"] == "U"


def test_huge_and_unknown_plans_earn_no_more_than_a_plain_wrong_answer(sandbox):
    """Attack (huge plans, answer_format="list"): a reply over max_answer_chars (20,000), and
    a list of 2,000 unknown elements ``"X"``. The first is a format error (-2, team 0); the
    second is played as 2,000 blocked moves (-0.1 each: -200 a term). Neither beats the plain
    wrong answer U (-0.1 a term, -0.2 for the plan agent)."""
    huge = "#### " + " ".join(["D", "U"] * 5001)
    unknown = "#### [" + ", ".join(['"X"'] * 2000) + "]"
    results = {}
    for name, reply, options in [
        ("huge", huge, {}),
        ("unknown", unknown, {"answer_format": "list"}),
        ("wrong", '#### ["U"]', {"answer_format": "list"}),
    ]:
        env = PlanPathEnv(agents="single", max_turns=1, **options)
        results[name] = play(env, lambda e, a, r=reply: r, options={"puzzle": HAND})["solver"]
    assert results == pytest.approx({"huge": -2.0, "unknown": -400.0, "wrong": -0.2})
    assert max(results["huge"], results["unknown"]) < results["wrong"]


def test_sudoku_grid_changing_clues_is_rejected_every_turn_and_never_pays():
    """Attack (Sudoku grids that change clues): the solution with the clue 1 at (0,0) made 2,
    three turns, then the solution. A rejected grid costs -0.01 - 1.0 x 1/4 = -0.26 and leaves
    the board as it was; single agent: 3 x 2 x -0.26 + 2 x 2.49 = 3.42 against 4.98 at once.
    """
    env = SudokuEnv(agents="single")
    env.reset(options={"puzzle": SUDOKU})
    solution = env.puzzle_state.puzzle.solution
    solved_text = env.rules.format_plan(solution)
    forged = env.rules.format_plan((2,) + solution[1:])
    attacked = play(
        SudokuEnv(agents="single"),
        lambda e, a: "#### " + (solved_text if e.turn == 3 else forged),
        options={"puzzle": SUDOKU},
    )
    assert attacked == pytest.approx({"solver": 3 * 2 * -0.26 + 2 * 2.49})
    assert attacked["solver"] < 2 * 2.49


def test_sokoban_plans_off_the_board_or_into_walls_change_nothing():
    """Attack (Sokoban): the player walks into the border wall (L) 100 times, then pushes a box
    into the wall (R R R R R: onto the target, off it, into the wall, blocked twice). A room
    whose border is open (no walls) is bounded all the same.

    100 blocked moves: -5.0. R R R R R: onto (+1 + 0.1 - 0.01), off (-1 - 0.1 - 0.01), off
    further (-0.1 - 0.01), two blocked (-0.05 each): -0.23, and the box sits against the wall. The
    level solved at once: 12.15. Open room ``@$.`` (one row, no walls): L is blocked (-0.05).
    """
    state = sokoban_rules.from_text(SOKOBAN)
    rewards = SokobanRewards()
    bumps = sokoban_rules.apply_moves(state, ("L",) * 100, rewards)
    assert bumps.state == state and bumps.reward == pytest.approx(-5.0)
    pushed = sokoban_rules.apply_moves(state, ("R",) * 5, rewards)
    assert pushed.reward == pytest.approx(-0.23)
    assert (1, 5) in pushed.state.boxes and not pushed.solved
    solved = sokoban_rules.apply_moves(state, sokoban_rules.solve(state), rewards)
    assert solved.reward == pytest.approx(12.15)
    assert max(bumps.reward, pushed.reward) < solved.reward
    open_room = sokoban_rules.from_text("1 3\n@$.")
    edge = sokoban_rules.apply_moves(open_room, ("L", "U", "D"), rewards)
    assert edge.state == open_room and edge.reward == pytest.approx(-0.15)


# =================================================================== puzzles: weights (paid before)
def test_sokoban_positive_move_cost_is_refused_it_farmed_walking():
    """Attack (options, paid before): ``SokobanRewards(valid_move=0.05)`` was accepted; a plan
    walking D U 4,000 times (8,000 moves, no push) then earned 8,000 x 0.05 = 400 without
    solving, where solving earns 2 + 0.2 + 10 + 5 x 0.05 = 12.45. Now refused without
    ``allow_reward_holes``."""
    rewards = SokobanRewards(valid_move=0.05)
    state = sokoban_rules.from_text(SOKOBAN)
    walk = sokoban_rules.apply_moves(state, ("D", "U") * 4000, rewards)
    solved = sokoban_rules.apply_moves(state, sokoban_rules.solve(state), rewards)
    assert walk.reward == pytest.approx(400.0) and solved.reward == pytest.approx(12.45)
    assert walk.reward > solved.reward
    with pytest.raises(ValueError, match="valid_move=0.05 is positive"):
        SokobanEnv(rewards=rewards)
    for bad in (SokobanRewards(solved_reward=-10.0), SokobanRewards(format_penalty=1.0),
                SokobanRewards(shaping_scale=-0.1), SokobanRewards(box_on_target=-1.0)):
        with pytest.raises(ValueError, match="allow_reward_holes=True"):
            SokobanEnv(rewards=bad)
    SokobanEnv(rewards=rewards, allow_reward_holes=True)


def test_plan_path_negative_shaping_is_refused_it_paid_walking_away():
    """Attack (options, paid before): ``PathRewards(shaping_scale=-1)`` was accepted; solving at
    once then earned -0.06 - 6 + 1 + 0.5 = -4.56 and a plain wrong answer (U, blocked) -0.1.
    ``shaping_scale=0.005`` (below the move cost 0.01) was accepted too: on this grid solving
    earns -0.06 + 0.03 + 1.5 = 1.47, but on a 100-step path -1 + 0.5 + 1.5 = 1.0 and at 300
    steps -3 + 1.5 + 1.5 = 0 (a blocked move costs only 0.1): not moving earns more."""
    bad = PathRewards(shaping_scale=-1.0)
    start = path_rules.from_text(HAND)
    solved = path_rules.apply_moves(start, tuple(SHORTEST.split()), bad)
    wrong = path_rules.apply_moves(start, ("U",), bad)
    assert solved.reward == pytest.approx(-4.56) and wrong.reward == pytest.approx(-0.1)
    assert wrong.reward > solved.reward
    with pytest.raises(ValueError, match="shaping_scale=-1 is negative"):
        PlanPathEnv(rewards=bad)
    with pytest.raises(ValueError, match="shaping_scale \\+ valid_move must be >= 0"):
        PlanPathEnv(rewards=PathRewards(shaping_scale=0.005))
    for other in (PathRewards(goal_reward=-1.0), PathRewards(blocked_move=0.1),
                  PathRewards(optimal_bonus=-0.5), PathRewards(format_penalty=0.5)):
        with pytest.raises(ValueError, match="allow_reward_holes=True"):
            PlanPathEnv(rewards=other)
    PlanPathEnv(rewards=bad, allow_reward_holes=True)
    # Manhattan's potential is a potential too; its margin depends on the grid (docs).
    PlanPathEnv(rewards=PathRewards(potential_distance="manhattan"))


def test_sudoku_negative_clue_penalty_is_refused_it_paid_every_turn():
    """Attack (options, paid before): ``SudokuRewards(clue_penalty=-1)`` was accepted. A grid
    changing all 4 clues is rejected (the board stays) and was paid -0.01 + 1.0 = 0.99 every
    turn: three turns, then the solution, 2 x (3 x 0.99 + 2.49) = 10.92 against 4.98 at once.
    ``format_penalty=+1`` paid a malformed reply +1 a turn (local only): 3 + 4.98 = 7.98."""
    env = SudokuEnv(agents="single", rewards=SudokuRewards(clue_penalty=-1.0), allow_reward_holes=True)
    env.reset(options={"puzzle": SUDOKU})
    solution = env.puzzle_state.puzzle.solution
    solved_text = env.rules.format_plan(solution)
    clues = env.puzzle_state.puzzle.clue_cells
    forged = env.rules.format_plan(
        tuple(solution[i] % 4 + 1 if i in clues else solution[i] for i in range(16))
    )
    farmed = play(env, lambda e, a: "#### " + (solved_text if e.turn == 3 else forged),
                  options={"puzzle": SUDOKU})
    assert farmed == pytest.approx({"solver": 2 * (3 * 0.99 + 2.49)})
    assert farmed["solver"] > 2 * 2.49
    with pytest.raises(ValueError, match="clue_penalty=-1 is negative"):
        SudokuEnv(rewards=SudokuRewards(clue_penalty=-1.0))
    lenient = SudokuEnv(agents="single", rewards=SudokuRewards(format_penalty=1.0), allow_reward_holes=True)
    malformed = play(lenient, lambda e, a: "nothing" if e.turn < 3 else "#### " + solved_text,
                     options={"puzzle": SUDOKU})
    assert malformed == pytest.approx({"solver": 3 * 1.0 + 2 * 2.49})
    for bad in (SudokuRewards(format_penalty=1.0), SudokuRewards(step_cost=0.1),
                SudokuRewards(progress_weight=-0.5), SudokuRewards(conflict_penalty=-0.5),
                SudokuRewards(solved_reward=0.005)):
        with pytest.raises(ValueError, match="allow_reward_holes=True"):
            SudokuEnv(rewards=bad)


# =================================================================== Reasoner–Tool
def reasoner_tool(sandbox, **overrides) -> ReasonerToolEnv:
    return ReasonerToolEnv(task_source=ListSource([TWELVE]), sandbox=sandbox, **overrides)


def test_reasoner_toggling_right_and_wrong_pays_no_agent_twice(sandbox):
    """Attack (lose-then-regain, alternating agents): the reasoner answers right, wrong, right,
    wrong while the tool prints 7, so they never agree; each regain of the reasoner also raises
    the tool's team term, which could pay the tool for every re-raise.

    Reasoner levels 2.0, 0.2, 2.0, 0.2: paid 2.0, -1.8, 1.8, -1.8 = 0.2. Tool levels (team
    term = the reasoner's correctness, + 0.1 builds + 0.1 runs) 1.2, 0.2, 1.2, 0.2: paid 1.2,
    -1.0, 1.0, -1.0 = 0.2. Agreeing at once: 2.0 each; no turn pays more than 2.0. The paper's
    per-turn reward pays 4.4 and 2.8.
    """
    replies = {"reasoner": [RIGHT, WRONG, RIGHT, WRONG], "tool": [program("print(7)\n")]}
    env = reasoner_tool(sandbox)
    attacked = play(env, by_turn(replies))
    assert attacked == pytest.approx({"reasoner": 0.2, "tool": 0.2})
    assert rewards_of(env, "reasoner") == pytest.approx([2.0, -1.8, 1.8, -1.8])
    assert rewards_of(env, "tool") == pytest.approx([1.2, -1.0, 1.0, -1.0])
    assert max(max(rewards_of(env, a)) for a in attacked) <= 2.0
    farmed = play(reasoner_tool(sandbox, turn_rewards="paper", allow_reward_holes=True), by_turn(replies))
    assert farmed == pytest.approx({"reasoner": 4.4, "tool": 2.8})


def test_reasoner_tool_candidates_on_clones_share_no_reward_level(sandbox):
    """Attack (clones): candidates of one turn scored on clones of the same state must each be
    paid against the agent's level in that state, whatever the other clones did.

    After turn 1 (reasoner right: level 2.0), three clones: right (paid 0), wrong (0.2 - 2.0 =
    -1.8), right again (0): the middle clone's level never reaches the others or the original,
    whose own right answer is then paid 0 as well."""
    env = reasoner_tool(sandbox)
    env.reset(seed=0)
    env.step(RIGHT)
    env.step(program("print(7)\n"))
    scores = []
    for reply in (RIGHT, WRONG, RIGHT):
        clone = env.clone()
        clone.step(reply)
        scores.append(clone.records[-1].reward)
    assert scores == pytest.approx([0.0, -1.8, 0.0])
    env.step(RIGHT)
    assert env.records[-1].reward == pytest.approx(0.0)


def test_reasoner_tool_truncation_pays_no_never_agreeing_agent_more(sandbox):
    """Attack (truncation): the tool prints the right answer every turn, the reasoner never
    boxes it (\\boxed{11}), so the episode runs to max_turns = 4. Tool level 0 + 0.1 + 0.1 +
    0.8 = 1.0, paid once; reasoner 0.2 once. Single agent (one turn): a wrong answer 0.2,
    right 2.0."""
    env = reasoner_tool(sandbox)
    attacked = play(env, by_turn({"reasoner": [WRONG], "tool": [program("print(12)\n")]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert attacked == pytest.approx({"reasoner": 0.2, "tool": 1.0})
    single = ReasonerToolEnv(task_source=ListSource([TWELVE]), agents="single")
    assert play(single, lambda e, a: WRONG) == pytest.approx({"reasoner": 0.2})
    assert play(single, lambda e, a: RIGHT) == pytest.approx({"reasoner": 2.0})


@pytest.mark.parametrize(
    ("reasoner", "tool_output"),
    [
        ("\\boxed{12} or rather \\boxed{11}", "7\\n12\\n7"),  # several answers: the last counts
        ("\\boxed{11, 12}", "[11, 12]"),  # a hedge listing both
        ("\\boxed{11 \\text{ or } 12}", "11 or 12"),
        ("\\boxed{}", "#### 7"),  # an empty box; a #### line with a wrong number
    ],
    ids=["several", "list", "or", "empty"],
)
def test_reasoner_tool_answer_tricks_earn_no_more_than_a_plain_wrong_answer(sandbox, reasoner, tool_output):
    """Attack (answer extraction): several ``\\boxed{}`` (a right one first), hedges listing the
    right answer among others, an empty box; the tool printing several numbers, a list, or a
    ``####`` line. Each is read as one answer and checked: the reasoner earns at most 0.2 (a
    boxed wrong answer; 0 without a box), the tool 0.2 (builds + runs), as the plain wrong
    answers \\boxed{11} and print(7) do (one turn, so the level is paid as is)."""
    env = reasoner_tool(sandbox, max_turns=1)
    attacked = play(env, by_turn({"reasoner": [reasoner], "tool": [program(f'print("{tool_output}")\n')]}))
    plain = play(reasoner_tool(sandbox, max_turns=1), by_turn({"reasoner": [WRONG], "tool": [program("print(7)\n")]}))
    assert plain == pytest.approx({"reasoner": 0.2, "tool": 0.2})
    assert attacked["reasoner"] <= plain["reasoner"] and attacked["tool"] <= plain["tool"]


def test_reasoner_tool_negative_weights_are_refused_they_paid_wrong_answers(sandbox):
    """Attack (options, paid before): ``alpha=-1`` and ``ToolWeights(correct=-1)`` were
    accepted. With alpha = -1 a right reasoner's level is -1 + 0.2 + 0.8 = 0 and a wrong boxed
    one 0.2; with the tool's correct weight -1 a tool printing 12 (reasoner right) has level
    1 + 0.1 + 0.1 - 1 = 0.2 and one printing 7 has 1.2. Now alpha < 0 is an error and a
    negative weight needs ``allow_reward_holes``."""
    source = ListSource([TWELVE])
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        ReasonerToolEnv(task_source=source, alpha=-1.0)
    weights = reasoner_rules.ToolWeights(correct=-1.0)
    with pytest.raises(ValueError, match="ToolWeights.correct=-1 is negative"):
        ReasonerToolEnv(task_source=source, tool_weights=weights)
    with pytest.raises(ValueError, match="allow_reward_holes=True"):
        ReasonerToolEnv(task_source=source, reasoner_weights=reasoner_rules.ReasonerWeights(format=-0.2))
    totals = {}
    for name, body in {"right": "print(12)\n", "wrong": "print(7)\n"}.items():
        env = reasoner_tool(sandbox, max_turns=1, tool_weights=weights, allow_reward_holes=True)
        totals[name] = play(env, by_turn({"reasoner": [RIGHT], "tool": [program(body)]}))["tool"]
    assert totals == pytest.approx({"right": 0.2, "wrong": 1.2})


# =================================================================== Coder–Tester
def coder_tester(sandbox, **overrides) -> CoderTesterEnv:
    return CoderTesterEnv(task_source=ListSource([ADD]), sandbox=sandbox, **overrides)


def test_coder_toggling_its_code_pays_the_tester_no_team_term_twice(sandbox):
    """Attack (alternating agents): the tester keeps one wrong test so they never agree; the
    coder alternates the golden code and ``return 0`` (2 of 4 golden tests), lowering the team
    term so that each return to the golden code raises it again.

    Tester (paper tester reward: 0.2 + 0.8 x 4/5 = 0.84): levels 1.84, 1.34, 1.84, 1.34, paid
    1.84, -0.5, 0.5, -0.5 = 1.34. Coder: golden level 2.0, ``return 0`` 0.5 + 0.1 + 0.1 +
    0.8 x 0.5 = 1.1: paid 2.0, -0.9, 0.9, -0.9 = 1.1. Solving at once with the golden tests:
    2.0 each. The paper's per-turn reward pays 2 x 2.0 + 2 x 1.1 = 6.2 and
    2 x 1.84 + 2 x 1.34 = 6.36.
    """

    def toggle(env, agent):
        if agent == "coder":
            return GOLDEN if env.turn % 2 == 0 else ZERO
        return STALLING_TESTS

    env = coder_tester(sandbox, tester_reward="paper")
    attacked = play(env, toggle)
    assert rewards_of(env, "tester") == pytest.approx([1.84, -0.5, 0.5, -0.5])
    assert rewards_of(env, "coder") == pytest.approx([2.0, -0.9, 0.9, -0.9])
    assert attacked == pytest.approx({"coder": 1.1, "tester": 1.34})
    solved = play(coder_tester(sandbox, tester_reward="paper"), by_turn({"coder": [GOLDEN], "tester": [GOLDEN_TESTS]}))
    assert solved == pytest.approx({"coder": 2.0, "tester": 2.0})
    assert all(attacked[a] < solved[a] for a in attacked)
    farmed = play(coder_tester(sandbox, tester_reward="paper", turn_rewards="paper", allow_reward_holes=True), toggle)
    assert farmed == pytest.approx({"coder": 6.2, "tester": 6.36})
    assert farmed["coder"] > solved["coder"]


@pytest.mark.parametrize(
    ("tests", "expected"),
    [
        (unit_tests("assert True"), 1.2),  # passes everything: agreement, catches nothing
        (unit_tests("assert add(1, 2) == 4"), 1.2),  # fails everything: golden fails it too
    ],
    ids=["always-pass", "always-fail"],
)
def test_tests_that_always_pass_or_always_fail_earn_less_than_golden_tests(sandbox, tests, expected):
    """Attack (CoderTester tests that always pass / always fail, catch reward): with the golden
    code, ``assert True`` makes them agree at once (tester 1 + 0.2 + 0.8 x 1 x catch rate 0 =
    1.2); ``assert add(1, 2) == 4`` fails the golden too (0.2 + 0.8 x 0) and stalls to
    max_turns = 2, paid once: 1.2. The golden tests catch every wrong program: 2.0."""
    env = coder_tester(sandbox, max_turns=2)
    attacked = play(env, by_turn({"coder": [GOLDEN], "tester": [tests]}))
    assert attacked["tester"] == pytest.approx(expected)
    assert attacked["coder"] == pytest.approx(2.0)
    solved = play(coder_tester(sandbox, max_turns=2), by_turn({"coder": [GOLDEN], "tester": [GOLDEN_TESTS]}))
    assert solved == pytest.approx({"coder": 2.0, "tester": 2.0})
    assert attacked["tester"] < solved["tester"]


def test_coder_tester_collusion_under_change_rewards_pays_no_more_than_solving(sandbox):
    """Attack (collusion): the coder submits ``return 0`` in turn 1 (a failing attempt the
    tester's reward counts as a wrong program), the tester's tests in turn 1 stall, then the
    coder submits the golden code and the tester the golden tests. Each return is the level
    of the agent's last action: coder 2.0, tester 1 + 0.2 + 0.8 x 1 x 1 = 2.0, what solving at
    once earns; no turn pays either more than 2.0."""
    replies = {"coder": [ZERO, GOLDEN], "tester": [STALLING_TESTS, GOLDEN_TESTS]}
    env = coder_tester(sandbox)
    attacked = play(env, by_turn(replies))
    assert env.episode_metrics()["turns"] == 2.0
    assert attacked == pytest.approx({"coder": 2.0, "tester": 2.0})
    assert max(max(rewards_of(env, a)) for a in attacked) <= 2.0


def test_coder_tester_negative_weights_are_refused_they_paid_failing_code(sandbox):
    """Attack (options, paid before): ``alpha=-1`` and ``CoderWeights(golden=-2)`` were
    accepted. With golden = -2 the golden code's level is 1 + 0.1 + 0.1 - 2 = -0.8 and
    ``return 0``'s (2 of 4 golden tests) 0.5 + 0.1 + 0.1 - 2 x 0.5 = -0.3: failing code earns
    more (single agent, level = alpha x pass rate + local). Now refused."""
    source = ListSource([ADD])
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        CoderTesterEnv(task_source=source, alpha=-1.0)
    weights = coder_rules.CoderWeights(golden=-2.0)
    with pytest.raises(ValueError, match="CoderWeights.golden=-2 is negative"):
        CoderTesterEnv(task_source=source, coder_weights=weights)
    with pytest.raises(ValueError, match="allow_reward_holes=True"):
        CoderTesterEnv(task_source=source, tester_weights=coder_rules.TesterWeights(valid=-0.2))
    totals = {}
    for name, code in {"golden": GOLDEN, "zero": ZERO}.items():
        env = coder_tester(sandbox, agents="single", coder_weights=weights, allow_reward_holes=True)
        totals[name] = play(env, lambda e, a, c=code: c)["coder"]
    assert totals == pytest.approx({"golden": -0.8, "zero": -0.3})
