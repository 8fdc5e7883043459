// RUN: morok-opt %s -p uop-rangeify --split-input-file | FileCheck %s

// A value two kernels need is stored once when its inline graph has 16 ops or more: the column sum and the row max
// both load the bufferized chain instead of each recomputing it.
// CHECK-LABEL: func.func @shared_expensive
// CHECK: %[[B:.*]] = "uop.bufferize"({{.*}}) : ({{.*}}) -> memref<16xf32>
// CHECK-NOT: "uop.bufferize"
// CHECK: "uop.index"(%[[B]], {{.*}})
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
// CHECK: "uop.index"(%[[B]], {{.*}})
// CHECK: "uop.reduce"({{.*}}) {op = "max"}
// CHECK-NOT: "uop.mul"
func.func @shared_expensive(%a: tensor<4x4xf32>) -> (tensor<1x4xf32>, tensor<4x1xf32>) {
  %c = "uop.const"() {value = 1.5 : f32} : () -> tensor<4x4xf32>
  %e0 = "uop.mul"(%a, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e1 = "uop.add"(%e0, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = "uop.mul"(%e1, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e3 = "uop.add"(%e2, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e4 = "uop.mul"(%e3, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e5 = "uop.add"(%e4, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e6 = "uop.mul"(%e5, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e7 = "uop.add"(%e6, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e8 = "uop.mul"(%e7, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e9 = "uop.add"(%e8, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e10 = "uop.mul"(%e9, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e11 = "uop.add"(%e10, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e12 = "uop.mul"(%e11, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e13 = "uop.add"(%e12, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e14 = "uop.mul"(%e13, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e15 = "uop.add"(%e14, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "uop.reduce_axis"(%e15) {op = "add", axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %m = "uop.reduce_axis"(%e15) {op = "max", axes = array<i64: 1>} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  return %s, %m : tensor<1x4xf32>, tensor<4x1xf32>
}

// -----

// A cheap shared value is recomputed by each kernel (fusion keeps it out of memory).
// CHECK-LABEL: func.func @shared_cheap
// CHECK-NOT: "uop.bufferize"
// CHECK: "uop.mul"
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
// CHECK: "uop.mul"
// CHECK: "uop.reduce"({{.*}}) {op = "max"}
func.func @shared_cheap(%a: tensor<4x4xf32>) -> (tensor<1x4xf32>, tensor<4x1xf32>) {
  %c = "uop.const"() {value = 1.5 : f32} : () -> tensor<4x4xf32>
  %e = "uop.mul"(%a, %c) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "uop.reduce_axis"(%e) {op = "add", axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %m = "uop.reduce_axis"(%e) {op = "max", axes = array<i64: 1>} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  return %s, %m : tensor<1x4xf32>, tensor<4x1xf32>
}
