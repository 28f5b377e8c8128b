#!/usr/bin/env bash
# GPU readiness in one go, on a CUDA machine: the CUDA tests, the real-KV replay and `kvsched bench`
# on the GPU, then one summary (fp16 logits bound measured, prefill time ratio, pool bytes, KV tier copies
# device <-> pinned host <-> disk and the tiered engine's round trip).
#
#   bash scripts/gpu-check.sh            # from the repository root; exits non-zero on any failure
#
# No venv and no network needed: it uses the machine's own Python with its preinstalled CUDA torch
# (never installs torch) and the repository on PYTHONPATH. Missing pure-Python needs (numpy, tqdm,
# pytest, hypothesis) are installed into a private folder from wheels in $GPU_CHECK_WHEELS if
# there are any, else from the package index.
#
# Environment overrides:
#   PYTHON                     interpreter with CUDA torch (default: .venv/bin/python if its torch sees a
#                              GPU, else python3)
#   GPU_CHECK_DEVICE           torch device (default cuda)
#   GPU_CHECK_OUT              folder for logs and JSON (default build/gpu-check)
#   GPU_CHECK_WHEELS           folder of wheels for missing needs (default .whl)
#   GPU_CHECK_REPLAY_REQUESTS  requests in the real-KV replay (default 400)
#   GPU_CHECK_BENCH            1 runs the whole `kvsched bench` too (default 1)
#   GPU_CHECK_BENCH_TIMEOUT    seconds allowed for it (default 300)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEVICE=${GPU_CHECK_DEVICE:-cuda}
OUT=${GPU_CHECK_OUT:-$ROOT/build/gpu-check}
WHEELS=${GPU_CHECK_WHEELS:-$ROOT/.whl}
REPLAY_REQUESTS=${GPU_CHECK_REPLAY_REQUESTS:-400}
RUN_BENCH=${GPU_CHECK_BENCH:-1}
BENCH_TIMEOUT=${GPU_CHECK_BENCH_TIMEOUT:-300}
mkdir -p "$OUT"
STARTED=$(date +%s)
FAILED=()

say() { printf '[gpu-check] %s\n' "$*"; }

if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    PYTHON=.venv/bin/python
  fi
fi
# One interpreter start for both questions: importing torch is most of a refusal's time.
torch_state=$("$PYTHON" -c "import torch; print(torch.__version__, torch.cuda.is_available())" 2>/dev/null)
if [ -z "$torch_state" ]; then
  say "FAILED: $PYTHON has no torch; install a CUDA build of torch first (this script never installs torch)"
  exit 2
fi
if [ "${torch_state##* }" != True ]; then
  say "FAILED: torch ${torch_state% *} in $PYTHON sees no CUDA GPU"
  exit 2
fi

# Pure-Python needs the lab and its tests import; torch is never among them.
missing=$("$PYTHON" - <<'EOF'
import importlib.util
need = {"numpy": "numpy", "tqdm": "tqdm", "pytest": "pytest", "hypothesis": "hypothesis"}
print(" ".join(dist for module, dist in need.items() if importlib.util.find_spec(module) is None))
EOF
)
SITE=$OUT/site
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "$missing" ]; then
  say "installing into $SITE: $missing"
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl || exit 2
  else
    "$PYTHON" -m pip install -q --target "$SITE" $missing || exit 2
  fi
  export PYTHONPATH="$ROOT:$SITE"
fi
export PYTHONDONTWRITEBYTECODE=1

say "torch $("$PYTHON" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))') via $PYTHON"

# 1. The CUDA tests: every test of the pool, the model and the engine, on the GPU where they pick it.
t0=$(date +%s)
"$PYTHON" -m pytest -p no:cacheprovider -rs tests/test_block_pool.py tests/test_model.py tests/test_engine.py tests/test_tiers.py \
  >"$OUT/cuda-tests.log" 2>&1
tests_rc=$?
tests_line=$(grep -E '(passed|failed|error)' "$OUT/cuda-tests.log" | tail -1)
cuda_skips=$(grep -c 'needs a CUDA GPU' "$OUT/cuda-tests.log")
[ "$tests_rc" -eq 0 ] || FAILED+=("CUDA tests")
[ "$cuda_skips" -eq 0 ] || FAILED+=("CUDA tests skipped ($cuda_skips)")
t_tests=$(( $(date +%s) - t0 ))

# 2. The real-KV replay, the logits bound and the prefill ratio on the GPU (one summary).
t0=$(date +%s)
"$PYTHON" -m kvsched_lab.cli.gpu_check --device "$DEVICE" --require-cuda --replay-requests "$REPLAY_REQUESTS" \
  --json "$OUT/gpu-check.json" >"$OUT/gpu-check.txt" 2>"$OUT/gpu-check.err"
[ $? -eq 0 ] || FAILED+=("real-KV check")
t_check=$(( $(date +%s) - t0 ))

# 3. The whole benchmark, its real-KV section on the GPU.
t_bench=0
if [ "$RUN_BENCH" = 1 ]; then
  t0=$(date +%s)
  timeout "$BENCH_TIMEOUT" "$PYTHON" -m kvsched_lab bench --device "$DEVICE" --json >"$OUT/bench.json" 2>"$OUT/bench.err"
  [ $? -eq 0 ] || FAILED+=("kvsched bench")
  t_bench=$(( $(date +%s) - t0 ))
fi

echo
echo "================ kvsched-lab GPU check ================"
echo "CUDA tests  ${tests_line:-no result} (${t_tests} s; CUDA-only tests skipped: $cuda_skips; log $OUT/cuda-tests.log)"
if [ -s "$OUT/gpu-check.txt" ]; then cat "$OUT/gpu-check.txt"; else echo "real-KV check: no output"; tail -5 "$OUT/gpu-check.err"; fi
echo "            (${t_check} s; JSON $OUT/gpu-check.json)"
if [ "$RUN_BENCH" = 1 ]; then
  "$PYTHON" - "$OUT/bench.json" "$t_bench" <<'EOF' || echo "bench       no result (see $OUT/bench.err)"
import json, sys
kv = json.load(open(sys.argv[1]))["real_kv"]
rows = ", ".join(f"{k} cached {v['time_ratio']:.2f} (FLOPs {v['flop_ratio_dense']:.2f})" for k, v in kv["hits"].items())
print(f"bench       kvsched bench real-KV on {kv['device']} {kv['dtype']}: {rows} ({sys.argv[2]} s; {sys.argv[1]})")
EOF
fi
echo "total       $(( $(date +%s) - STARTED )) s"
if [ ${#FAILED[@]} -eq 0 ]; then
  echo "RESULT      ok"
else
  echo "RESULT      FAILED: ${FAILED[*]}"
  exit 1
fi
