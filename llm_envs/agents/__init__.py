"""Agents that need no torch. Model agents with torch live in :mod:`llm_trainers.agents`."""

from llm_envs.agents.base import ActRequest, Agent, AgentOutput
from llm_envs.agents.scripted import RandomAgent, ReferenceAgent

__all__ = ["ActRequest", "Agent", "AgentOutput", "RandomAgent", "ReferenceAgent"]
