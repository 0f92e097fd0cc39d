"""The puzzles' rewards pay the task (issue 30) and the release's behaviour where we follow it
(issue 31): potential differences, a finished task paid once, and every attack below earning
no more than solving at once, per agent and summed over the episode.

Hand-computed values use the Plan-Path grid of test_plan_path_rules.py (d(S) = 6):

    S.#.
    ..#G        the shortest path D D R R R U earns -0.06 + 6 + 1 + 0.5 = 7.44
    ....

and the two-box Sokoban room SHUTTLE_LEVEL, where the box at (1,2) can be pushed on and off
the target (1,3) in a loop of 12 moves while the box at (3,2) stays off its target (3,1).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import sandboxes
from llm_envs.envs.plan_path import rules as path_rules
from llm_envs.envs.plan_path.env import PlanPathEnv
from llm_envs.envs.plan_path.rules import PathRewards
from llm_envs.envs.sokoban import rules as sokoban_rules
from llm_envs.envs.sokoban.env import SokobanEnv
from llm_envs.envs.sokoban.rules import SokobanRewards
from llm_envs.envs.sudoku import rules as sudoku_rules
from llm_envs.envs.sudoku.env import SudokuEnv
from tests.envs.helpers import play

HAND = "3 4\nS.#.\n..#G\n...."
SHORTEST = ("D", "D", "R", "R", "R", "U")
AT_ONCE = 7.44  # -0.06 + 6 + 1 + 0.5

SHUTTLE_LEVEL = "6 7\n#######\n#@$.__#\n#_____#\n#.$___#\n#_____#\n#######"
# R pushes the box onto the target, R pushes it off; round through row 2; L onto, L off; back.
SHUTTLE_CYCLE = ("R", "R", "D", "R", "R", "U", "L", "L", "D", "L", "L", "U")
SHUTTLE_CYCLES = 800  # 9,600 moves: the answer line stays under max_answer_chars (20,000)

SUDOKU = "4\n1 0 0 4\n0 0 0 0\n0 0 0 0\n0 3 2 0"  # 4 clues, 12 empty cells


@pytest.fixture(scope="module")
def sandbox():
    return sandboxes.shared_sandbox("auto")


def printing(answer: str) -> str:
    return f"```python\nprint({('#### ' + answer)!r})\n```"


def moves_text(moves) -> str:
    return " ".join(moves)


def paper(cls, **options):
    """The environment with the paper's per-turn rewards (a reward hole, asked for)."""
    return cls(reward_shaping="paper", allow_reward_holes=True, **options)


# ------------------------------------------------------------------------ rules: potentials
def test_the_shuttle_plan_farms_the_paper_weights_and_pays_only_its_costs_with_potentials():
    state = sokoban_rules.from_text(SHUTTLE_LEVEL)
    shuttle = SHUTTLE_CYCLE * SHUTTLE_CYCLES
    rewards = SokobanRewards()
    # The paper's weights: each cycle pushes onto the target twice (+1 each) and off twice
    # (-0.5 each) for 12 moves (-0.12): 800 * (2 - 1 - 0.12) = 704, and the level is unsolved.
    farmed = sokoban_rules.apply_moves(state, shuttle, rewards, "paper")
    assert not farmed.solved and farmed.reward == pytest.approx(704.0)
    # Potential differences: the box term nets 0 a cycle, so only the costs remain.
    held = sokoban_rules.apply_moves(state, shuttle, rewards)
    assert held.components["box_on_target"] + held.components["box_off_target"] == 0.0
    assert held.reward == pytest.approx(-0.01 * 12 * SHUTTLE_CYCLES)
    # Solving: R (box onto (1,3)), then D R D L (the second box onto (3,1)): 2 boxes placed,
    # distances 1 + 1 -> 0 (0.1 each), +10 solved, 5 moves.
    solution = sokoban_rules.solve(state)
    assert len(solution) == 5
    solved = sokoban_rules.apply_moves(state, solution, rewards)
    assert solved.reward == pytest.approx(2 + 0.2 + 10 - 0.05)
    # A plain wrong answer: one move into the wall.
    wrong = sokoban_rules.apply_moves(state, ("U",), rewards)
    assert wrong.reward == pytest.approx(-0.05)
    assert held.reward <= wrong.reward < solved.reward < farmed.reward


def test_a_cycle_of_states_pays_only_its_move_costs():
    # Plan-Path: D U R L leaves the agent on S.
    start = path_rules.from_text(HAND)
    loop = path_rules.apply_moves(start, ("D", "U", "R", "L"), PathRewards())
    assert loop.state == start and loop.reward == pytest.approx(-0.04)
    # Sokoban: one shuttle cycle.
    state = sokoban_rules.from_text(SHUTTLE_LEVEL)
    cycle = sokoban_rules.apply_moves(state, SHUTTLE_CYCLE, SokobanRewards())
    assert cycle.state == state and cycle.reward == pytest.approx(-0.12)
    # Sudoku: a near miss, then back to the clues: two step costs.
    puzzle = sudoku_rules.SudokuRules().load(SUDOKU)
    solution = puzzle.puzzle.solution
    near = sudoku_rules.apply_grid(puzzle, (solution[0], 0) + solution[2:], sudoku_rules.SudokuRewards())
    back = sudoku_rules.apply_grid(near.state, puzzle.puzzle.clues, sudoku_rules.SudokuRewards())
    assert back.state == puzzle and near.reward + back.reward == pytest.approx(-0.02)


def random_states_and_plans(rules, seed, count=8, plans_each=12):
    """Solvable states reached by random plans from generated puzzles, with random plans to play
    there (a random Sokoban walk can push a box into a dead corner: such states are left out)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        state = rules.generate(rng, "train")
        walk = rules.apply_plan(state, rules.random_plan(state, rng)).state
        for origin in (state, walk):
            if not rules.is_solved(origin) and rules.solve(origin) is not None:
                yield origin, [rules.random_plan(origin, rng) for _ in range(plans_each)]


@pytest.mark.parametrize(
    ("rules", "costs"),
    [
        (path_rules.PlanPathRules(), ("moves", "optimal")),
        (sokoban_rules.SokobanRules(), ("moves",)),
        (sudoku_rules.SudokuRules(), ("step", "clues")),
    ],
    ids=["plan_path", "sokoban", "sudoku"],
)
def test_every_dense_reward_is_its_costs_plus_a_change_of_potential(rules, costs):
    for state, plans in random_states_and_plans(rules, seed=3):
        for plan in plans + [rules.solve(state)]:
            outcome = rules.apply_plan(state, plan)
            rest = outcome.reward - sum(outcome.components.get(name, 0.0) for name in costs)
            assert rest == pytest.approx(rules.potential(outcome.state) - rules.potential(state))


@pytest.mark.parametrize(
    "rules",
    [path_rules.PlanPathRules(), sokoban_rules.SokobanRules(), sudoku_rules.SudokuRules()],
    ids=["plan_path", "sokoban", "sudoku"],
)
def test_solving_now_earns_more_than_any_other_plan_from_the_same_state(rules):
    for state, plans in random_states_and_plans(rules, seed=5):
        best = rules.apply_plan(state, rules.solve(state))
        assert best.solved
        for plan in plans:
            outcome = rules.apply_plan(state, plan)
            assert outcome.reward <= best.reward + 1e-9


# ------------------------------------------------------------------------ episodes: attacks
def test_a_solving_tool_plan_reposted_every_turn_and_never_played_is_paid_once(sandbox):
    def stall(env, agent):
        if agent == "tool":
            return printing(moves_text(SHORTEST))
        return "#### " + moves_text(SHORTEST) if env.turn == 3 else "I am still thinking."

    def at_once(env, agent):
        return printing(moves_text(SHORTEST)) if agent == "tool" else "#### " + moves_text(SHORTEST)

    solved_at_once = play(PlanPathEnv(sandbox=sandbox), at_once, options={"puzzle": HAND})
    assert solved_at_once == pytest.approx({"tool": 2 * AT_ONCE, "plan": 2 * AT_ONCE})
    # Tool: 7.44 for the first copy, 0 for the three re-posts, then the team's 7.44. Plan: three
    # format penalties (local only), then 7.44 + 7.44.
    stalled = play(PlanPathEnv(sandbox=sandbox), stall, options={"puzzle": HAND})
    assert stalled == pytest.approx({"tool": 2 * AT_ONCE, "plan": 3 * -2.0 + 2 * AT_ONCE})
    # The paper's per-turn reward pays the copy four times: 4 * 7.44 + 7.44.
    farmed = play(paper(PlanPathEnv, sandbox=sandbox), stall, options={"puzzle": HAND})
    assert farmed["tool"] == pytest.approx(5 * AT_ONCE)
    assert farmed["tool"] > solved_at_once["tool"]


def test_two_agents_walking_one_step_a_turn_earn_what_solving_at_once_earns(sandbox):
    def walk(env, agent):
        rest = env.rules.solve(env.puzzle_state)
        if agent == "tool":
            return printing(moves_text(rest))  # the full solution from here, every turn
        return "#### " + (rest[0] if env.turn < 3 else moves_text(rest))

    # Turns 1-3: the plan agent plays D, D, R (0.99 each); turn 4: R R U (3 - 0.03 + 1 + 0.5,
    # the whole episode a shortest path): 3 * 0.99 + 4.47 = 7.44. The tool's copies from the
    # later states add nothing to the best value 7.44 its first copy reached.
    walked = play(PlanPathEnv(sandbox=sandbox), walk, options={"puzzle": HAND})
    assert walked == pytest.approx({"tool": 2 * AT_ONCE, "plan": 2 * AT_ONCE})
    # Paper: the tool is paid 7.44 + 6.45 + 5.46 + 4.47 for its copies, then the team's 7.44.
    farmed = play(paper(PlanPathEnv, sandbox=sandbox), walk, options={"puzzle": HAND})
    assert farmed == pytest.approx({"tool": 23.82 + AT_ONCE, "plan": 2 * AT_ONCE})


def test_the_two_agent_stall_of_issue_30_earns_less_than_solving_at_once(sandbox):
    """The tool posts the shortest path every turn; the plan agent plays a no-op detour (D U)
    for three turns, then the shortest path. On a grid with d(S) = 9 the former rewards paid
    the two agents 72.7 against 41.6 for solving at once; here on d(S) = 6."""

    def stall(env, agent):
        if agent == "tool":
            return printing(moves_text(env.rules.solve(env.puzzle_state)))
        return "#### " + (moves_text(SHORTEST) if env.turn == 3 else "D U")

    # Potential: the tool's first copy 7.44, then nothing (8 moves would be played: no bonus,
    # 6.94 - 0.02 below the best 7.44); team 3 * -0.02 + 6.94 (no bonus after the detours).
    held = play(PlanPathEnv(sandbox=sandbox), stall, options={"puzzle": HAND})
    assert held == pytest.approx({"tool": 7.44 + 6.88, "plan": 2 * 6.88})
    assert all(total < 2 * AT_ONCE for total in held.values())
    # The former rewards (paper shaping, bonus per plan): the copy 4 * 7.44, the team 3 * -0.02
    # + 7.44: 37.14 and 14.76, 51.9 together against 29.76.
    former = paper(PlanPathEnv, sandbox=sandbox, rewards=PathRewards(optimal_bonus_scope="plan"))
    farmed = play(former, stall, options={"puzzle": HAND})
    assert farmed == pytest.approx({"tool": 4 * 7.44 + 7.38, "plan": 2 * 7.38})
    assert sum(farmed.values()) > 2 * 2 * AT_ONCE


def test_a_near_miss_held_for_three_turns_then_solved_earns_less_than_solving_at_once():
    env = SudokuEnv(agents="single")
    env.reset(options={"puzzle": SUDOKU})
    solution = env.rules.format_plan(env.rules.solve(env.puzzle_state))
    near_miss = env.rules.format_plan((env.puzzle_state.puzzle.solution[0], 0) + env.puzzle_state.puzzle.solution[2:])

    def near_then_solve(env, agent):
        return "#### " + (near_miss if env.turn < 3 else solution)

    at_once = play(SudokuEnv(agents="single"), lambda e, a: "#### " + solution, options={"puzzle": SUDOKU})
    assert at_once == pytest.approx({"solver": 2 * 2.49})
    # 11 of 12 cells: -0.01 + 0.5 * 11/12; twice the same board: -0.01 each; then the last
    # cell and the solved reward: -0.01 + 0.5/12 + 2. Local and team alike.
    held = play(SudokuEnv(agents="single"), near_then_solve, options={"puzzle": SUDOKU})
    assert held == pytest.approx({"solver": 2 * (2.5 - 0.04)})
    # Paper: the share of correct cells is paid again every turn: 3 * 2 * 0.448333 + 4.98.
    farmed = play(paper(SudokuEnv, agents="single"), near_then_solve, options={"puzzle": SUDOKU})
    assert farmed["solver"] == pytest.approx(3 * 2 * (0.5 * 11 / 12 - 0.01) + 2 * 2.49)
    assert held["solver"] < at_once["solver"] < farmed["solver"]


def test_sudoku_cells_lost_then_put_back_are_not_paid_again_in_any_turn():
    """Single solver: 11 of 12 cells right (the 12th blank), then 10 (two blank), then the
    solution. Ψ: clues 0, 11/12 right 0.458333, 10/12 right 0.416667; the best Ψ reached B.

    Turn 1: -0.01 + 0.458333 = 0.448333 (B = 0.458333). Turn 2: -0.01 + 0.416667 - 0.458333 =
    -0.051667. Turn 3: -0.01 + 2.5 - B = 2.031667 (the cell put back is not paid again). Local
    and team alike: 2 x 2.428333 = 4.856667; no turn above 2 x 2.031667 = 4.063333. Solving at
    once: 2 x 2.49 = 4.98 in one turn. progress_reference="previous" pays turn 3 the regained
    cell again: 2 x (-0.01 + 2.5 - 0.416667) = 4.146667, 4.94 summed.
    """
    env = SudokuEnv(agents="single")
    env.reset(options={"puzzle": SUDOKU})
    solution = env.puzzle_state.puzzle.solution
    empty = [i for i, clue in enumerate(env.puzzle_state.puzzle.clues) if not clue]
    eleven = tuple(0 if i == empty[-1] else v for i, v in enumerate(solution))
    ten = tuple(0 if i in empty[-2:] else v for i, v in enumerate(solution))
    answers = [eleven, ten, solution]

    def lose_then_regain(env, agent):
        return "#### " + env.rules.format_plan(answers[env.turn])

    at_once = play(SudokuEnv(agents="single"), lambda e, a: "#### " + e.rules.format_plan(solution), options={"puzzle": SUDOKU})
    assert at_once == pytest.approx({"solver": 4.98})
    attacked_env = SudokuEnv(agents="single")
    attacked = play(attacked_env, lose_then_regain, options={"puzzle": SUDOKU})
    turns = [record.reward for record in attacked_env.records]
    assert turns == pytest.approx([2 * 0.448333, 2 * -0.051667, 2 * 2.031667], abs=1e-5)
    assert attacked["solver"] == pytest.approx(4.856667, abs=1e-5)
    assert max(turns) < at_once["solver"] and attacked["solver"] < at_once["solver"]
    previous_env = SudokuEnv(agents="single", progress_reference="previous")
    previous = play(previous_env, lose_then_regain, options={"puzzle": SUDOKU})
    assert previous_env.records[-1].reward == pytest.approx(2 * (2.49 - 0.416667), abs=1e-5)
    assert previous["solver"] == pytest.approx(4.94)


#: One box, one target, the player two cells from the box: a shortest solution is ``R R``.
WALK_LEVEL = "3 6\n######\n#@_$.#\n######"


def test_sokoban_a_solution_split_over_two_turns_pays_its_last_turn_its_walk_more():
    """The one case where a turn pays more than solving at once (documented on
    docs/envs/puzzles.md): a walk that no potential measures. Single solver, ``R`` (the player
    walks, Ψ unchanged: -0.01), then ``R`` (the push: -0.01 + 1 + 0.1 + 10 = 11.09). Solving at
    once ``R R``: -0.02 + 11.1 = 11.08. Summed, the split earns what solving at once earns
    (2 x 11.08); its last turn 2 x 0.01 more. Any rule that pays the split solution its whole
    value must pay its last turn that much: the first turn's cost was already paid.
    """
    at_once = play(SokobanEnv(agents="single"), lambda e, a: "#### R R", options={"puzzle": WALK_LEVEL})
    assert at_once == pytest.approx({"solver": 2 * 11.08})
    env = SokobanEnv(agents="single")
    split = play(env, lambda e, a: "#### R", options={"puzzle": WALK_LEVEL})
    assert [record.reward for record in env.records] == pytest.approx([2 * -0.01, 2 * 11.09])
    assert split == pytest.approx(at_once)


def test_sokoban_weights_under_which_solving_costs_more_than_it_gains_are_refused():
    """Solving WALK_LEVEL takes 2 moves; with valid_move = -6 they cost 12 > 11.1 = 10 + 1 +
    0.1, the least by which an unsolved state's potential lies below the solved one: not moving
    would earn more than solving. The room has 4 open cells and one box: no shortest solution
    is longer than 4 x C(3, 1) = 12 moves, so the default -0.01 is accepted without a search."""
    assert sokoban_rules.max_shortest_solution(4, 1) == 12
    level = sokoban_rules.from_text(WALK_LEVEL)
    assert sokoban_rules.solving_pays_most(level, SokobanRewards())
    assert sokoban_rules.solving_pays_most(level, SokobanRewards(valid_move=-5.5))  # 11 <= 11.1
    assert not sokoban_rules.solving_pays_most(level, SokobanRewards(valid_move=-6.0))
    env = SokobanEnv(rewards=SokobanRewards(valid_move=-6.0))
    with pytest.raises(ValueError, match="costs more than solving gains"):
        env.reset(options={"puzzle": WALK_LEVEL})


def test_the_shuttle_plan_earns_no_more_than_a_plain_wrong_answer(sandbox):
    shuttle = moves_text(SHUTTLE_CYCLE * SHUTTLE_CYCLES)

    def shuttling(env, agent):
        return printing(shuttle) if agent == "tool" else "#### " + shuttle

    def wrong(env, agent):  # one move into the wall
        return printing("U") if agent == "tool" else "#### U"

    options = {"puzzle": SHUTTLE_LEVEL}
    size = {"rows": 6, "cols": 7, "num_boxes": 2}  # the level's
    farmed = play(paper(SokobanEnv, sandbox=sandbox, max_turns=1, **size), shuttling, options=options)
    assert farmed == pytest.approx({"tool": 2 * 704.0, "plan": 2 * 704.0})
    held = play(SokobanEnv(sandbox=sandbox, max_turns=1, **size), shuttling, options=options)
    plain = play(SokobanEnv(sandbox=sandbox, max_turns=1, **size), wrong, options=options)
    # The tool's copy is worth less than the start: no credit; the team pays the costs.
    assert held == pytest.approx({"tool": -96.0, "plan": -192.0})
    assert plain == pytest.approx({"tool": -0.05, "plan": -0.1})
    assert all(held[agent] <= plain[agent] for agent in held)


def test_outcome_mode_pays_the_tools_solving_copy_once(sandbox):
    def stall(env, agent):
        return printing(moves_text(SHORTEST)) if agent == "tool" else "no answer"

    held = play(PlanPathEnv(sandbox=sandbox, reward_mode="outcome"), stall, options={"puzzle": HAND})
    assert held == pytest.approx({"tool": 1.0, "plan": 0.0})
    farmed = play(
        paper(PlanPathEnv, sandbox=sandbox, reward_mode="outcome"), stall, options={"puzzle": HAND}
    )
    assert farmed == pytest.approx({"tool": 4.0, "plan": 0.0})


# ------------------------------------------------------------------------ options that open holes
@pytest.mark.parametrize(
    ("cls", "options", "reason"),
    [
        (PlanPathEnv, {"reward_shaping": "paper"}, "never played earns it each time"),
        (SudokuEnv, {"reward_shaping": "paper"}, "near miss held for several turns"),
        (SokobanEnv, {"reward_shaping": "paper"}, "a shuttle plan farms it"),
        (SokobanEnv, {"rewards": SokobanRewards(box_off_target=-0.5)}, "a shuttle plan farms it"),
        (SokobanEnv, {"rewards": SokobanRewards(shaping_gamma=0.99)}, "bumping into walls"),
        (PlanPathEnv, {"rewards": PathRewards(shaping_gamma=0.99)}, "bumping into walls"),
    ],
)
def test_options_that_open_a_reward_hole_are_refused_unless_asked_for(cls, options, reason):
    with pytest.raises(ValueError, match=re.escape(reason)) as caught:
        cls(**options)
    assert "allow_reward_holes=True" in str(caught.value)
    env = cls(allow_reward_holes=True, **options)
    assert env.config.reward_holes()


@pytest.mark.parametrize(
    "options",
    [{"reward_shaping": "shaped"}, {"answer_format": "json"}, {"alpha": -1.0}],
)
def test_bad_reward_options_are_rejected(options):
    with pytest.raises(ValueError, match=next(iter(options))):
        PlanPathEnv(**options)


def test_symmetric_box_weights_are_no_hole():
    env = SokobanEnv(rewards=SokobanRewards(box_on_target=2.0, box_off_target=-2.0))
    assert env.config.reward_holes() == []


# ------------------------------------------------------------------------ the release's behaviour
def test_an_unknown_element_of_a_list_is_played_as_a_blocked_move(sandbox):
    env = PlanPathEnv(sandbox=sandbox)
    env.reset(options={"puzzle": HAND})
    env.step(printing("[]"))
    env.step('#### ["D", "X", "D", "R", "R", "R", "U"]')
    plan = env.records[1]
    # D, X (-0.1, the agent stays), then the rest of the shortest path: 7 moves played for a
    # distance of 6, so no optimal-path bonus: -0.06 - 0.1 + 6 + 1.
    assert plan.reward_components == pytest.approx({"local": 6.84, "team": 6.84})
    assert env.episode_metrics()["success"] == 1.0
    # Unbracketed text is ours (lenient): a token that is not a move rejects the answer.
    env.reset(options={"puzzle": HAND})
    env.step(printing("D X D"))
    env.step("#### D X D")
    assert [r.reward_components["local"] for r in env.records] == [-2.0, -2.0]


def test_a_reply_without_a_valid_plan_costs_only_a_local_penalty(sandbox):
    env = PlanPathEnv(sandbox=sandbox)
    env.reset(options={"puzzle": HAND})
    env.step(printing(moves_text(SHORTEST)))
    env.step("I cannot decide.")
    assert env.records[1].reward_components == pytest.approx({"local": -2.0, "team": 0.0})
    assert env.records[0].reward_components == pytest.approx({"local": AT_ONCE, "team": 0.0})


def test_the_released_list_format_rejects_unbracketed_answers(sandbox):
    env = PlanPathEnv(sandbox=sandbox, answer_format="list")
    env.reset(options={"puzzle": HAND})
    assert '#### ["U", "R", "R", "D"]' in env.observe("plan")["prompt"]
    env.step(printing(moves_text(SHORTEST)))  # the program's unbracketed line: no plan
    env.step("#### D D R R R U")
    assert [r.reward_components["local"] for r in env.records] == [-2.0, -2.0]
    assert env.records[1].reward_components["team"] == 0.0
    env.step(env.reference_action("tool"))  # the reference program prints a list
    env.step('#### ["D", "D", "R", "R", "R", "U"]')
    assert env.records[3].reward_components == pytest.approx({"local": AT_ONCE, "team": AT_ONCE})
    assert env.action_catalog()[0] == '#### ["U"]'
    # Lenient (default): the unbracketed line is a plan.
    lenient = PlanPathEnv(sandbox=sandbox)
    lenient.reset(options={"puzzle": HAND})
    lenient.step(printing(moves_text(SHORTEST)))
    lenient.step("#### D D R R R U")
    assert lenient.records[1].reward_components == pytest.approx({"local": AT_ONCE, "team": AT_ONCE})


def test_sudoku_rows_of_digits_are_a_format_error_in_the_released_list_format():
    rules = sudoku_rules.SudokuRules(answer_format="list")
    state = rules.load(SUDOKU)
    rows = " ".join("".join(map(str, state.puzzle.solution[r * 4 : r * 4 + 4])) for r in range(4))
    with pytest.raises(sudoku_rules.PlanFormatError, match="list of 4 rows"):
        rules.parse_plan(state, rows)
    assert sudoku_rules.SudokuRules().parse_plan(state, rows) == state.puzzle.solution
    nested = rules.format_plan(state.puzzle.solution)
    assert rules.parse_plan(state, nested) == state.puzzle.solution
    env = SudokuEnv(agents="single", answer_format="list")
    env.reset(options={"puzzle": SUDOKU})
    env.step("#### " + rows)
    assert env.records[0].reward_components == pytest.approx({"local": -1.0, "team": 0.0})


def test_the_optimal_path_bonus_counts_every_move_of_the_episode():
    start = path_rules.from_text(HAND)
    for scope, bonus in (("episode", 0.0), ("plan", 0.5)):
        rewards = PathRewards(optimal_bonus_scope=scope)
        detour = path_rules.apply_moves(start, ("D", "U"), rewards)
        assert detour.reward == pytest.approx(-0.02) and detour.state.moves_played == 2
        # Back on S after 2 moves: the shortest path now makes 8 moves for a distance of 6.
        rest = path_rules.apply_moves(detour.state, SHORTEST, rewards)
        assert rest.components["optimal"] == bonus
        assert rest.reward == pytest.approx(-0.06 + 6 + 1 + bonus)
    # Walking the shortest path over two plans keeps the bonus.
    first = path_rules.apply_moves(start, SHORTEST[:2], PathRewards())
    second = path_rules.apply_moves(first.state, SHORTEST[2:], PathRewards())
    assert second.components["optimal"] == 0.5
    assert first.reward + second.reward == pytest.approx(AT_ONCE)


def test_the_released_manhattan_potential_is_an_option():
    start = path_rules.from_text(HAND)  # S at (0,0), G at (1,3): Manhattan 4, BFS 6
    rewards = PathRewards(potential_distance="manhattan")
    # R: Manhattan 4 -> 3 (+1), where BFS 6 -> 5 too; D D R R R U: 4 of progress, not 6.
    assert path_rules.apply_moves(start, ("R",), rewards).reward == pytest.approx(0.99)
    assert path_rules.apply_moves(start, SHORTEST, rewards).reward == pytest.approx(-0.06 + 4 + 1.5)
    assert path_rules.potential(start, rewards) == -4.0
    assert PlanPathEnv(rewards=rewards).config.reward_holes() == []


def test_a_nested_sudoku_grid_after_the_legacy_marker_is_read_in_full(sandbox):
    grid = "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]"
    # The released tool parser's non-greedy pattern stops at the first "]": it reads
    # "[[1,2,3,4]", which is no grid, so the released tool agent never scores a nested grid.
    assert re.findall(r"\*\*Actions List\*\*:\s*(\[.*?\])", f"**Actions List**: {grid}") == [
        "[[1,2,3,4]"
    ]
    env = SudokuEnv(sandbox=sandbox)
    env.reset(options={"puzzle": SUDOKU})
    solution = env.rules.format_plan(env.rules.solve(env.puzzle_state))
    env.step(f"```python\nprint('**Actions List**: {solution}')\n```")
    assert env.records[0].parsed["plan"] == solution and env.records[0].parsed["simulated_solved"]


# ------------------------------------------------------------------------ scripted adversaries
def _reference(env, agent):
    return env.reference_action(agent)


def _random(env, agent):
    return env.random_action(agent, np.random.default_rng(env.turn * 7 + len(env.records)))


def _tool_reference_plan_stalls(env, agent):
    if agent == "tool":
        return env.reference_action(agent)
    return env.reference_action(agent) if env.turn == env.config.max_turns - 1 else "thinking"


def _tool_reference_plan_small_steps(env, agent):
    if agent == "tool":
        return env.reference_action(agent)
    return env.legal_actions(agent)[0]


def _tool_random_plan_reference(env, agent):
    return _random(env, agent) if agent == "tool" else env.reference_action(agent)


@pytest.mark.parametrize("cls", [PlanPathEnv, SokobanEnv, SudokuEnv], ids=lambda c: c.__name__)
def test_no_scripted_strategy_earns_more_than_the_reference_agents(cls, sandbox):
    """Every agent's return, for stalls, small steps, random play and re-posted plans, is at
    most what the reference agents (a shortest solution in turn 1) earn on the same puzzle."""
    strategies = [_random, _tool_reference_plan_stalls, _tool_reference_plan_small_steps, _tool_random_plan_reference]
    for seed in (0, 1):
        reference = play(cls(sandbox=sandbox), _reference, seed=seed)
        for strategy in strategies:
            totals = play(cls(sandbox=sandbox), strategy, seed=seed)
            for agent, total in totals.items():
                assert total <= reference[agent] + 1e-9, (strategy.__name__, seed, agent, totals, reference)
        # The same check catches the paper's per-turn reward: the stalled tool earns more.
        farmed = play(paper(cls, sandbox=sandbox), _tool_reference_plan_stalls, seed=seed)
        assert farmed["tool"] > reference["tool"]
