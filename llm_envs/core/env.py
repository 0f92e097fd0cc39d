"""The base class of every text environment: PettingZoo's AEC API with text in and text out.

:class:`TextEnv` implements the parts of the AEC contract that every environment shares, so
that an environment only describes its game: ``reset``, ``step``, ``observe``, ``last``, the dead
step and the reward bookkeeping; cached spaces; ``render`` and ``close``; per-action
:class:`~llm_envs.core.records.ActionRecord` objects with *delayed credit* (a reward known later
is credited back to the record that earned it and emitted by PettingZoo's ``rewards`` when it
becomes known, so each agent's record sums equal its PettingZoo rewards); :meth:`TextEnv.clone`
(a deep copy sharing only :meth:`TextEnv._shared_resources`); seeding through the instance's own
``numpy.random.Generator`` only.

A subclass implements ``_start_episode(options)`` (return the first agent),
``_apply_action(agent, text)`` (add a record with :meth:`_add_record`, credit rewards with
:meth:`_credit`, return the next agent or call :meth:`_end_episode`), ``_instruction(agent)``,
``_prompt(agent)`` and ``reference_action(agent)``; optionally ``random_action``, ``_role``,
``_episode_metrics``, ``_describe_episode`` and ``_shared_resources``. docs/architecture.md
("The environment contract in one table", "How to add an environment") says the same for
authors.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from llm_envs.core.errors import InfrastructureError
from llm_envs.core.records import ActionRecord, format_transcript
from llm_envs.core.spaces import action_space, observation_space

Observation = dict[str, str]


class UnreadResetOptionWarning(UserWarning):
    """``reset`` was given an option the environment does not read (it plays on without it)."""


class EnvStateError(RuntimeError):
    """Raised when the environment is used out of order (e.g. ``step`` before ``reset``)."""


class TextEnv(AECEnv[str, Observation, str]):
    """A PettingZoo AEC environment whose observations and actions are text.

    Observations are ``{"instruction": str, "prompt": str}``; see
    :func:`llm_envs.core.messages.to_chat_messages`. Actions are any ``str``: malformed text is
    part of the game and earns the format penalty the environment defines; it never raises.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "text_env_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
        "render_fps": 1,
    }

    #: The config dataclass of the environment; ``__init__`` accepts an instance or overrides.
    config_class: ClassVar[type | None] = None

    #: The ``reset(options=...)`` keys ``_start_episode`` reads. ``reset`` warns about any other
    #: (:class:`UnreadResetOptionWarning`: a mistyped or unsupported option, e.g.
    #: ``problem_index`` for an environment that draws its own problems, was silently ignored)
    #: and plays on, as PettingZoo's ``api_test`` requires (it resets with ``{"options": 1}``).
    #: ``None``: not declared, nothing checked.
    reset_options: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        possible_agents: Sequence[str],
        *,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; "
                f"choose one of {self.metadata['render_modes']} or None"
            )
        if len(set(possible_agents)) != len(possible_agents) or not possible_agents:
            raise ValueError(f"possible_agents must be unique and non-empty: {possible_agents!r}")
        self.render_mode = render_mode
        self.possible_agents = list(possible_agents)
        self.observation_spaces = {a: observation_space() for a in self.possible_agents}
        self.action_spaces = {a: action_space() for a in self.possible_agents}
        self.np_random = np.random.default_rng()
        self.records: list[ActionRecord] = []
        self.turn = 0
        self.episode_id = ""
        self._last_seed: int | None = None
        self._episode_count = 0
        self._has_reset = False
        self._episode_over = False
        self._truncated = False

    # ------------------------------------------------------------------ configuration helpers
    @classmethod
    def _build_config(cls, config: Any, overrides: dict[str, Any]) -> Any:
        """Merge ``config`` (an instance of :attr:`config_class` or None) with keyword overrides.

        Unknown keys raise a ``TypeError`` that lists the valid ones.
        """
        if cls.config_class is None:
            raise TypeError(f"{cls.__name__} declares no config_class")
        base = config if config is not None else cls.config_class()
        if not isinstance(base, cls.config_class):
            raise TypeError(f"config must be a {cls.config_class.__name__}, got {type(base).__name__}")
        valid = {f.name for f in dataclasses.fields(base)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise TypeError(
                f"unknown option(s) {unknown} for {cls.__name__}; valid options: {sorted(valid)}"
            )
        fields = {f.name: f for f in dataclasses.fields(base)}
        for name, value in overrides.items():  # before the config's own checks, which compare
            _check_number(name, value, fields[name].type)
            current = getattr(base, name)
            if dataclasses.is_dataclass(current) and not isinstance(value, type(current)):
                # (``--env-arg rewards=foo`` failed mid-episode: "'str' object has no attribute")
                raise TypeError(f"{name} must be a {type(current).__name__}, got {type(value).__name__} {value!r:.80}")
        built = dataclasses.replace(base, **overrides)
        _check_numbers(built)
        return built

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a new episode.

        With ``seed`` the instance's generator is re-created from it; without, the generator
        continues its stream (the first reset without a seed draws one from OS entropy). The
        global ``random`` and ``numpy.random`` states are never read. ``options`` keys outside
        :attr:`reset_options` are not read, with a warning (:func:`unread_reset_options`).
        """
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"reset options must be a dict, got {type(options).__name__}")
        unread = self.unread_reset_options(options)
        if unread:
            warnings.warn(
                f"reset option(s) {unread} not read by {type(self).__name__}, which reads "
                + (f"{sorted(self.reset_options or ())}" if self.reset_options else "none"),
                UnreadResetOptionWarning,
                stacklevel=2,
            )
        if seed is not None:
            self._last_seed = int(seed)
            self._episode_count = 0
            self.np_random = np.random.default_rng(self._last_seed)
        elif self._last_seed is None:
            self._last_seed = int(np.random.SeedSequence().entropy % (2**63))
            self.np_random = np.random.default_rng(self._last_seed)
        self.episode_id = f"{self.metadata['name']}:s{self._last_seed}:e{self._episode_count}"
        self._episode_count += 1

        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.records = []
        self.turn = 0
        self._episode_over = False
        self._truncated = False
        self._has_reset = True
        first = self._start_episode(dict(options or {}))
        if first not in self.agents:
            raise AssertionError(f"_start_episode returned {first!r}, not one of {self.agents}")
        self.agent_selection = first
        self.infos = {a: self._step_info(a) for a in self.agents}

    def unread_reset_options(self, options: dict[str, Any] | None) -> list[str]:
        """The keys of ``options`` this environment's ``reset`` does not read (empty where
        :attr:`reset_options` is not declared)."""
        accepted = self.reset_options
        if accepted is None or not options:
            return []
        return sorted(str(key) for key in options if key not in accepted)

    def step(self, action: str | None) -> None:
        """Play ``action`` for :attr:`agent_selection`.

        A finished agent must be stepped once with ``None`` (PettingZoo's dead step). For a live
        agent ``None`` counts as the empty string; any other non-``str`` is a programming error
        and raises ``TypeError``.

        Raises:
            InfrastructureError: the step cannot be judged because the infrastructure failed (a
                :class:`~llm_envs.core.errors.SandboxFailure`: the sandbox failed under the
                agent's program). Never a model outcome, never scored; environments raise it
                before they change their state, so the step did not happen: step the same
                action again once the infrastructure works, or drop the episode.
        """
        self._require_reset()
        if not self.agents:
            raise EnvStateError("the episode is over (no agents left); call reset()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if action is None:
            action = ""
        if not isinstance(action, str):
            raise TypeError(f"actions are text: expected str, got {type(action).__name__}")

        rewards_before, cumulative_before = dict(self.rewards), self._cumulative_rewards[agent]
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        try:
            next_agent = self._apply_action(agent, action)
        except InfrastructureError:
            # The step could not be judged (the sandbox failed): it did not happen.
            self.rewards, self._cumulative_rewards[agent] = rewards_before, cumulative_before
            raise
        if self._episode_over:
            if next_agent is not None:
                raise AssertionError("_apply_action ended the episode but returned a next agent")
            for a in self.agents:
                self.terminations[a] = not self._truncated
                self.truncations[a] = self._truncated
            for record in self.records:
                record.final = True
            self.infos = {a: self._step_info(a) for a in self.agents}
            self._deads_step_first()
        else:
            if next_agent not in self.agents:
                raise AssertionError(f"_apply_action returned {next_agent!r}, not a live agent")
            self.agent_selection = next_agent
            self.infos = {a: self._step_info(a) for a in self.agents}
        self._accumulate_rewards()

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """PettingZoo's ``last``; before ``reset``, an :class:`EnvStateError` (not PettingZoo's
        ``AttributeError`` for an agent selection that does not exist yet)."""
        self._require_reset()
        return super().last(observe)

    def agent_iter(self, max_iter: int = 2**63) -> Any:
        """PettingZoo's ``agent_iter``; before ``reset``, an :class:`EnvStateError`."""
        self._require_reset()
        return super().agent_iter(max_iter)

    def observe(self, agent: str) -> Observation:
        """The observation of ``agent`` now; valid for every possible agent after ``reset``."""
        self._require_reset()
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        return {"instruction": self._instruction(agent), "prompt": self._prompt(agent)}

    def render(self) -> str | None:
        """``"ansi"``: return the transcript; ``"human"``: print it; ``None``: do nothing."""
        return render_transcript(self)

    def close(self) -> None:
        """Release nothing by default: shared resources (sandboxes) are owned by their creator."""

    # ------------------------------------------------------------------ conveniences
    def freeze_cross_episode_state(self) -> None:
        """Make every later episode of this instance (and of its clones) independent of the
        episodes played before it: state an environment carries from one episode to the next
        (Proposer–Solver–Judge's question pool) stops changing. The evaluation runner calls it,
        so that an evaluation's results do not depend on its concurrency, order or resumes.
        Nothing to do by default: most environments carry no state between episodes."""

    def clone(self) -> TextEnv:
        """An independent copy of the whole episode state, RNG included.

        Stepping the clone never changes the original. Objects listed by
        :meth:`_shared_resources` (sandboxes, task sources, question pools) are shared, not
        copied: they are either stateless for the episode or safe to share by design.
        """
        # The spaces are copied too (~50 µs of a ~250 µs clone; ``FreeText`` copies only its
        # generator): shared, seeding or sampling the clone's action space moved the original's.
        memo = {id(resource): resource for resource in self._shared_resources()}
        return copy.deepcopy(self, memo)

    def restore(self, snapshot: TextEnv) -> None:
        """Put this environment back in the state of ``snapshot``, a :meth:`clone` of it taken
        earlier, in place (wrappers and callers keep their reference). Undoes what was played
        since, e.g. the first half of a parallel cycle whose second action raised. The
        snapshot becomes this environment's state: do not use it afterwards."""
        if type(snapshot) is not type(self):
            raise TypeError(f"cannot restore a {type(self).__name__} from a {type(snapshot).__name__}")
        self.__dict__.clear()
        self.__dict__.update(snapshot.__dict__)

    def _shown_records(self) -> list[ActionRecord]:
        """The records a transcript shows now: all of them, unless an environment must still
        hide some (moves of a simultaneous turn that not every player has chosen)."""
        return self.records

    def transcript(self, prompts: bool = False) -> str:
        """The episode so far as readable text: the task, then every action with its reward.

        With ``prompts=True`` each action is preceded by the prompt its agent saw.
        """
        return format_transcript(
            f"{self.metadata['name']} | episode {self.episode_id}",
            self._shown_records(),
            description=self._describe_episode() or None,
            metrics=self.episode_metrics() if self._episode_over else None,
            prompts=prompts,
        )

    def episode_metrics(self) -> dict[str, float]:
        """Numbers that describe the episode; always includes ``success`` and ``turns``."""
        metrics = {"success": 0.0, "turns": float(self.turn)}
        metrics.update({k: float(v) for k, v in self._episode_metrics().items()})
        return metrics

    @property
    def episode_over(self) -> bool:
        return self._episode_over

    def agent_rewards(self) -> dict[str, float]:
        """Per-agent sum of the rewards credited to its records so far."""
        totals = {a: 0.0 for a in self.possible_agents}
        for r in self.records:
            totals[r.agent] += r.reward
        return totals

    def role_of(self, agent: str) -> str:
        """The role ``agent`` plays now (defaults to the agent id)."""
        return self._role(agent)

    def state_dict(self) -> dict[str, Any]:
        """State that outlives an episode and a training checkpoint must keep (a question
        pool, say). Empty for environments whose episodes are independent."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (a resumed training run)."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no cross-episode state: got {sorted(state)}")

    def prepare(
        self,
        problems: Iterable[int] | None = None,
        *,
        threads: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Do, before any episode, the per-problem work that a step would otherwise pay on a
        problem's first episode, and keep it where every later episode and process finds it.

        ``problems``: indices into the environment's task source (``None``: all of them);
        ``threads``: how many problems at once; ``progress(done, total)`` is called after each
        problem. Returns counts that describe what was done (``llm-envs prepare`` prints them).
        The default does nothing and returns ``{}``; an environment with such work overrides it
        (CoderTester chooses each problem's mutants).
        """
        return {}

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A random action for ``agent``; environments override this with a *well-formed* one."""
        length = int(rng.integers(0, 64))
        alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 \n"))
        return "".join(rng.choice(alphabet, size=length))

    def reference_action(self, agent: str) -> str:
        """The action a scripted reference agent would take now (may read hidden state)."""
        raise NotImplementedError(f"{type(self).__name__} has no reference agent")

    # ------------------------------------------------------------------ the reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """``(low, high)``: every reward one action of ``agent`` earns (its record's total,
        delayed credit included) lies in this interval, for this configuration.

        Environments declare it from their config, and their docs page states the same
        bounds; the reward contract (``tests/envs/test_reward_contract.py``, ``llm-envs
        audit``) checks every record against it. The default, for an environment that does
        not declare, is the sound ``(-inf, inf)``: nothing is promised, and the audit says the
        bounds are undeclared.
        """
        return (-math.inf, math.inf)

    def reference_is_ceiling(self, agent: str | None = None) -> bool:
        """Whether the reference agents' return is the most ``agent`` (``None``: the team, all
        agents summed) can earn, whatever it plays while the others play the reference (the
        reward contract: docs/audit.md).

        True by default: the reference agents solve the task, and solving must pay the most.
        Environments where agents grade each other (one gains what another loses) keep it for
        the team only; games, where the reference agents are opponents rather than a ceiling,
        return False (only the per-turn bounds are checked there).
        """
        return True

    def reward_bounds_declared(self) -> bool:
        """Whether :meth:`reward_bounds` is overridden (the audit reports undeclared bounds)."""
        return type(self).reward_bounds is not TextEnv.reward_bounds

    # ------------------------------------------------------------------ for subclasses
    def _add_record(
        self,
        agent: str,
        action: str,
        *,
        parsed: dict[str, Any] | None = None,
        format_ok: bool = True,
        info: dict[str, Any] | None = None,
        observation: Observation | None = None,
    ) -> ActionRecord:
        """Append the record of the action ``agent`` is playing now and return it.

        Call it at the start of ``_apply_action`` (before the state changes), so that the
        stored observation is the one the agent acted on.
        """
        record = ActionRecord(
            index=len(self.records),
            episode_id=self.episode_id,
            agent=agent,
            role=self._role(agent),
            turn=self.turn,
            observation=observation if observation is not None else self.observe(agent),
            action=action,
            parsed=dict(parsed or {}),
            format_ok=format_ok,
            info=dict(info or {}),
        )
        self.records.append(record)
        return record

    def _credit(self, record: ActionRecord, component: str, amount: float) -> None:
        """Credit ``amount`` to ``record`` under ``component`` and emit it through ``rewards``.

        The agent that owns the record must still be live (credit arrives at the latest on the
        step that ends the episode).
        """
        amount = float(amount)
        if not math.isfinite(amount):
            # (one NaN reward made every advantage of a whitened batch NaN, and one update wrote
            # NaN into every weight of the policy)
            raise ValueError(f"{type(self).__name__} credited {amount} to record {record.index} ({record.agent!r}, "
                             f"{component!r}): a reward must be a finite number")
        if record.final:
            raise EnvStateError(f"record {record.index} is final; no more credit can arrive")
        if record.agent not in self.rewards:
            raise EnvStateError(f"agent {record.agent!r} has left; credit it before the end")
        record.reward_components[component] = record.reward_components.get(component, 0.0) + amount
        record.reward += amount
        record.credits.append((component, amount, len(self.records) - 1))  # when it arrived
        self.rewards[record.agent] += amount

    def _end_episode(self, *, truncated: bool = False) -> None:
        """Mark the episode over. ``truncated`` means it hit a limit rather than finishing."""
        self._episode_over = True
        self._truncated = truncated

    def _step_info(self, agent: str) -> dict[str, Any]:
        """The ``infos`` entry of ``agent``: small and fixed in shape during play."""
        info: dict[str, Any] = {"turn": self.turn, "role": self._role(agent)}
        if self._episode_over:
            info["metrics"] = self.episode_metrics()
        return info

    def _require_reset(self) -> None:
        if not self._has_reset:
            raise EnvStateError("call reset() before using the environment")

    # Hooks ---------------------------------------------------------------------------------
    def _start_episode(self, options: dict[str, Any]) -> str:
        raise NotImplementedError

    def _apply_action(self, agent: str, action: str) -> str | None:
        raise NotImplementedError

    def _instruction(self, agent: str) -> str:
        raise NotImplementedError

    def _prompt(self, agent: str) -> str:
        raise NotImplementedError

    def _role(self, agent: str) -> str:
        return agent

    def _episode_metrics(self) -> dict[str, float]:
        return {}

    def _describe_episode(self) -> str:
        return ""

    def _shared_resources(self) -> list[Any]:
        return []


def render_transcript(env: Any) -> str | None:
    """PettingZoo's ``render`` for a text environment (``env.render_mode``, ``env.transcript()``,
    ``env._has_reset``): ``"ansi"`` returns the transcript, ``"human"`` prints it, ``None`` does
    nothing; before the first reset the transcript is empty."""
    if env.render_mode is None:
        return None
    text = env.transcript() if env._has_reset else ""
    if env.render_mode == "human":
        # (a lone surrogate, text a model wrote, as its escape: a terminal cannot print it)
        print(text.encode("utf-8", "backslashreplace").decode("utf-8"))
        return None
    return text


def _check_numbers(config: Any, prefix: str = "") -> None:
    """Refuse a config (or a dataclass it holds, such as its reward weights) with a number that
    every check of the environment's own would let through: a float that is not finite (NaN
    fails every comparison, so ``alpha=nan`` passed ``alpha >= 0`` and made every reward NaN;
    ``inf`` time limits reached ``select`` mid-episode), a float where the field is an ``int``
    (``max_turns=2.5``), or text or a bool where it is a number (``--env-arg
    obstacle_density=abc``, ``rows=true``)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        name = prefix + field.name
        _check_number(name, value, field.type)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _check_numbers(value, name + ".")


def _check_number(name: str, value: Any, annotation: Any) -> None:
    """The checks of :func:`_check_numbers` on one value of a field annotated ``annotation``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if isinstance(value, float) and _annotated_int(annotation):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, (str, bytes, bool)) and _annotated_number(annotation):
        # (a bool is an int to Python: ``rows=true`` reached numpy as True)
        raise TypeError(f"{name} must be a number, got {value!r}")


def _annotated_number(annotation: Any) -> bool:
    """Whether a dataclass field's annotation is ``int`` or ``float`` (or either with ``None``)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = {part.strip() for part in text.replace("Optional[", "").rstrip("]").split("|")}
    return bool(parts & {"int", "float"}) and parts <= {"int", "float", "None"}


def _annotated_int(annotation: Any) -> bool:
    """Whether a dataclass field's annotation (a string under ``from __future__ import
    annotations``) is ``int`` or ``int | None``."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = {part.strip() for part in text.replace("Optional[", "").rstrip("]").split("|")}
    return "int" in parts and parts <= {"int", "None"}
