from tests.runner.toy_envs import sums_env_id  # noqa: F401  (fixture)
