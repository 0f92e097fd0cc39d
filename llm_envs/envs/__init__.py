"""Registration of every environment in :mod:`llm_envs`.

Each environment lives in its own package: ``rules.py`` (pure game logic, no PettingZoo) and
``env.py`` (the thin AEC layer). Entry points are imported lazily, on first ``make``.
"""

from llm_envs.registry import register_env

register_env(
    "llm/Sudoku-v0",
    "llm_envs.envs.sudoku.env:SudokuEnv",
    agents=("tool", "plan"),
    task="procedural 4x4 Sudoku (6x6, 9x9 options), unique solutions",
    description="Tool agent writes a solver program, plan agent submits the filled grid.",
    paper="Stronger-MAS (AT-GRPO)",
)
register_env(
    "llm/Sokoban-v0",
    "llm_envs.envs.sokoban.env:SokobanEnv",
    agents=("tool", "plan"),
    task="procedural 6x6 Sokoban rooms, solvable by construction",
    description="Tool agent writes a search program, plan agent submits the move list.",
    paper="Stronger-MAS (AT-GRPO)",
)
register_env(
    "llm/PlanPath-v0",
    "llm_envs.envs.plan_path.env:PlanPathEnv",
    agents=("tool", "plan"),
    task="procedural 10x10 grids with obstacles, path always exists",
    description="Tool agent writes a BFS/A* program, plan agent submits the path.",
    paper="Stronger-MAS (AT-GRPO)",
)
register_env(
    "llm/CoderTester-v0",
    "llm_envs.envs.coder_tester.env:CoderTesterEnv",
    agents=("coder", "tester"),
    task="HumanEval (default), MBPP, APPS, CodeContests, LiveCodeBench",
    description="Coder writes a solution, tester writes unit tests; both judged in the sandbox.",
    paper="Stronger-MAS (AT-GRPO)",
)
register_env(
    "llm/ReasonerTool-v0",
    "llm_envs.envs.reasoner_tool.env:ReasonerToolEnv",
    agents=("reasoner", "tool"),
    task="procedural arithmetic (default), GSM8K, MATH-500, AIME, OlympiadBench",
    description="Reasoner answers in \\boxed{}, tool agent writes Python that prints the answer.",
    paper="Stronger-MAS (AT-GRPO)",
)
register_env(
    "llm/Forum-v0",
    "llm_envs.envs.forum.env:ForumEnv",
    agents=("agent_0", "agent_1", "agent_2", "agent_3"),
    task="math problems (any question set)",
    description="Solution, critique and scoring rounds among a pool of agents.",
    paper="CoMAS",
)
register_env(
    "llm/ProposerSolverJudge-v0",
    "llm_envs.envs.proposer_solver_judge.env:ProposerSolverJudgeEnv",
    agents=("proposer", "solver", "judge"),
    task="self-proposed questions, seeded from a question pool",
    description="Proposer writes a question, solver answers it, judge rates both.",
    paper="Multi-Agent Evolve",
)
register_env(
    "llm/Debate-v0",
    "llm_envs.envs.debate.env:DebateEnv",
    agents=("agent_0", "agent_1"),
    task="math problems (any question set with answers)",
    description="Agents answer, read each other's answers and revise over several turns.",
    paper="MAPoRL",
)
register_env(
    "llm/Signalling-v0",
    "llm_envs.envs.signalling.env:SignallingEnv",
    agents=("speaker", "listener"),
    task="procedural symbols",
    description="A tiny two-agent referential game: a testbed where small models learn fast.",
    paper="(testbed for the trainers)",
)

# OpenSpiel games (pyspiel is imported only when one is made); any other OpenSpiel game:
# llm_envs.openspiel("game_string").
from llm_envs.envs.openspiel.presets import CURATED as _OPENSPIEL_GAMES  # noqa: E402

for _preset in _OPENSPIEL_GAMES:
    register_env(
        _preset.env_id,
        "llm_envs.envs.openspiel.env:OpenSpielEnv",
        agents=("player_0", "player_1"),
        task=f"OpenSpiel '{_preset.game}', seeded chance",
        description=_preset.description,
        paper="SPIRAL (self-play)" if _preset.game in ("tic_tac_toe", "kuhn_poker", "negotiation") else "OpenSpiel",
        kwargs={"game": _preset.game_string, "params": {} if _preset.registered_game else dict(_preset.params)},
    )

# TextArena games under their own names, in the "textarena" namespace (textarena is imported
# only when one is made); any other TextArena game: llm_envs.textarena("Name-v0").
from llm_envs.envs.textarena.catalog import GAMES as _TEXTARENA_GAMES  # noqa: E402

for _game in _TEXTARENA_GAMES.values():
    if not _game.registered:
        continue
    register_env(
        f"textarena/{_game.id}",
        "llm_envs.envs.textarena.env:TextArenaEnv",
        agents=tuple(f"player_{i}" for i in range(_game.players)),
        task="TextArena 0.7.4 game, seeded",
        description=f"TextArena's {_game.id} ({_game.players} player{'s' if _game.players > 1 else ''}).",
        paper="TextArena",
        kwargs={"game": _game.id},
    )
