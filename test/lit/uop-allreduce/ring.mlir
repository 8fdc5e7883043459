// RUN: morok-opt %s -p 'uop-allreduce{ring=0}' | FileCheck %s

// From `ring` bytes on, the value goes around the ring in chunks. Two devices, two chunks: chunk 0 starts on CPU, is
// copied to CPU:1 and added to CPU:1's chunk 0 (CPU:1 now holds its total); chunk 1 the other way round. Each device
// then receives the total it lacks and joins the two chunks (pad and add).
// CHECK-LABEL: func.func @ring2
// CHECK-NEXT: %0 = "uop.shrink"(%arg0) {bounds = array<i64: 0, 2>}
// CHECK-NEXT: %1 = "uop.copy"(%0) {device = "CPU:1"}
// CHECK-NEXT: %2 = "uop.shrink"(%arg1) {bounds = array<i64: 0, 2>}
// CHECK-NEXT: %3 = "uop.add"(%1, %2)
// CHECK-NEXT: %4 = "uop.copy"(%3) {device = "CPU"}
// CHECK-NEXT: %5 = "uop.pad"(%4) {padding = array<i64: 0, 2>}
// CHECK-NEXT: %6 = "uop.shrink"(%arg1) {bounds = array<i64: 2, 4>}
// CHECK-NEXT: %7 = "uop.copy"(%6) {device = "CPU"}
// CHECK-NEXT: %8 = "uop.shrink"(%arg0) {bounds = array<i64: 2, 4>}
// CHECK-NEXT: %9 = "uop.add"(%7, %8)
// CHECK-NEXT: %10 = "uop.pad"(%9) {padding = array<i64: 2, 0>}
// CHECK-NEXT: %11 = "uop.add"(%5, %10)
// CHECK-NEXT: %12 = "uop.pad"(%3) {padding = array<i64: 0, 2>}
// CHECK-NEXT: %13 = "uop.copy"(%9) {device = "CPU:1"}
// CHECK-NEXT: %14 = "uop.pad"(%13) {padding = array<i64: 2, 0>}
// CHECK-NEXT: %15 = "uop.add"(%12, %14)
// CHECK-NEXT: return %11, %15
func.func @ring2(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "uop.allreduce"(%a, %b) {device = "CPU", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.allreduce"(%a, %b) {device = "CPU:1", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// Three devices, a 2x3 value: flattened, chunks of 2; on CPU:2, chunk 0 (whose total ends on CPU:2) needs no copy after
// its reduce-scatter, and the value is reshaped back.
// CHECK-LABEL: func.func @ring3
// CHECK: "uop.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-COUNT-2: "uop.copy"(%{{[0-9]+}}) {device = "CPU:1"}
// CHECK: "uop.reshape"(%{{[0-9]+}}) : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NOT: "uop.allreduce"
func.func @ring3(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "uop.allreduce"(%a, %b, %c) {device = "CPU:2", devices = "CPU,CPU:1,CPU:2", op = "add"} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
