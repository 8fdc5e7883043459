// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | not %python -m morok_mlir.device.ptx --chip sm_99 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: echo 'module {' | not %python -m morok_mlir.device.ptx 2>&1 | FileCheck %s --check-prefix=PARSE

// An unknown chip is a Python error before MLIR sees it (the NVPTX back end would abort the process).
// CHIP: error: unknown CUDA chip 'sm_99' (known: sm_70,
// PARSE: error: {{.*}}expected
func.func @graph(%a: tensor<4xf32>) -> tensor<4xf32> {
  %n = "uop.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}
