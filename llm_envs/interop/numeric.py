"""A numeric view of a text environment, for MARL libraries that only take arrays.

:class:`NumericView` is a PettingZoo AEC wrapper. It leaves the text environment underneath
untouched (``view.unwrapped`` is the text env, with its records, transcript and metrics) and
changes only what crosses the API: observations become the encoded text
(:mod:`llm_envs.interop.encoding`), the environment's state tensor, or both, optionally with an
action mask in PettingZoo classic's ``Dict`` layout; actions become ``Discrete`` indices into the
fixed move catalog (the default where one exists), into the moves legal now, or into generic
candidates, or token arrays decoded to text; infos are the same four numbers for every agent
(``turn``, ``acting``, ``episode_over``, ``success``); rewards are unchanged. A masked-off index
plays the empty action, scored like any malformed answer; a ``str`` action is played as is.

docs/interop.md ("The numeric view") gives every option and its default.

Examples::

    env = NumericView(llm_envs.make("llm/Signalling-v0"))                  # fixed symbols + mask
    env = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=30),
                      observation="state")                                  # planes + U/D/L/R
    env = NumericView(llm_envs.make("llm/Debate-v0"), actions="text")      # token arrays
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

from llm_envs.core.env import TextEnv
from llm_envs.interop.encoding import CharEncoder, TextEncoder, encode_fixed, encode_head_and_tail
from llm_envs.interop.hooks import (
    Catalog,
    MoveSet,
    candidate_actions,
    find_catalog,
    find_moves,
    has_state_tensor,
    is_simultaneous,
    state_text,
)

log = logging.getLogger(__name__)

__all__ = ["ACTION_MODES", "KEEP_MODES", "OBSERVATION_MODES", "NumericView", "default_text"]

ACTION_MODES = ("fixed", "legal", "candidates", "text")
OBSERVATION_MODES = ("text", "state", "both")
KEEP_MODES = ("state", "end", "start")
#: Menu entries longer than this are cut in the observation's move list (not when played).
MENU_ENTRY_CHARS = 160


def default_text(observation: Mapping[str, str]) -> str:
    """The text that gets encoded: the role instruction, a blank line, the prompt."""
    return f"{observation.get('instruction', '')}\n\n{observation.get('prompt', '')}"


class NumericView(BaseWrapper):
    """Numeric observations, ``Discrete``/``MultiDiscrete`` actions and fixed-shape infos.

    Args:
        env: A text environment (a :class:`~llm_envs.core.env.TextEnv`, possibly wrapped).
        actions: ``"auto"`` (default: ``"fixed"`` where the environment has a move catalog,
            else ``"legal"`` where its moves can be enumerated), ``"fixed"``, ``"legal"``,
            ``"candidates"`` or ``"text"`` (see the module docstring).
        observation: ``"text"`` (default), ``"state"`` or ``"both"`` (see the module
            docstring); ``"state"`` and ``"both"`` need the environment's state-tensor hook.
        encoder: Text ↔ ids; default :class:`~llm_envs.interop.encoding.CharEncoder` (printable
            ASCII and the registered environments' symbols; a view whose observations hold a
            character outside the charset logs a warning once).
        obs_length: Ids per text observation.
        action_length: Ids per text action (``actions="text"``).
        num_actions: ``n`` of ``Discrete(n)``. Default: the catalog's length (``"fixed"``), the
            environment's bound on its legal moves (``"legal"``) or ``num_candidates``
            (``"candidates"``).
        num_candidates: Menu size of ``actions="candidates"``.
        mask_in: ``"observation"`` (Dict observation, read by Tianshou, TorchRL, PettingZoo's
            tests) or ``"info"`` (plain observation + ``infos[agent]["action_mask"]``, for
            SuperSuit's Box-only wrappers; TorchRL and PettingZoo's tests read it there too).
        show_moves: Append the numbered moves legal now to the encoded text (``[2] #### L``),
            so that a policy can see what each index means.
        text_of: ``observation dict -> str``, the text to encode (default :func:`default_text`).
        keep: Which part of a text longer than ``obs_length`` to keep: ``"state"`` (default:
            the environment's state text whole, then the end of the text; the end alone for
            environments without a state text), ``"end"`` or ``"start"``.
        obs_dtype: dtype of the id array: ``np.int32`` (default) or a float type for libraries
            whose default networks do not cast (RLlib's default encoders need ``np.float32``).
            State tensors are always ``float32``.
    """

    def __init__(
        self,
        env: AECEnv,
        *,
        actions: str = "auto",
        observation: str = "text",
        encoder: TextEncoder | None = None,
        obs_length: int = 2048,
        action_length: int = 256,
        num_actions: int | None = None,
        num_candidates: int = 8,
        mask_in: str = "observation",
        show_moves: bool = True,
        text_of: Callable[[Mapping[str, str]], str] | None = None,
        keep: str = "state",
        obs_dtype: Any = np.int32,
    ):
        if not isinstance(getattr(env, "unwrapped", None), TextEnv):
            raise TypeError(f"NumericView wraps text environments (TextEnv), got {env!r}")
        super().__init__(env)
        if actions not in (*ACTION_MODES, "auto"):
            raise ValueError(f"actions must be 'auto' or one of {ACTION_MODES}, got {actions!r}")
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, got {observation!r}")
        if keep not in KEEP_MODES:
            raise ValueError(f"keep must be one of {KEEP_MODES}, got {keep!r}")
        if mask_in not in ("observation", "info"):
            raise ValueError(f"mask_in must be 'observation' or 'info', got {mask_in!r}")
        if obs_length < 1 or action_length < 1:
            raise ValueError("obs_length and action_length must be >= 1")
        name = type(env.unwrapped).__name__
        if observation != "text" and not has_state_tensor(env):
            raise ValueError(
                f"{name} has no state tensor (state_space()/state_tensor(agent), "
                "llm_envs.interop.hooks); use observation='text'"
            )
        self.observation = observation
        self.encoder: TextEncoder = encoder if encoder is not None else CharEncoder()
        self.obs_length = int(obs_length)
        self.action_length = int(action_length)
        self.mask_in = mask_in
        self.show_moves = show_moves
        self.keep = keep
        self.obs_dtype = np.dtype(obs_dtype)
        if self.obs_dtype.kind not in "iuf":
            raise ValueError(f"obs_dtype must be an integer or float dtype, got {self.obs_dtype}")
        if self.obs_dtype.kind == "f" and self.encoder.vocab_size - 1 > 2 ** (np.finfo(self.obs_dtype).nmant + 1):
            # (float16 holds every integer only up to 2048: ids 40001 and 40002 were both 40000)
            raise ValueError(
                f"obs_dtype {self.obs_dtype} cannot hold every id below vocab_size {self.encoder.vocab_size} "
                "exactly (distinct texts would give one observation): use float32 or an integer dtype"
            )
        self._warned_unknown = False
        self._text_of = text_of or default_text

        self._catalog: Catalog | None = None
        self._moves: MoveSet | None = None
        if actions == "auto":
            actions = "fixed" if find_catalog(env) is not None else "legal"
            if actions == "legal" and find_moves(env) is None:
                raise ValueError(
                    f"{name} cannot enumerate its moves: it has no move catalog "
                    "(action_catalog()/action_mask()), no legal_actions()/max_legal_actions hook "
                    "and no registered fallback (llm_envs.interop.hooks). Use actions='candidates' "
                    "or 'text'."
                )
        self.actions = actions
        if actions == "fixed":
            self._catalog = find_catalog(env)
            if self._catalog is None:
                raise ValueError(
                    f"{name} has no fixed move catalog (action_catalog()/action_mask(), "
                    "llm_envs.interop.hooks). Use actions='legal', 'candidates' or 'text'."
                )
            if num_actions is not None and num_actions < len(self._catalog):
                raise ValueError(
                    f"num_actions={num_actions} is smaller than {name}'s catalog of "
                    f"{len(self._catalog)} moves"
                )
            num_actions = num_actions or len(self._catalog)
        elif actions == "legal":
            self._moves = find_moves(env)
            if self._moves is None:
                raise ValueError(
                    f"{name} cannot enumerate its moves: it has no legal_actions()/"
                    "max_legal_actions hook, no registered fallback "
                    "(llm_envs.interop.hooks.register_moves) and no move catalog. Use "
                    "actions='candidates' or 'text'."
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
        self._state_space = self._checked_state_space() if observation != "text" else None
        self._observation_spaces = {a: self._make_observation_space() for a in self.possible_agents}
        self._action_spaces = {a: self._make_action_space() for a in self.possible_agents}

    # ------------------------------------------------------------------ spaces
    @property
    def uses_menu(self) -> bool:
        """Whether actions are indices (``Discrete``): every mode but ``"text"``."""
        return self.actions != "text"

    def _checked_state_space(self) -> spaces.Box:
        space = self.env.unwrapped.state_space()
        if not isinstance(space, spaces.Box) or space.dtype != np.float32:
            raise TypeError(
                f"{type(self.env.unwrapped).__name__}.state_space() must be a float32 Box, got {space!r}"
            )
        return spaces.Box(space.low, space.high, space.shape, np.float32)

    def _make_observation_space(self) -> spaces.Space:
        tokens = spaces.Box(0, self.encoder.vocab_size - 1, (self.obs_length,), self.obs_dtype)
        features: spaces.Space
        if self.observation == "text":
            features = tokens
        elif self.observation == "state":
            features = self._state_space
        else:
            features = spaces.Dict({"text": tokens, "state": self._state_space})
        if self.uses_menu and self.mask_in == "observation":
            mask = spaces.Box(0, 1, (self.num_actions,), np.int8)
            return spaces.Dict({"observation": features, "action_mask": mask})
        return features

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

    def observe(self, agent: str) -> np.ndarray | dict[str, Any]:
        features: np.ndarray | dict[str, np.ndarray]
        if self.observation == "text":
            features = self.encode_text(agent)
        elif self.observation == "state":
            features = self.state_tensor(agent)
        else:
            features = {"text": self.encode_text(agent), "state": self.state_tensor(agent)}
        if self.uses_menu and self.mask_in == "observation":
            return {"observation": features, "action_mask": self.action_mask(agent)}
        return features

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

    # ------------------------------------------------------------------ observations
    def encode_text(self, agent: str) -> np.ndarray:
        """The ids of ``agent``'s observation text (plus the moves legal now), ``obs_length``
        long, cut as ``keep`` says."""
        text = self._text_of(self.env.observe(agent))
        if self.show_moves and self.uses_menu:
            shown = self._shown_moves(agent)
            if shown:
                text += "\n\nMoves:\n" + "\n".join(
                    f"[{i}] {_one_line(move, MENU_ENTRY_CHARS)}" for i, move in shown
                )
        head = state_text(self.env, agent) if self.keep == "state" else None
        if not self._warned_unknown and hasattr(self.encoder, "unknown_characters"):
            unknown = self.encoder.unknown_characters(text + (head or ""))
            if unknown:
                self._warned_unknown = True
                log.warning(
                    "%s: the encoder has one id for every character outside its charset, and the observations "
                    "hold such characters (%s): texts that differ only in them encode alike. Give "
                    "CharEncoder(charset) these characters, or use ByteEncoder() (lossless).",
                    type(self.env.unwrapped).__name__, " ".join(sorted(unknown)[:20]),
                )
        if head is not None:
            tokens = encode_head_and_tail(self.encoder, head, text, self.obs_length)
        else:
            tokens = encode_fixed(self.encoder, text, self.obs_length, keep="start" if self.keep == "start" else "end")
        return tokens.astype(self.obs_dtype, copy=False)

    def state_tensor(self, agent: str) -> np.ndarray:
        """The environment's state tensor for ``agent``, checked against ``state_space()``."""
        tensor = np.asarray(self.env.unwrapped.state_tensor(agent), dtype=np.float32)
        if self._state_space is not None and tensor.shape != self._state_space.shape:
            raise ValueError(
                f"{type(self.env.unwrapped).__name__}.state_tensor({agent!r}) has shape "
                f"{tensor.shape}, state_space() says {self._state_space.shape}"
            )
        return tensor

    def _shown_moves(self, agent: str) -> list[tuple[int, str]]:
        """``(index, label)`` of the moves enabled now: the catalog's names (fixed) or the menu."""
        if self.actions == "fixed":
            if not self.is_acting(agent):
                return []
            assert self._catalog is not None
            return [(int(i), self._catalog.names[i]) for i in np.flatnonzero(self._catalog.mask(agent))]
        return [(i, move) for i, move in enumerate(self.menu(agent)) if move]

    # ------------------------------------------------------------------ menus and actions
    def is_acting(self, agent: str) -> bool:
        """Whether ``agent`` is to act now (in a simultaneous cycle: any live agent)."""
        env = self.env
        if agent not in env.agents or env.terminations[agent] or env.truncations[agent]:
            return False
        return self._simultaneous or agent == env.agent_selection

    def menu(self, agent: str) -> list[str]:
        """The action texts the indices of ``agent``'s ``Discrete`` action stand for now.

        Empty for an agent that is not to act now. ``"fixed"``: one entry per catalog move, ``""``
        (the empty action) where it is not legal now. Menu modes: the menu, ``[""]`` for an
        acting agent without any move.
        """
        if not self.uses_menu or not self.is_acting(agent):
            return []
        base = self.env.unwrapped
        if self.actions == "fixed":
            assert self._catalog is not None
            mask = self._catalog.mask(agent)
            return [self._catalog.text(agent, i) if mask[i] else "" for i in range(len(mask))]
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
        """``int8`` mask over ``Discrete(n)``: the moves legal now, or index 0 alone for an agent
        that is not to act now (or has no legal move)."""
        mask = np.zeros(self.num_actions, dtype=np.int8)
        if self.actions == "fixed":
            if self.is_acting(agent):
                assert self._catalog is not None
                legal = self._catalog.mask(agent)
                mask[: len(legal)] = legal
            if not mask.any():
                mask[0] = 1
            return mask
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
        if not self.uses_menu:
            return self.encoder.decode(array.reshape(-1).tolist())
        if array.size != 1:
            raise TypeError(f"expected one index for Discrete({self.num_actions}), got {array!r}")
        index = int(array.reshape(()))
        if self.actions == "fixed":
            assert self._catalog is not None
            if not (self.is_acting(agent) and 0 <= index < len(self._catalog)):
                return ""
            return self._catalog.text(agent, index) if self._catalog.mask(agent)[index] else ""
        menu = self.menu(agent)
        return menu[index] if 0 <= index < len(menu) else ""

    def __str__(self) -> str:
        return f"NumericView<{self.env!s}, actions={self.actions}, observation={self.observation}>"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
