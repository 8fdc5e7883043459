// RUN: morok-opt %s -p uop-rangeify,uop-kernel-split | FileCheck %s

// A column max that must be materialised: two kernels, the second waits for the first. uop.temps names the arguments
// that are the schedule's own buffers (the max: written by the first kernel, read by the second).
// CHECK: func.func private @[[K0:r_4_3_k0]](%{{.*}}: memref<4xf32>, %{{.*}}: memref<12xf32>) attributes {uop.kernel, uop.temps = array<i64: 0>}
// CHECK: "uop.reduce"({{.*}}) {op = "max"}
// CHECK: func.func private @[[K1:E_3_4_k1]](%{{.*}}: memref<12xf32>, %{{.*}}: memref<12xf32>, %{{.*}}: memref<4xf32>) attributes {uop.kernel, uop.temps = array<i64: 2>}
// CHECK: func.func @schedule(%{{.*}}: memref<12xf32>, %{{.*}}: memref<12xf32>, %{{.*}}: memref<4xf32>)
// CHECK-SAME: uop.num_inputs = 1 : i64, uop.num_outputs = 1 : i64, uop.schedule
// CHECK: %[[T0:.*]] = "uop.kernel"() {callee = @[[K0]], slots = array<i64: 2, 0>}
// CHECK: "uop.kernel"(%[[T0]]) {callee = @[[K1]], slots = array<i64: 1, 0, 2>}
func.func @graph(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %e = "uop.expand"(%m) : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %s = "uop.sub"(%a, %e) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}
