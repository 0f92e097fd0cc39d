#!/usr/bin/env bash
# The GPU path in one run, on a machine with a CUDA card (docs/benchmarks.md, "The GPU path"):
#
#   1. the CUDA tests (tests/trainers/test_cuda.py) and the Signalling learning test on CUDA;
#   2. benchmarks/train_step.py --gpu: AT-GRPO L1 and L2 (a LoRA adapter per agent), K = 4, bf16,
#      gradient checkpointing, on a random-weight model of Qwen3-1.7B's shape, each phase set
#      against the card's measured bandwidth and bf16 rate (GPU_8B=1 adds an L1 step of Qwen3-8B's);
#   3. benchmarks/decode_step.py: milliseconds per decode step, model.generate against the engine;
#   4. benchmarks/eval_throughput.py --device cuda: the HF engine on that model, batch 1 ... 64.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_check.sh
#
# Each part has its own time limit (seconds: TESTS_S, TRAIN_S and CASE_S per training case, DECODE_S,
# EVAL_S) so that a slow part cannot take the others' time; what was written so far stays. Everything
# printed goes to $OUT/log.txt; the tables and JSON beside it (six files in all). Needs torch (CUDA),
# transformers, peft, pytest and this project's pure dependencies (pettingzoo, gymnasium).
set -u
OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
MODEL=${MODEL_DIR:-/tmp/qwen3_1p7b_random}
LOG="$OUT/log.txt"
started=$(date +%s)
stamp() { echo "[$(( $(date +%s) - started )) s] $*" | tee -a "$LOG"; }

{
  date -u; nvidia-smi
  $PY -c "import torch, transformers, peft, pettingzoo; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'peft', peft.__version__, 'pettingzoo', pettingzoo.__version__)"
} >> "$LOG" 2>&1

stamp "tests"
timeout "${TESTS_S:-170}" $PY -m pytest -q -p no:cacheprovider -s -rs tests/trainers/test_cuda.py \
  "tests/trainers/test_learning_e2e.py::test_tiny_model_learns_signalling[at_grpo_L1-cuda]" >> "$LOG" 2>&1
stamp "tests: exit $?"

stamp "train_step"
extra=()
[ "${GPU_8B:-0}" = 1 ] && extra+=(--gpu-8b)
# 32 environments x K 4, 64 new tokens per decision: an L1 step of the 1.7B shape took ~20 s on an H200.
timeout "${TRAIN_S:-420}" $PY benchmarks/train_step.py --gpu --gpu-only "${extra[@]}" --steps 1 --envs 8 \
  --max-new-tokens 8 --gpu-model-dir "$MODEL" --case-timeout "${CASE_S:-180}" --out "$OUT" 2>&1 \
  | grep -v "Writing model shards\|Loading weights" >> "$LOG"
stamp "train_step: exit ${PIPESTATUS[0]}"

if [ ! -f "$MODEL/config.json" ]; then
  stamp "no model at $MODEL (train_step did not build it): skipping the decode and evaluation parts"
  exit 1
fi
bandwidth=$($PY -c "import json; print(json.load(open('$OUT/train_step.json'))['meta']['card']['bandwidth_bytes_s'])" 2>/dev/null)
stamp "decode_step"
timeout "${DECODE_S:-90}" $PY benchmarks/decode_step.py --model "$MODEL" --batch 1 64 --new-tokens 64 --repeats 1 \
  ${bandwidth:+--bandwidth "$bandwidth"} --out "$OUT/decode_step.json" >> "$LOG" 2>&1
stamp "decode_step: exit $?"

stamp "eval_throughput"
timeout "${EVAL_S:-120}" $PY benchmarks/eval_throughput.py --mode hf --device cuda --model "$MODEL" --batched-only \
  --episodes-per-slot 2 --concurrency 1 2 4 8 16 32 64 --repeats 1 --out "$OUT/eval_throughput.json" >> "$LOG" 2>&1
stamp "eval_throughput: exit $?"
