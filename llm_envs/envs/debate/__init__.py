"""MAPoRL collaborative debate: ``llm/Debate-v0`` (see :mod:`llm_envs.envs.debate.env`)."""
