"""OpenSpiel games as text environments: :class:`~llm_envs.envs.openspiel.env.OpenSpielEnv`.

The curated games are registered (``llm/TicTacToe-v0``, ``llm/KuhnPoker-v0``, ...; see
:mod:`llm_envs.envs.openspiel.presets`); any other game is one call away with
:func:`llm_envs.openspiel`. ``pyspiel`` is imported only when an environment is created.
"""
