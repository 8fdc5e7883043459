// RUN: morok-opt %s -p uop-rangeify --split-input-file | FileCheck %s

// A permute is no copy: the load's index is the transposed linear index over the loop ranges.
// CHECK-LABEL: func.func @permute
// CHECK-SAME: (%[[IN:.*]]: memref<6xf32>, %[[OUT:.*]]: memref<6xf32>)
// CHECK-DAG: %[[C3:.*]] = "uop.const"() {value = 3 : index}
// CHECK-DAG: %[[C2:.*]] = "uop.const"() {value = 2 : index}
// CHECK-DAG: %[[R0:.*]] = "uop.range"(%[[C3]]) {axis = 0 : i64, kind = "loop"}
// CHECK-DAG: %[[R1:.*]] = "uop.range"(%[[C2]]) {axis = 1 : i64, kind = "loop"}
// CHECK: %[[M:.*]] = "uop.mul"(%[[R1]], %[[C3]])
// CHECK: %[[L:.*]] = "uop.add"(%[[M]], %[[R0]])
// CHECK: "uop.index"(%[[IN]], %[[L]])
// CHECK-NOT: uop.permute
// CHECK: "uop.end"({{.*}}, %[[R0]], %[[R1]])
func.func @permute(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %p = "uop.permute"(%a) {order = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// Expand indexes the broadcast dim with 0: the load of the bias only uses the column range.
// CHECK-LABEL: func.func @expand
// CHECK-SAME: (%{{.*}}: memref<12xf32>, %[[B:.*]]: memref<4xf32>, %{{.*}}: memref<12xf32>)
// CHECK-DAG: %[[R1:.*]] = "uop.range"({{.*}}) {axis = 1 : i64, kind = "loop"}
// CHECK: "uop.index"(%[[B]], %[[R1]])
func.func @expand(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = "uop.reshape"(%b) : (tensor<4xf32>) -> tensor<1x4xf32>
  %1 = "uop.expand"(%0) : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %2 = "uop.add"(%a, %1) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %2 : tensor<3x4xf32>
}

// -----

// Pad: the load is gated by the validity of the index and the value is selected to 0 outside.
// CHECK-LABEL: func.func @pad
// CHECK: %[[V:.*]] = "uop.cmplt"
// CHECK: %[[P:.*]] = "uop.index"(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<4xf32>, index, i1) -> !uop.ptr<f32>
// CHECK: %[[X:.*]] = "uop.load"(%[[P]])
// CHECK: "uop.where"(%{{.*}}, %[[X]], %{{.*}})
func.func @pad(%a: tensor<4xf32>) -> tensor<7xf32> {
  %p = "uop.pad"(%a) {padding = array<i64: 1, 2>} : (tensor<4xf32>) -> tensor<7xf32>
  return %p : tensor<7xf32>
}

// -----

// Flip reverses the index: 3 - i.
// CHECK-LABEL: func.func @flip
// CHECK: %[[R:.*]] = "uop.range"
// CHECK: "uop.sub"(%{{.*}}, %[[R]])
func.func @flip(%a: tensor<4xf32>) -> tensor<4xf32> {
  %p = "uop.flip"(%a) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %p : tensor<4xf32>
}
