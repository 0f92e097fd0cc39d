"""Imported by ``vf-eval`` (``load_environment(imports=[...])``) in its own process: registers the
runner tests' two-agent sums environment there (tests/runner/toy_envs.py)."""

from llm_envs.registry import register_env
from tests.runner.toy_envs import SUMS_ENV_ID

register_env(SUMS_ENV_ID, "tests.runner.toy_envs:SumsEnv", agents=("alice", "bob"), task="sums", description="test")
