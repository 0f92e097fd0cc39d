from tests.agents.chat_server import chat_server  # noqa: F401  (fixture)
from tests.runner.toy_envs import sums_env_id  # noqa: F401  (fixture)
