// RUN: morok-opt %s -p uop-rangeify,uop-kernel-split | FileCheck %s

// A scatter into the output: one kernel stores the target there, a second updates the same buffer in place and waits
// for the first (it writes a buffer the first wrote).
// CHECK: func.func private @[[K0:E_5_3_k0]](%{{.*}}: memref<15xf32>, %{{.*}}: memref<15xf32>) attributes {uop.kernel}
// CHECK: func.func private @[[K1:E_2_3_k1]](%[[T:.*]]: memref<15xf32>, %{{.*}}: memref<6xi32>, %{{.*}}: memref<6xf32>) attributes {uop.kernel}
// CHECK: "uop.range"(%{{.*}}) {axis = 0 : i64, kind = "serial"}
// CHECK: %[[P:.*]] = "uop.index"(%[[T]], %{{.*}}, %{{.*}}) : (memref<15xf32>, index, i1) -> !uop.ptr<f32>
// CHECK: "uop.store"(%[[P]], %{{.*}})
// CHECK: func.func @schedule
// CHECK: %[[C0:.*]] = "uop.kernel"() {callee = @[[K0]], slots = array<i64: 3, 0>}
// CHECK: "uop.kernel"(%[[C0]]) {callee = @[[K1]], slots = array<i64: 3, 1, 2>}
func.func @graph(%a: tensor<5x3xf32>, %i: tensor<2x3xi32>, %v: tensor<2x3xf32>) -> tensor<5x3xf32> {
  %0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
