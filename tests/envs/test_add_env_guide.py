"""The add-an-environment guide's promise (docs/architecture.md, "How to add an environment"):
the contract suites catch an environment that breaks the contract.

A newcomer followed the guide with a two-action parity game and broke it eleven ways; three
broken variants passed every contract test (a reference wrong on even numbers, a claim shared by
every clone, a reset option read but not declared). Here the game and its broken variants are
registered one at a time, only while a test runs (they never join the suites parametrized over
the registry), and played through the contract tests themselves: the correct game passes them,
and each variant fails the test that names the property it breaks, for that reason.
"""

from __future__ import annotations

import contextlib
import copy
import random
import re
import warnings
from typing import Any, ClassVar

import numpy as np
import pytest

from llm_envs.core.env import TextEnv
from tests.envs import test_contract, test_reward_contract
from tests.envs.helpers import registered_for_a_test

TELLER, CHECKER = "teller", "checker"


class ParityEnv(TextEnv):
    """A teller sees a number and claims its parity ("even" / "odd"); a checker answers "agree" or
    "disagree"; both earn 1 when the claim is right and the checker agrees, -0.5 for text that
    says neither (the newcomer's game, its rules inlined)."""

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "parity_v0"}
    reset_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, render_mode: str | None = None) -> None:
        super().__init__((TELLER, CHECKER), render_mode=render_mode)
        self._n = 0
        self._claim: str | None = None
        self._teller_record = None
        self._ok = False

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._n = int(self.np_random.integers(0, 100))
        self._claim = None
        self._teller_record = None
        self._ok = False
        return TELLER

    @staticmethod
    def _word(text: str, words: tuple[str, ...]) -> str | None:
        return next((w for w in (text or "").lower().split() if w in words), None)

    def _truth(self) -> str:
        return "even" if self._n % 2 == 0 else "odd"

    def _apply_action(self, agent: str, action: str) -> str | None:
        if agent == TELLER:
            claim = self._word(action, ("even", "odd"))
            record = self._add_record(agent, action, parsed={"claim": claim}, format_ok=claim is not None)
            if claim is None:
                self._credit(record, "format", -0.5)
            self._claim, self._teller_record = claim, record
            return CHECKER
        verdict = self._word(action, ("agree", "disagree"))
        record = self._add_record(agent, action, parsed={"verdict": verdict}, format_ok=verdict is not None)
        if verdict is None:
            self._credit(record, "format", -0.5)
        self._ok = verdict == "agree" and self._claim == self._truth()
        self._credit(record, "team", float(self._ok))
        self._credit(self._teller_record, "team", float(self._ok))
        self.turn += 1
        self._end_episode()
        return None

    def _instruction(self, agent: str) -> str:
        if agent == TELLER:
            return "You are the teller. Say whether the number is even or odd."
        return "You are the checker. Answer agree or disagree with the teller's claim."

    def _prompt(self, agent: str) -> str:
        if self._episode_over:
            return "The game is over."
        if agent == TELLER:
            return "Waiting." if self._teller_record is not None else f"Number: {self._n}"
        if self._teller_record is None:
            return "Waiting for the teller."
        return f"Number: {self._n}. The teller claims: {self._claim}"

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": float(self._ok)}

    def reference_action(self, agent: str) -> str:
        if agent == TELLER:
            return self._truth()
        return "agree" if self._claim == self._truth() else "disagree"

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        return str(rng.choice(["even", "odd"] if agent == TELLER else ["agree", "disagree"]))

    def reward_bounds(self, agent: str) -> tuple[float, float]:
        return (-0.5, 1.0)


# The newcomer's three variants that passed every contract test ------------------------------
class AlwaysOddReference(ParityEnv):
    """The reference teller always says "odd": wrong on every even number (seeds 0, 1, 2 draw
    odd numbers)."""

    def reference_action(self, agent: str) -> str:
        return "odd" if agent == TELLER else super().reference_action(agent)


class SharedClaim(ParityEnv):
    """The claim lives in a class-level dict, shared by every instance and clone."""

    _box: ClassVar[dict[str, Any]] = {}

    @property
    def _claim(self) -> str | None:
        return self._box.get("claim")

    @_claim.setter
    def _claim(self, value: str | None) -> None:
        self._box["claim"] = value


class UndeclaredOption(ParityEnv):
    """Plays ``options["number"]`` but declares ``reset_options = ()``: reset warns that the
    option is not read, and reads it."""

    def _start_episode(self, options: dict[str, Any]) -> str:
        first = super()._start_episode(options)
        self._n = int(options.get("number", self._n))
        return first


# Further broken variants, one per property the guide says the suites check ------------------
class DeclaredUnreadOption(ParityEnv):
    """Declares a ``number`` option it never reads: reset accepts it silently and ignores it."""

    reset_options = ("number",)


class OptionsChangeTheEpisode(ParityEnv):
    """Any option, declared or not, moves the number (``if options:`` reads no key)."""

    def _start_episode(self, options: dict[str, Any]) -> str:
        first = super()._start_episode(options)
        self._n += len(options)
        return first


class ShallowClone(ParityEnv):
    """``clone`` copies the object but shares its dicts and lists (records, rewards, ...)."""

    def clone(self) -> ParityEnv:
        return copy.copy(self)


class ClonedWithoutItsGenerator(ParityEnv):
    """``clone`` gives the copy a fresh generator: its next episode without a seed differs."""

    def clone(self) -> ParityEnv:
        twin = super().clone()
        twin.np_random = np.random.default_rng()
        return twin


class SuccessWhateverHappens(ParityEnv):
    """``success`` is 1 whatever the agents do."""

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": 1.0}


class TwoRecordsForATellersAction(ParityEnv):
    """The teller's action adds a second (bookkeeping) record: records are not one per action,
    though their sums still agree with PettingZoo's rewards."""

    def _apply_action(self, agent: str, action: str) -> str | None:
        following = super()._apply_action(agent, action)
        if agent == TELLER:
            self._add_record(agent, "(claim noted)", parsed={})
        return following


class DrawsFromTheGlobalGenerator(ParityEnv):
    """Draws from Python's global generator at reset (unused: the episode is still the seed's),
    moving the caller's random stream."""

    def _start_episode(self, options: dict[str, Any]) -> str:
        random.random()
        return super()._start_episode(options)


class MalformedRandomTeller(ParityEnv):
    """The random teller answers "maybe": a format penalty, not "a random but well-formed
    action"."""

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        return "maybe" if agent == TELLER else super().random_action(agent, rng)


@contextlib.contextmanager
def registered(cls: type):
    ids = registered_for_a_test(f"llm/Parity{cls.__name__}-v0", f"{__name__}:{cls.__name__}", (TELLER, CHECKER),
                                "procedural numbers", "a test's parity game")
    try:
        yield next(ids)
    finally:
        ids.close()


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


#: The contract tests a correct environment passes and that the variants below break.
STRENGTHENED = [
    test_contract.test_clone_is_independent,
    test_contract.test_same_seed_same_episode_whatever_the_global_rngs,
    test_contract.test_record_sums_equal_pettingzoo_rewards,
    test_contract.test_reference_agents_solve_and_random_agents_do_worse,
    test_contract.test_random_actions_are_well_formed,
    test_contract.test_reset_reads_the_options_it_declares_and_no_other,
    test_contract.test_reset_says_which_options_it_does_not_read,
]


@pytest.mark.parametrize("test", STRENGTHENED, ids=lambda test: test.__name__)
def test_the_correct_game_passes(test):
    with registered(ParityEnv) as env_id:
        test(env_id)


#: variant -> (the contract test that must fail, what its failure says).
BROKEN = {
    AlwaysOddReference: (test_contract.test_reference_agents_solve_and_random_agents_do_worse,
                         r"reference agents failed on seeds \{"),
    SharedClaim: (test_contract.test_clone_is_independent, r"stepping the original .* changed its clone's \['observations'"),
    UndeclaredOption: (test_contract.test_reset_reads_the_options_it_declares_and_no_other,
                       r"reads reset option\(s\) \['number'\] but reset_options declares \[\]"),
    DeclaredUnreadOption: (test_contract.test_reset_reads_the_options_it_declares_and_no_other,
                           r"declares \['number'\], which the episode never looks up"),
    OptionsChangeTheEpisode: (test_contract.test_reset_reads_the_options_it_declares_and_no_other,
                              r"an undeclared reset option changed the episode's \['records'"),
    ShallowClone: (test_contract.test_clone_is_independent, r"stepping a clone .* changed the original's \["),
    ClonedWithoutItsGenerator: (test_contract.test_clone_is_independent,
                                r"decision point 0: a clone differs from its original in \['generator'\]"),
    SuccessWhateverHappens: (test_contract.test_reference_agents_solve_and_random_agents_do_worse,
                             "random agents solve as often as the reference"),
    TwoRecordsForATellersAction: (test_contract.test_record_sums_equal_pettingzoo_rewards,
                                  "3 records of actions for 2 actions played"),
    DrawsFromTheGlobalGenerator: (test_contract.test_same_seed_same_episode_whatever_the_global_rngs,
                                  "changed the global random states"),
    MalformedRandomTeller: (test_contract.test_random_actions_are_well_formed, r"random actions not well formed: \[\('teller', 'maybe'\)"),
}


@pytest.mark.parametrize("variant", list(BROKEN), ids=lambda cls: cls.__name__)
def test_each_broken_variant_fails_the_test_of_what_it_breaks(variant):
    test, message = BROKEN[variant]
    with registered(variant) as env_id, pytest.raises(AssertionError, match=message):
        test(env_id)


def test_a_missing_page_says_which_page_to_write(tmp_path):
    # Step 4 of the guide ran the suites before step 5 wrote the page: a raw FileNotFoundError.
    missing = tmp_path / "parity.md"
    with pytest.raises(AssertionError, match=re.escape(f"docs/envs/{missing.name} does not exist: write it")):
        test_reward_contract.test_every_environment_page_states_its_reward_bounds(str(missing))
