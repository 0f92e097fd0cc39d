"""Agents that need no torch. Model agents with torch live in :mod:`llm_trainers.agents`.

* :class:`ReferenceAgent`, :class:`RandomAgent`: scripted agents (:mod:`llm_envs.agents.scripted`);
* :class:`HumanAgent`: a person at the terminal (:mod:`llm_envs.agents.human`);
* :class:`OpenAIHTTPAgent`: any OpenAI-compatible chat-completions server
  (:mod:`llm_envs.agents.openai_http`), with an optional :class:`ResponseCache`;
* :class:`AgentError`: how an agent says it produced no action (an infrastructure failure,
  never played; :mod:`llm_envs.agents.base`);
* agent specs such as ``openai:http://127.0.0.1:8000/v1@my-model`` or ``hf:PATH``, and the
  per-agent mapping :func:`resolve_agents` (:mod:`llm_envs.agents.spec`).
"""

from llm_envs.agents.base import ActRequest, Agent, AgentError, AgentOutput
from llm_envs.agents.cache import ResponseCache
from llm_envs.agents.human import HumanAgent
from llm_envs.agents.openai_http import OpenAIHTTPAgent
from llm_envs.agents.scripted import RandomAgent, ReferenceAgent
from llm_envs.agents.spec import (
    AgentSpec,
    AgentSpecError,
    build_agent,
    load_agents_config,
    parse_agent_spec,
    parse_assignments,
    resolve_agents,
)

__all__ = [
    "ActRequest",
    "Agent",
    "AgentError",
    "AgentOutput",
    "AgentSpec",
    "AgentSpecError",
    "HumanAgent",
    "OpenAIHTTPAgent",
    "RandomAgent",
    "ReferenceAgent",
    "ResponseCache",
    "build_agent",
    "load_agents_config",
    "parse_agent_spec",
    "parse_assignments",
    "resolve_agents",
]
