// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-rangeify | FileCheck %s

// The ops rangeify creates carry the locations of the ops they come from in this file: the loads of a and b the add's,
// the reduce range the reduce_axis's, the output's index and store the exp2's; the rebuilt function keeps its own.
// CHECK-NOT: rebuilt
// CHECK: func.func @f(%arg0: memref<4xf32> loc("{{.*}}locations.mlir":[[@LINE+9]]:14), %arg1: memref<4xf32> loc("{{.*}}locations.mlir":[[@LINE+9]]:33)
// CHECK: "uop.index"(%arg2, {{.*}} loc("{{.*}}locations.mlir":[[@LINE+11]]:8)
// CHECK: "uop.range"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+9]]:8)
// CHECK: "uop.load"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+7]]:8)
// CHECK: "uop.load"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+6]]:8)
// CHECK: "uop.add"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+5]]:8)
// CHECK: "uop.reduce"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+5]]:8)
// CHECK: "uop.store"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+5]]:8)
// CHECK: } loc("{{.*}}locations.mlir":[[@LINE+1]]:1)
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1xf32> {
  %0 = "uop.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.reduce_axis"(%0) {op = "add", axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<1xf32>
  %2 = "uop.exp2"(%1) : (tensor<1xf32>) -> tensor<1xf32>
  return %2 : tensor<1xf32>
}
