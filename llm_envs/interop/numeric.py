"""A numeric view of a text environment, for MARL libraries that only take arrays.

:class:`NumericView` is a PettingZoo AEC wrapper. It leaves the text environment underneath
untouched (``view.unwrapped`` is the text env, with its records, transcript and metrics) and
changes only what crosses the API:

====================  ==========================================================================
observation           the observation text (instruction, prompt and, with a move menu, the
                      numbered moves) encoded to ``Box(0, vocab_size - 1, (obs_length,), int32)``
                      by an encoder (:mod:`llm_envs.interop.encoding`; ``obs_dtype`` may make
                      it float); with a move menu and
                      ``mask_in="observation"`` it is ``Dict(observation=Box, action_mask=Box(0,
                      1, (n,), int8))``, PettingZoo classic's layout
action                ``actions="legal"``: ``Discrete(n)``, an index into the environment's legal
                      moves (:mod:`llm_envs.interop.hooks`); ``actions="candidates"``:
                      ``Discrete(n)`` into a generic menu (reference action + random ones);
                      ``actions="text"``: ``MultiDiscrete([vocab_size] * action_length)``, ids
                      decoded to text (padding ids are skipped)
infos                 the same four numbers for every agent at every step: ``turn``, ``acting``
                      (1 if the agent is to act now), ``episode_over`` and ``success`` (the
                      episode's success once it is over, else 0); plus ``action_mask`` with
                      ``mask_in="info"``
rewards, dones        unchanged
====================  ==========================================================================

Spaces are identical (equal, not shared objects) for every agent. The action mask of an agent that
is not to act now enables index 0 only (a placeholder no-op that is never played), so masked
samplers always have one valid choice. An index outside the current menu (out of range or masked
off) plays the empty action, which the environment scores like any malformed answer. A ``str``
action is played as is, in every mode.

Examples::

    env = NumericView(llm_envs.make("llm/Signalling-v0"))                 # Discrete + mask
    env = NumericView(llm_envs.make("llm/Debate-v0"), actions="text")     # token arrays
    env = NumericView(base, encoder=TokenizerEncoder.from_hf(tokenizer))  # a real tokenizer
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

from llm_envs.core.env import TextEnv
from llm_envs.interop.encoding import CharEncoder, TextEncoder, encode_fixed
from llm_envs.interop.hooks import MoveSet, candidate_actions, find_moves, is_simultaneous

__all__ = ["ACTION_MODES", "NumericView", "default_text"]

ACTION_MODES = ("legal", "candidates", "text")
#: Menu entries longer than this are cut in the observation's move list (not when played).
MENU_ENTRY_CHARS = 160


def default_text(observation: Mapping[str, str]) -> str:
    """The text that gets encoded: the role instruction, a blank line, the prompt."""
    return f"{observation.get('instruction', '')}\n\n{observation.get('prompt', '')}"


class NumericView(BaseWrapper):
    """Numeric observations, ``Discrete``/``MultiDiscrete`` actions and fixed-shape infos.

    Args:
        env: A text environment (a :class:`~llm_envs.core.env.TextEnv`, possibly wrapped).
        actions: ``"legal"``, ``"candidates"`` or ``"text"`` (see the module docstring).
        encoder: Text ↔ ids; default :class:`~llm_envs.interop.encoding.CharEncoder` (printable
            ASCII).
        obs_length: Ids per observation; longer texts keep their end (``keep="end"``).
        action_length: Ids per text action (``actions="text"``).
        num_actions: ``n`` of ``Discrete(n)``. Default: the environment's bound on its legal
            moves (``"legal"``) or ``num_candidates`` (``"candidates"``).
        num_candidates: Menu size of ``actions="candidates"``.
        mask_in: ``"observation"`` (Dict observation, read by Tianshou, TorchRL, PettingZoo's
            tests) or ``"info"`` (Box observation + ``infos[agent]["action_mask"]``, for
            SuperSuit's Box-only wrappers; TorchRL and PettingZoo's tests read it there too).
        show_moves: Append the numbered move list to the encoded text, so that a policy can see
            what each index means when menus change from step to step.
        text_of: ``observation dict -> str``, the text to encode (default :func:`default_text`).
        keep: ``"end"`` or ``"start"``: which part of a too-long text to keep.
        obs_dtype: dtype of the id array: ``np.int32`` (default) or a float type for libraries
            whose default networks do not cast (RLlib's default encoders need ``np.float32``).
    """

    def __init__(
        self,
        env: AECEnv,
        *,
        actions: str = "legal",
        encoder: TextEncoder | None = None,
        obs_length: int = 2048,
        action_length: int = 256,
        num_actions: int | None = None,
        num_candidates: int = 8,
        mask_in: str = "observation",
        show_moves: bool = True,
        text_of: Callable[[Mapping[str, str]], str] | None = None,
        keep: str = "end",
        obs_dtype: Any = np.int32,
    ):
        if not isinstance(getattr(env, "unwrapped", None), TextEnv):
            raise TypeError(f"NumericView wraps text environments (TextEnv), got {env!r}")
        super().__init__(env)
        if actions not in ACTION_MODES:
            raise ValueError(f"actions must be one of {ACTION_MODES}, got {actions!r}")
        if mask_in not in ("observation", "info"):
            raise ValueError(f"mask_in must be 'observation' or 'info', got {mask_in!r}")
        if obs_length < 1 or action_length < 1:
            raise ValueError("obs_length and action_length must be >= 1")
        self.actions = actions
        self.encoder: TextEncoder = encoder if encoder is not None else CharEncoder()
        self.obs_length = int(obs_length)
        self.action_length = int(action_length)
        self.mask_in = mask_in
        self.show_moves = show_moves
        self.keep = keep
        self.obs_dtype = np.dtype(obs_dtype)
        if self.obs_dtype.kind not in "iuf":
            raise ValueError(f"obs_dtype must be an integer or float dtype, got {self.obs_dtype}")
        self._text_of = text_of or default_text
        self._moves: MoveSet | None = None
        if actions == "legal":
            self._moves = find_moves(env)
            if self._moves is None:
                raise ValueError(
                    f"{type(env.unwrapped).__name__} cannot enumerate its moves: it has no "
                    "legal_actions()/max_legal_actions hook and no fallback is registered "
                    "(llm_envs.interop.hooks.register_moves). Use actions='candidates' or 'text'."
                )
            num_actions = num_actions or self._moves.max_actions(env.unwrapped)
        elif actions == "candidates":
            num_actions = num_actions or num_candidates
        self.num_actions = int(num_actions) if actions != "text" else 0
        if actions != "text" and self.num_actions < 1:
            raise ValueError(f"num_actions must be >= 1, got {self.num_actions}")
        self._simultaneous = is_simultaneous(env)
        self._rng = np.random.default_rng()
        self._menu_cache: dict[str, tuple[str, list[str]]] = {}
        # Infos are rebuilt once per reset/step and then served as the same objects, so that
        # ``last()[4] == env.infos[agent]`` holds even with an array (``action_mask``) inside.
        self._version = 0
        self._infos_version = -1
        self._infos: dict[str, dict[str, Any]] = {}
        self._observation_spaces = {a: self._make_observation_space() for a in self.possible_agents}
        self._action_spaces = {a: self._make_action_space() for a in self.possible_agents}

    # ------------------------------------------------------------------ spaces
    @property
    def uses_menu(self) -> bool:
        """Whether actions are indices into a move menu (``Discrete``)."""
        return self.actions != "text"

    def _make_observation_space(self) -> spaces.Space:
        tokens = spaces.Box(0, self.encoder.vocab_size - 1, (self.obs_length,), self.obs_dtype)
        if self.uses_menu and self.mask_in == "observation":
            mask = spaces.Box(0, 1, (self.num_actions,), np.int8)
            return spaces.Dict({"observation": tokens, "action_mask": mask})
        return tokens

    def _make_action_space(self) -> spaces.Space:
        if self.uses_menu:
            return spaces.Discrete(self.num_actions)
        return spaces.MultiDiscrete(np.full(self.action_length, self.encoder.vocab_size, np.int64))

    def observation_space(self, agent: str) -> spaces.Space:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_spaces[agent]

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        if seed is not None:
            # The wrapper's own generator (candidate menus); the env's generator is never touched.
            self._rng = np.random.default_rng([int(seed), 0x6E756D])
        self._menu_cache.clear()
        self._version += 1

    def observe(self, agent: str) -> np.ndarray | dict[str, np.ndarray]:
        text_observation = self.env.observe(agent)
        text = self._text_of(text_observation)
        menu = self.menu(agent) if self.uses_menu else None
        if menu and self.show_moves:
            text += "\n\nMoves:\n" + "\n".join(
                f"[{i}] {_one_line(move, MENU_ENTRY_CHARS)}" for i, move in enumerate(menu)
            )
        tokens = encode_fixed(self.encoder, text, self.obs_length, keep=self.keep)
        if self.obs_dtype != tokens.dtype:
            tokens = tokens.astype(self.obs_dtype)
        if self.uses_menu and self.mask_in == "observation":
            return {"observation": tokens, "action_mask": self.action_mask(agent)}
        return tokens

    def step(self, action: Any) -> None:
        agent = self.env.agent_selection
        self._version += 1
        if self.env.terminations.get(agent, False) or self.env.truncations.get(agent, False):
            self.env.step(None)  # the dead step
            return
        self.env.step(self.action_text(agent, action))

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        """Fixed-shape infos for the live agents (the text env's own are in ``unwrapped.infos``)."""
        if self._infos_version == self._version:
            return self._infos
        base: TextEnv = self.env.unwrapped
        over = base.episode_over
        success = float(base.episode_metrics()["success"]) if over else 0.0
        infos = {}
        for agent in self.env.infos:
            info: dict[str, Any] = {
                "turn": int(base.turn),
                "acting": int(self.is_acting(agent)),
                "episode_over": int(over),
                "success": success,
            }
            if self.uses_menu and self.mask_in == "info":
                info["action_mask"] = self.action_mask(agent)
            infos[agent] = info
        self._infos, self._infos_version = infos, self._version
        return infos

    # ------------------------------------------------------------------ menus and actions
    def is_acting(self, agent: str) -> bool:
        """Whether ``agent`` is to act now (in a simultaneous cycle: any live agent)."""
        env = self.env
        if agent not in env.agents or env.terminations[agent] or env.truncations[agent]:
            return False
        return self._simultaneous or agent == env.agent_selection

    def menu(self, agent: str) -> list[str]:
        """The action texts the indices of ``agent``'s ``Discrete`` action stand for now.

        Empty for an agent that is not to act now; ``[""]`` (the empty action) for an acting
        agent without any move.
        """
        if not self.uses_menu or not self.is_acting(agent):
            return []
        base = self.env.unwrapped
        if self.actions == "legal":
            assert self._moves is not None
            menu = list(self._moves.legal_actions(base, agent))
        else:
            # Candidates are random: draw once per distinct observation, so that the menu an agent
            # was shown is the menu its index is read against (also across a parallel cycle).
            key = repr(sorted(base.observe(agent).items()))
            cached = self._menu_cache.get(agent)
            if cached is not None and cached[0] == key:
                return cached[1]
            menu = candidate_actions(base, agent, self._rng, self.num_actions)
            self._menu_cache[agent] = (key, menu)
        if len(menu) > self.num_actions:
            raise ValueError(
                f"{type(base).__name__} listed {len(menu)} moves for {agent!r}, more than "
                f"num_actions={self.num_actions}; raise num_actions or fix max_legal_actions"
            )
        return menu or [""]

    def action_mask(self, agent: str) -> np.ndarray:
        """``int8`` mask over ``Discrete(n)``: the menu's entries, or index 0 for a non-acting agent."""
        mask = np.zeros(self.num_actions, dtype=np.int8)
        menu = self.menu(agent)
        mask[: max(len(menu), 1)] = 1
        return mask

    def action_text(self, agent: str, action: Any) -> str | None:
        """The text that ``action`` (an index, an id array, a ``str`` or ``None``) stands for."""
        if action is None or isinstance(action, str):
            return action
        array = np.asarray(action)
        if not np.issubdtype(array.dtype, np.integer):
            if not (np.issubdtype(array.dtype, np.floating) and np.all(array == np.round(array))):
                raise TypeError(f"expected integer actions, got {array.dtype} {array!r}")
            array = array.astype(np.int64)
        if self.uses_menu:
            if array.size != 1:
                raise TypeError(f"expected one index for Discrete({self.num_actions}), got {array!r}")
            index = int(array.reshape(()))
            menu = self.menu(agent)
            return menu[index] if 0 <= index < len(menu) else ""
        return self.encoder.decode(array.reshape(-1).tolist())

    def __str__(self) -> str:
        return f"NumericView<{self.env!s}, actions={self.actions}>"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
