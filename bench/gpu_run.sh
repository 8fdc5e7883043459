#!/usr/bin/env bash
# The GPU run (issue 32, item 5) in one command, on a machine with an NVIDIA GPU and this checkout:
#   bash bench/gpu_run.sh            (or `make gpu`; OUT=dir puts the results there, PYTHON=... picks the interpreter)
# It installs nothing: it runs .venv's python (`make setup`) or $PYTHON, which needs the project's dependencies,
# cuda-python (pip install -e '.[cuda]') and, for the torch columns, a CUDA build of torch. Each step has a time
# limit, so that the whole run ends within 8 minutes:
#   1. which GPU, or why none: without one it says so in one line and exits 2, running nothing else
#   2. the GPU tests for real (the tests that skip without a GPU run here, the fake driver's too)   <= 200 s
#   3. bench/gpu.py: rows a b c d e f l n q on CUDA beside torch on the same GPU, % of the HBM
#      bandwidth and of cuBLAS measured there, row d's BEAM search and its tiles' times              <= 200 s
#   4. the Tensor suite on CUDA (DEVICE=CUDA test/test_tensor_ops.py), in what is left of 450 s
# Results: $OUT (else bench/gpu-results/): summary.txt (one line a step), tests.txt, bench.md (the table),
# bench.txt (its log), tensor_ops.txt.
# On a machine that cannot install packages, BUNDLE=file (bench/gpu_bundle.sh's tarball of the MLIR bindings for its
# python3) is unpacked into a temporary folder put first on PYTHONPATH, with this checkout.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
RES=${OUT:-bench/gpu-results}
mkdir -p "$RES"
if [ -n "${BUNDLE:-}" ]; then
  site=$(mktemp -d); trap 'rm -rf "$site"' EXIT
  tar xJf "$BUNDLE" -C "$site" || { echo "no GPU run: $BUNDLE does not unpack"; exit 2; }
  export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
: > "$RES/summary.txt"; : > "$RES/bench.md"
start=$(date +%s)
log() { echo "$*" | tee -a "$RES/summary.txt"; }
step() {   # step NAME LIMIT_S OUTPUT_FILE COMMAND...: run it under the limit, its output to the file and the console
  local name=$1 limit=$2 out=$3 t0 rc; shift 3
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$RES/$out"; rc=${PIPESTATUS[0]}
  log "$name: exit $rc$([ "$rc" = 124 ] && echo " (stopped at its limit, ${limit} s)") after $(($(date +%s) - t0)) s: $(tail -n 1 "$RES/$out")"
}
if ! command -v "$PY" >/dev/null; then log "no GPU run: no python ($PY)"; exit 2; fi
if ! what=$("$PY" bench/gpu.py --check 2>&1); then log "${what:-no GPU: bench/gpu.py --check failed}"; log "nothing else was run"; exit 2; fi
log "GPU: $what"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
  --format=csv >> "$RES/summary.txt" 2>&1
step "GPU tests" 200 tests.txt "$PY" -m pytest -q -p no:cacheprovider -rs test/test_cuda.py test/test_cuda_graph.py \
  test/test_gpu_tiles.py test/test_gpu_symbolic.py test/test_gpu_lowering.py test/test_gpu_split_reduce.py test/test_realize.py::test_devices_on_tensors \
  test/test_dist.py::test_nccl_one_rank_collectives_on_a_gpu
step "bench rows" 200 bench.txt "$PY" bench/gpu.py --out "$RES/bench.md"
left=$((450 - ($(date +%s) - start)))
if [ "$left" -gt 30 ]; then
  step "Tensor suite on CUDA" "$left" tensor_ops.txt env DEVICE=CUDA "$PY" -m pytest -q -p no:cacheprovider test/test_tensor_ops.py
else log "Tensor suite on CUDA: not run (${left} s left of 450)"; fi
log "total $(($(date +%s) - start)) s; results in $RES"
