// RUN: morok-opt %s -p uop-rangeify,uop-kernel-split | FileCheck %s

// Two column maxes of two inputs are one computation on different buffers: one kernel function, called twice by the
// schedule on each one's buffers (its ranges numbered within the kernel, not where rangeify met them in the graph).
// CHECK: func.func private @[[K0:r_4_3_k0]](%{{.*}}: memref<4xf32>, %{{.*}}: memref<12xf32>) attributes {uop.kernel, uop.temps = array<i64: 0>}
// CHECK: "uop.range"(%{{.*}}) {axis = 0 : i64, kind = "loop"}
// CHECK: "uop.range"(%{{.*}}) {axis = 1 : i64, kind = "reduce"}
// CHECK-NOT: func.func private @r_
// CHECK: func.func private @[[K1:E_3_4_k2]]
// CHECK: func.func @schedule
// CHECK: %[[C0:.*]] = "uop.kernel"() {callee = @[[K0]], slots = array<i64: 3, 0>}
// CHECK: %[[C1:.*]] = "uop.kernel"() {callee = @[[K0]], slots = array<i64: 4, 1>}
// CHECK: "uop.kernel"(%[[C0]], %[[C1]]) {callee = @[[K1]], slots = array<i64: 2, 3, 4>}
func.func @graph(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %e = "uop.expand"(%m) : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %n = "uop.reduce_axis"(%b) {op = "max", axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %f = "uop.expand"(%n) : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %s = "uop.sub"(%e, %f) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}
