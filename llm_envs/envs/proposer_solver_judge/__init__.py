"""Multi-Agent Evolve: ``llm/ProposerSolverJudge-v0`` and its persistent question pool."""

from llm_envs.envs.proposer_solver_judge.pool import PoolEntry, QuestionPool

__all__ = ["PoolEntry", "QuestionPool"]
