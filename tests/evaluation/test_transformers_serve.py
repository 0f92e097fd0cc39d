"""The same failure checks against a real third-party OpenAI-compatible server: Hugging Face
``transformers serve`` with a tiny random-weight model built here (llama architecture: with
qwen3, ``transformers serve`` applies its Qwen reply parser).

A wrong model name must stop the run at once with the server's own message; a server killed
mid-run must leave the run incomplete (exit 3) with no incomplete episode written as finished;
and ``--resume`` against the restarted server must complete the run with every episode exactly
once and no failed call.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from llm_envs.cli import EXIT_INCOMPLETE, EXIT_USAGE, main
from llm_envs.episodes import load_episodes
from tests.optional import skip_or_fail

_NEEDED = ("torch", "transformers", "fastapi", "uvicorn", "openai")
_MISSING = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.slow]
if _MISSING:
    skip_or_fail("serve", f"`transformers serve` needs {', '.join(_MISSING)} (pip install -e '.[test]')")

EPISODES = 24
STEPS = 4  # SumsEnv: 2 rounds x 2 agents


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TransformersServer:
    """``transformers serve MODEL`` in its own process group on 127.0.0.1:PORT."""

    def __init__(self, model: Path, port: int, log: Path) -> None:
        self.model, self.port, self.log_path = model, port, log
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 180.0) -> None:
        command = [
            sys.executable,
            "-c",
            "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; "
            "sys.exit(main())",
            "serve",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"transformers serve did not start in {timeout_s}s: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, not a clean shutdown."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from llm_trainers.tiny import build_tiny_model
    from tests.runner.toy_envs import SumsEnv

    texts = [str(i) for i in range(200)]
    for seed in range(20):
        env = SumsEnv()
        env.reset(seed=seed)
        observation = env.observe("alice")
        texts += [observation["instruction"], observation["prompt"]]
    return build_tiny_model(
        tmp_path_factory.mktemp("tiny-llama"),
        texts,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        arch="llama",
    )


def _eval(capsys, env_id, out, agents_file, *extra):
    status = main(
        [
            "eval",
            env_id,
            "--agents-file",
            str(agents_file),
            "--episodes",
            str(EPISODES),
            "--concurrency",
            "2",
            "--max-tokens",
            "4",
            "--temperature",
            "0",
            "--max-consecutive-failures",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--no-plot",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return status, captured.err


def _agents_file(path: Path, base_url: str, model: str) -> Path:
    path.write_text(
        f"default:\n  spec: openai:{base_url}@{model}\n  max_retries: 1\n  backoff_initial_s: 0.05\n  timeout_s: 60\n"
    )
    return path


def _whole(out: Path) -> list:
    episodes = load_episodes(out / "episodes.jsonl")  # strict: duplicates and corruption raise
    for episode in episodes:
        assert len(episode.steps) == STEPS and len(episode.records) == STEPS
        assert all(step["error"] is None and step["completion_tokens"] > 0 for step in episode.steps)
    return episodes


def test_transformers_serve_crash_wrong_model_and_resume(capsys, tmp_path, sums_env_id, tiny_llama):
    server = TransformersServer(tiny_llama, _free_port(), tmp_path / "serve.log")
    server.start()
    try:
        # A wrong model name: the server's own message, exit 2, nothing written.
        wrong = _agents_file(tmp_path / "wrong.yaml", server.base_url, "no-such-model")
        status, err = _eval(capsys, sums_env_id, tmp_path / "wrong", wrong)
        assert status == EXIT_USAGE and "HTTP 400" in err and "no-such-model" in err, err
        assert load_episodes(tmp_path / "wrong" / "episodes.jsonl") == []

        # The server is killed mid-run.
        out = tmp_path / "run"
        agents = _agents_file(tmp_path / "agents.yaml", server.base_url, str(tiny_llama))
        episodes_file = out / "episodes.jsonl"

        def kill_when_two_episodes_are_on_disk() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if episodes_file.exists() and len(episodes_file.read_bytes().splitlines()) >= 2:
                    server.kill()
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_when_two_episodes_are_on_disk, daemon=True)
        killer.start()
        status, err = _eval(capsys, sums_env_id, out, agents)
        killer.join(5)
        assert status == EXIT_INCOMPLETE, err
        assert "episodes are incomplete" in err and "connection error" in err and "--resume" in err
        finished = _whole(out)
        assert 2 <= len(finished) < EPISODES
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "incomplete" and summary["episodes"] == len(finished)

        # Back up on the same address: --resume completes the run.
        server.start()
        status, err = _eval(capsys, sums_env_id, out, agents, "--resume")
        assert status == 0, err
        episodes = _whole(out)
        assert sorted(e.index for e in episodes) == list(range(EPISODES))
        assert len(episodes_file.read_text().splitlines()) == EPISODES
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["infrastructure"]["failed_calls"] == 0
        assert summary["episodes_resumed"] == len(finished)
        # The model's text is random: whatever it wrote is its result, failures never are.
        records = [r for e in episodes for r in e.records]
        assert summary["format_error_rate"]["alice"]["errors"] == sum(
            1 for r in records if r["agent"] == "alice" and not r["format_ok"]
        )
    finally:
        server.kill()
