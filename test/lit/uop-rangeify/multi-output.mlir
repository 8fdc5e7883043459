// RUN: morok-opt %s -p uop-rangeify | FileCheck %s

// Two outputs of one shape without a reduce (an optimizer step: new state, new weight) share one loop nest: one
// `group` of two stores under one `end`, the shared value computed once. The reduce gets its own loop nest.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[P:.*]]: memref<12xf32>, %[[M:.*]]: memref<12xf32>, %[[G:.*]]: memref<12xf32>, %[[OP:.*]]: memref<12xf32>, %[[OM:.*]]: memref<12xf32>, %[[OS:.*]]: memref<3xf32>)
// CHECK: %[[I:.*]] = "uop.range"({{.*}}) {axis = 0 : i64, kind = "loop"}
// CHECK: %[[J:.*]] = "uop.range"({{.*}}) {axis = 1 : i64, kind = "loop"}
// CHECK-COUNT-1: "uop.mul"(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// CHECK: %[[S1:.*]] = "uop.store"
// CHECK: %[[S2:.*]] = "uop.store"
// CHECK: %[[GR:.*]] = "uop.group"(%[[S1]], %[[S2]]) : (!uop.token, !uop.token) -> !uop.token
// CHECK: %[[E:.*]] = "uop.end"(%[[GR]], %[[I]], %[[J]])
// CHECK: "uop.reduce"
// CHECK: %[[E2:.*]] = "uop.end"
// CHECK: "uop.sink"(%[[E]], %[[E2]])
func.func @step(%p: tensor<3x4xf32>, %m: tensor<3x4xf32>, %g: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x1xf32>) {
  %c = "uop.const"() {value = 0.5 : f32} : () -> tensor<3x4xf32>
  %m2 = "uop.mul"(%m, %c) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %m3 = "uop.add"(%m2, %g) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %p2 = "uop.sub"(%p, %m3) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = "uop.reduce_axis"(%m3) {op = "add", axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  return %p2, %m3, %s : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x1xf32>
}
