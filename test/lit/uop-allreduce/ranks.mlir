// RUN: morok-opt %s -p 'uop-allreduce{ring=0}' | FileCheck %s

// An allreduce over ranks' devices (CPU@r: one process each) stays, naive or ring: no copy reaches another process.
// The realize driver runs it through the Communicator; an allreduce over one process's devices beside it is lowered.
// CHECK-LABEL: func.func @ranks
// CHECK-NEXT: %0 = "uop.allreduce"(%arg0, %arg1) {device = "CPU@0", devices = "CPU@0,CPU@1", op = "add"}
// CHECK-NOT: "uop.allreduce"
// CHECK: "uop.copy"
// CHECK-NOT: "uop.allreduce"
// CHECK: return %0,
func.func @ranks(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "uop.allreduce"(%a, %b) {device = "CPU@0", devices = "CPU@0,CPU@1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.allreduce"(%a, %b) {device = "CPU", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
