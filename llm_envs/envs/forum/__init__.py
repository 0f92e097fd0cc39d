"""CoMAS forum discussion: ``llm/Forum-v0`` (see :mod:`llm_envs.envs.forum.env`)."""
