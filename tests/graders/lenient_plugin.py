"""A third party's package as ``llm-envs audit --import`` loads it: importing it registers
``llm/TestLenientPlugin-v0`` (the lenient grader of ``lenient_env``). The test that imports it
unregisters the id again, so it never joins the suites parametrized over the registry."""

from __future__ import annotations

import llm_envs.registry as registry

PLUGIN_ENV_ID = "llm/TestLenientPlugin-v0"

registry.register_env(
    PLUGIN_ENV_ID,
    "tests.graders.lenient_env:LenientEnv",
    agents=("solver",),
    task="sums",
    description="a lenient grader registered by importing a module",
)
