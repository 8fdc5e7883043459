// An upstream pass that fails reports the op's location; our passes fail the same way.
// RUN: not morok-opt %s -p one-shot-bufferize 2>&1 | FileCheck %s
// RUN: not morok-opt %s -p 'uop-cse,one-shot-bufferize' --mlir-print-debuginfo 2>&1 | FileCheck %s
// CHECK: upstream-failure.mlir:[[@LINE+3]]:8: error: op was not bufferized
// CHECK-NEXT: note: {{.*}}"uop.add"
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "uop.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
