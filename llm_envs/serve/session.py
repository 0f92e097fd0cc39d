"""One environment instance per WebSocket session, as an OpenEnv ``Environment``.

Imports ``openenv-core``; imported only when a server is built (:mod:`llm_envs.serve.app`).
Every check that can refuse a message runs *before* the environment is touched, so a refused
message (wrong agent, unknown option, a step before reset) changes nothing; an environment step
that raises :class:`~llm_envs.core.errors.InfrastructureError` leaves the episode as it was
(``TextEnv.step`` guarantees it) and comes back as an error whose message starts with
:data:`~llm_envs.serve.protocol.INFRASTRUCTURE_PREFIX`.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

import llm_envs
from llm_envs.core.errors import InfrastructureError
from llm_envs.core.records import _jsonable
from llm_envs.core.writing import without_lone_surrogates

from .protocol import EXPIRED_PREFIX, INFRASTRUCTURE_PREFIX


class TextAction(Action):
    """One agent's move: who acts and what it says (``None``: the dead step of a finished agent)."""

    agent: str = Field(description="the acting agent: the one the last observation named")
    text: str | None = Field(description="the action text; null only for a finished agent's dead step")


class TextObservation(Observation):
    """What every agent needs after a reset or a step (see :mod:`llm_envs.serve.protocol`)."""

    agent: str = Field(default="", description="the agent to act now ('' when no agent is left)")
    instruction: str = Field(default="", description="its standing instruction (system prompt)")
    prompt: str = Field(default="", description="what it sees now (user prompt)")
    role: str = ""
    turn: int = 0
    agents: list[str] = Field(default_factory=list, description="live agents")
    possible_agents: list[str] = Field(default_factory=list)
    rewards: dict[str, float] = Field(default_factory=dict, description="every agent's reward on this step")
    cumulative_rewards: dict[str, float] = Field(default_factory=dict)
    terminations: dict[str, bool] = Field(default_factory=dict)
    truncations: dict[str, bool] = Field(default_factory=dict)
    infos: dict[str, Any] = Field(default_factory=dict)
    episode_id: str = ""
    metrics: dict[str, float] = Field(default_factory=dict, description="the episode's metrics once it is over")
    num_records: int = Field(default=0, description="actions recorded so far (the state's records)")


class TextState(State):
    """The episode: transcript, records, observations of every agent, metrics."""

    env_id: str = ""
    options: dict[str, Any] = Field(default_factory=dict)
    possible_agents: list[str] = Field(default_factory=list)
    agents: list[str] = Field(default_factory=list)
    agent_selection: str = ""
    episode_over: bool = False
    observations: dict[str, dict[str, str]] = Field(default_factory=dict)
    transcript: str = ""
    records: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    agent_rewards: dict[str, float] = Field(default_factory=dict)
    reference_action: str | None = None


#: Options a client may not set: they name files, the game, the sandbox or its limits, or output
#: on the server machine. A client could otherwise read a server file as a task source (or as
#: an OpenSpiel game: ``efg_game(filename=/etc/passwd)`` quoted its lines back in the error),
#: crash the whole server (OpenSpiel's C++ segfaults on ``connect_four(rows=0)``, which no
#: Python code can catch), or run programs under limits the server did not choose.
SERVER_ONLY_OPTIONS = (
    "sandbox", "task_path", "task_kwargs", "pool_path", "path", "render_mode",
    "game", "params", "game_kwargs", "reference_options",
    "program_time_s", "program_memory_mb", "answer_timeout_s", "test_time_s", "mutant_test_time_s",
    # Python objects: a JSON string in their place broke every later step ("'str' object is
    # not callable")
    "verifier", "task_source", "pool", "config",
)  # fmt: skip

#: A client may set a numeric option to at most this many times its default (the server's
#: ``--env-arg`` value, else the configuration's), or to :data:`CLIENT_OPTION_FLOOR`, whichever
#: is larger (:data:`CLIENT_OPTION_NO_DEFAULT` for an option whose default is not a number:
#: Sudoku's ``num_clues=70``): one 60-byte reset with ``num_agents=1000000`` grew the server
#: by 8 GB.
CLIENT_OPTION_FACTOR = 8
CLIENT_OPTION_FLOOR = 64
CLIENT_OPTION_NO_DEFAULT = 1024


class SessionError(ValueError):
    """A message this session refuses; nothing changed."""


class TextEnvSession(Environment[TextAction, TextObservation, TextState]):
    """A registered text environment behind OpenEnv's ``Environment`` interface.

    Args:
        env_id: A registered id (``llm/Sudoku-v0``, ``textarena/...``, a third party's).
        base_options: Keyword options of ``llm_envs.make`` every session starts from (the
            server's ``--env-arg``); a reset may override them.
        expose_reference: Put the reference agent's action in ``state`` (it may reveal the
            answer: only for servers whose clients are harnesses, not the agents under test).
        client_options: Let a reset set options of ``llm_envs.make`` (never those in
            :data:`SERVER_ONLY_OPTIONS`); False: every option is the server's.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, base_options: dict[str, Any] | None = None, *, expose_reference: bool = False,
                 client_options: bool = True):
        super().__init__()
        self.client_options = client_options
        self.env_id = env_id
        self.base_options = dict(base_options or {})
        self.expose_reference = expose_reference
        self._options: dict[str, Any] = {}
        self._env: Any = None
        self._steps = 0
        self._reference: str | None = None
        self._closed = False
        #: When a client last sent this session a message (``state`` included, which OpenEnv's
        #: own activity clock does not count); the server's idle sweep reads it.
        self.last_activity = time.time()
        self._lock = threading.Lock()  # state may be read while a step runs in the executor

    # ------------------------------------------------------------------ OpenEnv interface
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TextObservation:
        self._check_open()
        reset_options = kwargs.pop("options", None)
        if reset_options is not None and not isinstance(reset_options, dict):
            raise SessionError(f"reset 'options' must be an object, got {type(reset_options).__name__}")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise SessionError(f"reset 'seed' must be an integer, got {seed!r}")
        if seed is not None and seed < 0:
            raise SessionError(f"reset 'seed' must be >= 0, got {seed}")
        refused = sorted(set(kwargs) & set(SERVER_ONLY_OPTIONS)) if self.client_options else sorted(kwargs)
        if refused:
            why = ("they name files, the game, the sandbox or its limits on the server machine" if self.client_options
                   else "this server fixes every option")
            raise SessionError(f"option(s) {refused} can only be set by the server (--env-arg): {why}")
        oversized = self._oversized(kwargs)
        if oversized:
            raise SessionError(f"option value(s) too large for a client: {'; '.join(oversized)} (a client may set a "
                               f"number to {CLIENT_OPTION_FACTOR}x its default or {CLIENT_OPTION_FLOOR}, whichever is "
                               "larger; the server's --env-arg sets any)")
        options = {**self.base_options, **kwargs}
        env = self._env
        if env is None or options != self._options:
            try:
                env = llm_envs.make(self.env_id, **options)
                # Every episode of a session starts from what the environment was made with (a
                # Proposer-Solver-Judge pool): the session's later resets play clones, which
                # never commit, and its first episode committed, so an evaluation through the
                # server depended on which session played which episode.
                freeze = getattr(env, "freeze_cross_episode_state", None)
                if callable(freeze):
                    freeze()
            except TypeError as exc:  # an unknown option: the message lists the valid ones
                raise SessionError(f"unknown or invalid option(s) {sorted(kwargs)} for {self.env_id}: {exc}") from exc
            except (ValueError, KeyError) as exc:  # a value the environment refuses: say which
                raise SessionError(f"option(s) {sorted(kwargs)} refused by {self.env_id}: {exc}") from exc
        else:
            env = env.clone()  # a reset that fails (a bad reset option) leaves the episode as it was
        with self._lock:
            try:
                env.reset(seed=seed, options=reset_options)
            except (ValueError, KeyError, TypeError) as exc:  # a reset option it refuses
                if env is not self._env:
                    env.close()
                raise SessionError(f"reset refused by {self.env_id}: {exc}") from exc
            if env is not self._env and self._env is not None:
                self._env.close()
            self._env, self._options, self._steps = env, options, 0
            return self._observation(acted=None)

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        self._check_open()
        env = self._require_env()
        if not env.agents:
            raise SessionError("the episode is over and every agent has left; reset to start a new one")
        acting = env.agent_selection
        if action.agent != acting:
            raise SessionError(f"it is {acting!r}'s turn, not {action.agent!r}'s; the action was not played")
        dead = env.terminations[acting] or env.truncations[acting]
        if dead and action.text is not None:
            raise SessionError(f"{acting!r} has finished: its dead step takes text null")
        if not dead and action.text is None:
            raise SessionError(f"{acting!r} is playing: text null is only for a finished agent's dead step")
        with self._lock:
            try:
                env.step(action.text if not dead else None)
            except InfrastructureError as exc:
                raise RuntimeError(
                    f"{INFRASTRUCTURE_PREFIX} ({type(exc).__name__}: {exc}); the step did not happen and "
                    "the episode is unchanged: send it again, or reset"
                ) from exc
            self._steps += 1
            return self._observation(acted=acting)

    @property
    def state(self) -> TextState:
        self._check_open()
        env = self._env
        if env is None:
            return TextState(env_id=self.env_id, options=_jsonable(self.base_options))
        with self._lock:
            return TextState(**_replyable(
                episode_id=env.episode_id,
                step_count=self._steps,
                env_id=self.env_id,
                options=_jsonable(self._options),
                possible_agents=list(env.possible_agents),
                agents=list(env.agents),
                agent_selection=env.agent_selection if env.agents else "",
                episode_over=env.episode_over,
                observations={a: dict(env.observe(a)) for a in env.possible_agents},
                transcript=env.transcript(),
                records=[r.to_dict() for r in env.records],
                metrics=env.episode_metrics() if env.episode_over else {},
                agent_rewards=env.agent_rewards(),
                reference_action=self._reference,
            ))

    def get_metadata(self) -> EnvironmentMetadata:
        entry = llm_envs.entry(self.env_id)
        return EnvironmentMetadata(
            name=entry.id, description=entry.description, version=llm_envs.__version__, author=entry.paper or None
        )

    def close(self) -> None:
        """Called when the session ends or idles out: later messages get a clear error."""
        self._closed = True
        if self._env is not None:
            self._env.close()

    # ------------------------------------------------------------------ helpers
    def _oversized(self, kwargs: dict[str, Any]) -> list[str]:
        """The numeric client options over their limit (:data:`CLIENT_OPTION_FACTOR`), as
        ``"name=value (limit L)"``."""
        defaults = _config_defaults(self.env_id)
        found = []
        for name, value in kwargs.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            default = self.base_options.get(name, defaults.get(name))
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                limit = max(CLIENT_OPTION_FACTOR * abs(default), CLIENT_OPTION_FLOOR)
            else:
                limit = CLIENT_OPTION_NO_DEFAULT
            if not abs(value) <= limit:  # (NaN too)
                found.append(f"{name}={value!r} (limit {limit:g})")
        return found

    def _check_open(self) -> None:
        self.last_activity = time.time()
        if self._closed:
            raise SessionError(
                f"{EXPIRED_PREFIX}: this session was closed by the server (idle too long, or shutting "
                "down); open a new connection"
            )

    def _require_env(self) -> Any:
        if self._env is None:
            raise SessionError("reset first: this session has no episode yet")
        return self._env

    def _reference_now(self) -> str | None:
        """The reference action of the agent to act, computed here, on the session's worker
        thread after each reset and step: OpenEnv answers ``state`` on the event loop, where a
        slow reference (a game solver) would stall every session."""
        env = self._env
        if not self.expose_reference or not env.agents:
            return None
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return None
        try:
            return env.reference_action(agent)
        except NotImplementedError:
            return None

    def _observation(self, acted: str | None) -> TextObservation:
        self._reference = self._reference_now()
        env = self._env
        agent = env.agent_selection if env.agents else ""
        observation = env.observe(agent) if agent else {"instruction": "", "prompt": ""}
        rewards = {a: float(r) for a, r in env.rewards.items()}
        return TextObservation(**_replyable(
            done=bool(env.episode_over),
            reward=rewards.get(acted, 0.0) if acted is not None else None,
            agent=agent,
            instruction=observation["instruction"],
            prompt=observation["prompt"],
            role=env.role_of(agent) if agent else "",
            turn=int(env.turn),
            agents=list(env.agents),
            possible_agents=list(env.possible_agents),
            rewards=rewards,
            cumulative_rewards={a: float(r) for a, r in env._cumulative_rewards.items()},
            terminations={a: bool(v) for a, v in env.terminations.items()},
            truncations={a: bool(v) for a, v in env.truncations.items()},
            infos=_jsonable(env.infos),
            episode_id=env.episode_id,
            metrics=env.episode_metrics() if env.episode_over else {},
            num_records=len(env.records),
        ))



def _replyable(**fields: Any) -> dict[str, Any]:
    """A reply's fields with each lone surrogate (text a model wrote, played as it came) as
    U+FFFD: the server's JSON cannot carry one, and a reply that failed to encode left the
    step played and the client told it had failed. The episode keeps the text as it was."""
    return without_lone_surrogates(fields)


@functools.cache
def _config_defaults(env_id: str) -> dict[str, Any]:
    """The default of each field of ``env_id``'s configuration dataclass (empty when it has
    none): what a client's numeric option is measured against."""
    import dataclasses

    entry = llm_envs.entry(env_id)
    try:
        config = getattr(entry.load(), "config_class", None)
    except (ImportError, AttributeError):
        return dict(entry.kwargs)
    fields = dataclasses.fields(config) if config is not None and dataclasses.is_dataclass(config) else ()
    return {**{f.name: f.default for f in fields if f.default is not dataclasses.MISSING}, **entry.kwargs}
