"""The core packages stay light: importing them (and making every environment) loads no torch."""

import subprocess
import sys

HEAVY = ("torch", "transformers", "peft", "vllm", "datasets", "docker", "ray", "openenv", "uvicorn")


def test_llm_envs_and_sandboxes_import_without_heavy_packages():
    code = (
        "import sys, llm_envs, sandboxes, llm_envs.interop, llm_envs.runner, llm_envs.cli\n"
        "import llm_envs.distributed.evaluation, llm_envs.distributed.cluster\n"
        "for env_id in llm_envs.env_ids():\n"
        "    llm_envs.make(env_id)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"heavy modules imported: {result.stdout}"


def test_pettingzoo_registry_knows_every_environment_after_import():
    import pettingzoo

    import llm_envs

    for env_id in llm_envs.env_ids():
        env = pettingzoo.make("aec", env_id)
        assert env.metadata["name"]
