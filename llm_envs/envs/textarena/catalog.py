"""The TextArena games (version 0.7.4) that run here, and those that do not, with the reason.

Each of TextArena's 95 base games was made with ``textarena.make(id + "-raw")``, reset and played
offline (no network, no API keys) on Python 3.11 by the legal-move agents of
:mod:`llm_envs.envs.textarena.env`. ``GAMES`` lists the 69 that run (31 registered as
``textarena/<id>``; the rest through :func:`llm_envs.textarena`, with the reason they are not
registered); ``SKIPPED`` the 26 that do not, and why. See ``docs/envs/textarena.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GAMES", "REGISTERED", "SKIPPED", "TextArenaGame"]


@dataclass(frozen=True)
class TextArenaGame:
    """A TextArena game that runs offline here.

    Attributes:
        id: TextArena's id.
        players: Default number of players.
        registered: Registered as ``textarena/<id>`` (it passes the contract suite); the others
            are available through :func:`llm_envs.textarena`.
        note: Why a runnable game is not registered.
    """

    id: str
    players: int
    registered: bool = True
    note: str = ""


_NO_MOVE = ("the built-in legal-move player finds no valid move in the game's messages (moves must be "
            "composed, e.g. coordinates), so there is no reference agent")
_SLOW = "its legal-move agents need many trial moves per turn over long games (too slow for the contract suite)"
_UNRELIABLE = "the built-in legal-move player does not finish every episode (it loops or runs out of moves)"

GAMES: dict[str, TextArenaGame] = {
    "2048-v0": TextArenaGame("2048-v0", 1, registered=False, note=_UNRELIABLE),
    "Alquerque-v0": TextArenaGame("Alquerque-v0", 2, registered=False, note=_NO_MOVE),
    "Bandit-v0": TextArenaGame("Bandit-v0", 1, registered=False, note=_NO_MOVE),
    "Battleship-v0": TextArenaGame("Battleship-v0", 2, registered=False, note=_NO_MOVE),
    "Blackjack-v0": TextArenaGame("Blackjack-v0", 1),
    "Breakthrough-v0": TextArenaGame("Breakthrough-v0", 2, registered=False, note=_NO_MOVE),
    "Briscola-v0": TextArenaGame("Briscola-v0", 2, registered=False, note=_SLOW),
    "Chopsticks-v0": TextArenaGame("Chopsticks-v0", 2),
    "ColonelBlotto-v0": TextArenaGame("ColonelBlotto-v0", 2, registered=False, note=_NO_MOVE),
    "ConnectFour-v0": TextArenaGame("ConnectFour-v0", 2),
    "Crosswords-v0": TextArenaGame("Crosswords-v0", 1, registered=False, note=_NO_MOVE),
    "Crusade-v0": TextArenaGame("Crusade-v0", 2),
    "FifteenPuzzle-v0": TextArenaGame("FifteenPuzzle-v0", 1, registered=False, note=_UNRELIABLE),
    "FrozenLake-v0": TextArenaGame("FrozenLake-v0", 1, registered=False, note=_UNRELIABLE),
    "GameOfPureStrategy-v0": TextArenaGame("GameOfPureStrategy-v0", 2),
    "GermanWhist-v0": TextArenaGame("GermanWhist-v0", 2, registered=False, note=_SLOW),
    "Golf-v0": TextArenaGame("Golf-v0", 2, registered=False, note=_SLOW),
    "GuessTheNumber-v0": TextArenaGame("GuessTheNumber-v0", 1, registered=False, note=_UNRELIABLE),
    "HighSociety-v0": TextArenaGame("HighSociety-v0", 2, registered=False, note=_UNRELIABLE),
    "IndianPoker-v0": TextArenaGame("IndianPoker-v0", 2),
    "IteratedMatchingPennies-v0": TextArenaGame("IteratedMatchingPennies-v0", 2),
    "IteratedPrisonersDilemma-v0": TextArenaGame("IteratedPrisonersDilemma-v0", 2),
    "IteratedRockPaperScissors-v0": TextArenaGame("IteratedRockPaperScissors-v0", 2),
    "IteratedTwoThirdsAverage-v0": TextArenaGame("IteratedTwoThirdsAverage-v0", 2),
    "IteratedUltimatumGame-v0": TextArenaGame("IteratedUltimatumGame-v0", 2),
    "KuhnPoker-v0": TextArenaGame("KuhnPoker-v0", 2),
    "LiarsDice-v0": TextArenaGame("LiarsDice-v0", 2),
    "LightsOut-v0": TextArenaGame("LightsOut-v0", 1, registered=False, note=_NO_MOVE),
    "LinesOfAction-v0": TextArenaGame("LinesOfAction-v0", 2, registered=False, note=_NO_MOVE),
    "LogicPuzzle-v0": TextArenaGame("LogicPuzzle-v0", 1, registered=False, note=_NO_MOVE),
    "MarketEntryGame-v0": TextArenaGame("MarketEntryGame-v0", 2),
    "Mastermind-v0": TextArenaGame("Mastermind-v0", 1, registered=False, note=_NO_MOVE),
    "MemoryGame-v0": TextArenaGame("MemoryGame-v0", 2),
    "Minesweeper-v0": TextArenaGame("Minesweeper-v0", 1, registered=False, note=_NO_MOVE),
    "NewRecruit-v0": TextArenaGame("NewRecruit-v0", 2, registered=False, note=_NO_MOVE),
    "Nim-v0": TextArenaGame("Nim-v0", 2),
    "Othello-v0": TextArenaGame("Othello-v0", 2, registered=False, note=_SLOW),
    "PegJump-v0": TextArenaGame("PegJump-v0", 1, registered=False, note=_NO_MOVE),
    "PigDice-v0": TextArenaGame("PigDice-v0", 2, registered=False, note=_SLOW),
    "Poker-v0": TextArenaGame("Poker-v0", 2, registered=False, note=_SLOW),
    "PublicGoodsGame-v0": TextArenaGame("PublicGoodsGame-v0", 2),
    "QuantumTicTacToe-v0": TextArenaGame("QuantumTicTacToe-v0", 2, registered=False, note=_NO_MOVE),
    "RushHour-v0": TextArenaGame("RushHour-v0", 1, registered=False, note=_NO_MOVE),
    "SantoriniBaseFixed-v0": TextArenaGame("SantoriniBaseFixed-v0", 2, registered=False, note=_SLOW),
    "SecretMafia-v0": TextArenaGame("SecretMafia-v0", 6),
    "Secretary-v0": TextArenaGame("Secretary-v0", 1),
    "Set-v0": TextArenaGame("Set-v0", 1, registered=False, note=_SLOW),
    "SettlersOfCatan-v0": TextArenaGame("SettlersOfCatan-v0", 4, registered=False, note=_SLOW),
    "SimpleBlindAuction-v0": TextArenaGame("SimpleBlindAuction-v0", 2),
    "SimpleNegotiation-v0": TextArenaGame("SimpleNegotiation-v0", 2),
    "SimpleTak-v0": TextArenaGame("SimpleTak-v0", 2),
    "Snake-v0": TextArenaGame("Snake-v0", 2),
    "Sokoban-v0": TextArenaGame("Sokoban-v0", 1, registered=False, note=_SLOW),
    "SpiteAndMalice-v0": TextArenaGame("SpiteAndMalice-v0", 2, registered=False, note=_SLOW),
    "Stratego-v0": TextArenaGame("Stratego-v0", 2, registered=False, note=_SLOW),
    "Sudoku-v0": TextArenaGame("Sudoku-v0", 1, registered=False, note=_SLOW),
    "Surround-v0": TextArenaGame("Surround-v0", 2),
    "Taboo-v0": TextArenaGame("Taboo-v0", 4),
    "Tak-v0": TextArenaGame("Tak-v0", 2, registered=False, note=_NO_MOVE),
    "ThreeCardMonte-v0": TextArenaGame("ThreeCardMonte-v0", 1),
    "ThreePlayerGOPS-v0": TextArenaGame("ThreePlayerGOPS-v0", 3, registered=False, note=_SLOW),
    "ThreePlayerIPD-v0": TextArenaGame("ThreePlayerIPD-v0", 3),
    "ThreePlayerTicTacToe-v0": TextArenaGame("ThreePlayerTicTacToe-v0", 3),
    "TicTacToe-v0": TextArenaGame("TicTacToe-v0", 2),
    "TowerOfHanoi-v0": TextArenaGame("TowerOfHanoi-v0", 1, registered=False, note=_NO_MOVE),
    "TruthAndDeception-v0": TextArenaGame("TruthAndDeception-v0", 2),
    "TwoDollar-v0": TextArenaGame("TwoDollar-v0", 2, registered=False, note=_NO_MOVE),
    "UltimateTicTacToe-v0": TextArenaGame("UltimateTicTacToe-v0", 2, registered=False, note=_SLOW),
    "WildTicTacToe-v0": TextArenaGame("WildTicTacToe-v0", 2),
}

_NLTK = "needs NLTK's 'words' corpus, a download (nltk.download('words'))"
_API = "needs an LLM judge or opponent behind OpenRouter (an API key and the network)"
_PY312 = "its module does not parse on Python < 3.12 (nested f-string quotes) in TextArena 0.7.4"

#: Games not registered, and why.
SKIPPED: dict[str, str] = {
    "BabyAiText-v0": "needs gym and minigrid (not dependencies of llm-envs)",
    "CharacterConclave-v0": "fails at reset in TextArena 0.7.4 (TypeError in State.add_observation)",
    "Checkers-v0": _PY312,
    "Chess-v0": _PY312,
    "Codenames-v0": _NLTK,
    "Countdown-v0": "fails at reset in TextArena 0.7.4 (TypeError joining its number list)",
    "Cryptarithm-v0": "fails at reset in TextArena 0.7.4 (TypeError joining its puzzle)",
    "Debate-v0": _API,
    "DontSayIt-v0": _NLTK,
    "GuessWho-v0": _API,
    "Hangman-v0": _NLTK,
    "IteratedStagHunt-v0": _PY312,
    "Klondike-v0": _PY312,
    "LetterAuction-v0": _NLTK,
    "ReverseTicTacToe-v0": _PY312,
    "ScenarioPlanning-v0": _API,
    "ScorableGames-v0": "its game descriptions are missing from the TextArena 0.7.4 wheel",
    "Slitherlink-v0": "fails at reset in TextArena 0.7.4 (TypeError joining its grid)",
    "SpellingBee-v0": _NLTK,
    "TwentyQuestions-v0": _API,
    "UltimateTexasHoldem-v0": _PY312,
    "UsedCarNegotiation-v0": "its instruction files are missing from the TextArena 0.7.4 wheel",
    "WordChains-v0": _NLTK,
    "WordLadder-v0": _NLTK,
    "WordSearch-v0": _NLTK,
    "Wordle-v0": _NLTK,
}

#: The games registered as ``textarena/<id>``.
REGISTERED: tuple[str, ...] = tuple(g for g, entry in GAMES.items() if entry.registered)
