"""TextArena games as text environments: :class:`~llm_envs.envs.textarena.env.TextArenaEnv`."""
