"""The wire format of ``llm-envs serve``: OpenEnv's WebSocket protocol with text actions for
several agents.

OpenEnv's protocol (``openenv-core`` 0.3): a client opens ``/ws`` and sends JSON messages
``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``, ``{"type":
"state"}`` and ``{"type": "close"}``; the server answers ``{"type": "observation", "data":
{"observation": OBS, "reward": r, "done": d}}``, ``{"type": "state", "data": STATE}`` or
``{"type": "error", "data": {"message": ..., "code": ...}}``. Each connection is one session
with its own environment instance.

What this server puts in those frames (reset data, ``{"agent", "text"}`` actions,
:data:`OBSERVATION_FIELDS`, :data:`STATE_FIELDS`, error codes) is tabled in docs/interop.md
("OpenEnv server and client"). :data:`INFRASTRUCTURE_PREFIX` starts the message of a step that could not be
judged because the infrastructure failed (the episode is unchanged).
"""

from __future__ import annotations

#: Observation fields (besides OpenEnv's ``reward`` and ``done``).
OBSERVATION_FIELDS = (
    "agent",  # the agent to act now ("" when none is left)
    "instruction",  # its observation: the standing instruction (system prompt) ...
    "prompt",  # ... and what it sees now (user prompt)
    "role",
    "turn",
    "agents",  # live agents (PettingZoo's env.agents)
    "possible_agents",
    "rewards",  # reward of every agent on this step
    "cumulative_rewards",  # PettingZoo's _cumulative_rewards (what last() reports)
    "terminations",
    "truncations",
    "infos",
    "episode_id",
    "metrics",  # the episode's metrics once it is over, else {}
    "num_records",  # actions recorded so far
)

#: State fields (besides OpenEnv's ``episode_id`` and ``step_count``).
STATE_FIELDS = (
    "env_id",
    "options",
    "possible_agents",
    "agents",
    "agent_selection",
    "episode_over",
    "observations",  # every possible agent's {"instruction", "prompt"}
    "transcript",
    "records",  # ActionRecord.to_dict() of every action so far
    "metrics",
    "agent_rewards",  # per-agent sum of the records' rewards
    "reference_action",  # the reference agent's action now, when the server allows it
)

#: Reset keys that are not options of ``llm_envs.make``.
RESET_KEYS = ("seed", "episode_id", "options")

#: An infrastructure failure (a sandbox down): the step did not happen; step it again or reset.
INFRASTRUCTURE_PREFIX = "infrastructure error"
#: The message prefix of a session the server expired for idling.
EXPIRED_PREFIX = "session expired"
#: Error code of a message over the size limit (the others are OpenEnv's ``WSErrorCode``).
MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"

#: Default limit on one incoming message (bytes of its UTF-8 text).
DEFAULT_MAX_MESSAGE_BYTES = 1 << 22
