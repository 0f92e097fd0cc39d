"""A third party's two-seat game as ``llm-envs arena --import`` loads it: importing it registers
``llm/TestTwoSeatPlugin-v0`` (Kuhn poker's environment under a name of its own). The test that
imports it unregisters the id again, so it never joins the suites parametrized over the registry."""

from __future__ import annotations

import llm_envs.registry as registry

PLUGIN_ENV_ID = "llm/TestTwoSeatPlugin-v0"

registry.register_env(
    PLUGIN_ENV_ID,
    registry.entry("llm/KuhnPoker-v0").entry_point,
    agents=("player_0", "player_1"),
    task="a card game",
    description="a two-seat game registered by importing a module",
    kwargs=registry.entry("llm/KuhnPoker-v0").kwargs,
)
