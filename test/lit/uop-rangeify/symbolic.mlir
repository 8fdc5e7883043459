// RUN: morok-opt %s -p uop-rangeify | FileCheck %s
// RUN: morok-opt %s | morok-opt | FileCheck %s --check-prefix=ROUND
// RUN: morok-opt %s -p uop-rangeify,uop-simplify,uop-kernel-split,uop-optimize,uop-lower-cpu | FileCheck %s --check-prefix=CPU

// Symbolic sizes: a `?` dim's value is an index operand of the op that makes the shape (a define_var here). The
// graph-level function prints and parses back unchanged.
// ROUND-LABEL: func.func @rows
// ROUND: %[[N:.*]] = "uop.define_var"() {max = 64 : i64, min = 1 : i64, name = "n"} : () -> index
// ROUND: "uop.shrink"(%arg0, %[[N]]) {bounds = array<i64: 0, -9223372036854775808, 0, 8>} : (tensor<64x8xf32>, index) -> tensor<?x8xf32>
// ROUND: "uop.reduce_axis"({{.*}}) {axes = array<i64: 1>, op = "add"} : (tensor<?x8xf32>) -> tensor<?x1xf32>

// rangeify reads n from one more input, an int64 buffer of the variables' values, clamped to [min, max]; the row loop
// runs to it and the output is allocated for n's max (64 rows).
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[IN:.*]]: memref<512xf32>, %[[VARS:.*]]: memref<1xi64>, %[[OUT:.*]]: memref<64xf32>)
// CHECK-SAME: uop.num_inputs = 2
// CHECK: %[[P:.*]] = "uop.index"(%[[VARS]], %{{.*}}) : (memref<1xi64>, index) -> !uop.ptr<i64>
// CHECK: %[[V:.*]] = "uop.load"(%[[P]]) : (!uop.ptr<i64>) -> i64
// CHECK: %[[I:.*]] = "uop.cast"(%[[V]]) : (i64) -> index
// CHECK: %[[LO:.*]] = "uop.max"(%[[I]], %{{.*}})
// CHECK: %[[N:.*]] = "uop.min"(%[[LO]], %{{.*}})
// CHECK: %[[R:.*]] = "uop.range"(%[[N]]) {axis = 0 : i64, kind = "loop"}
// CHECK: "uop.index"(%[[OUT]], %[[R]])
// CHECK: "uop.reduce"
// CHECK: "uop.end"({{.*}}, %[[R]])

// On the CPU the loop is a plain scf.for to the loaded value; each row of 8 (static) is one vector of lanes.
// CPU-LABEL: func.func @r_n_8_k0
// CPU-SAME: (%[[O:.*]]: memref<64xf32>, %[[VB:.*]]: memref<1xi64>, %{{.*}}: memref<512xf32>)
// CPU: %[[L:.*]] = memref.load %[[VB]][%{{.*}}] : memref<1xi64>
// CPU: %[[C:.*]] = arith.index_cast %[[L]] : i64 to index
// CPU: %[[MX:.*]] = arith.maxsi %[[C]], %{{.*}} : index
// CPU: %[[END:.*]] = arith.minsi %[[MX]], %{{.*}} : index
// CPU: scf.for %[[IV:.*]] = %{{.*}} to %[[END]] step
// CPU: vector.load %{{.*}} : memref<512xf32>, vector<8xf32>
// CPU: %[[S:.*]] = vector.reduction <add>
// CPU: memref.store %[[S]], %[[O]][%[[IV]]] : memref<64xf32>
// CPU-LABEL: func.func @schedule
// CPU: call @r_n_8_k0(%arg2, %arg1, %arg0)
func.func @rows(%a: tensor<64x8xf32>) -> tensor<?xf32> {
  %n = "uop.define_var"() {name = "n", min = 1 : i64, max = 64 : i64} : () -> index
  %s = "uop.shrink"(%a, %n) {bounds = array<i64: 0, -9223372036854775808, 0, 8>} : (tensor<64x8xf32>, index) -> tensor<?x8xf32>
  %r = "uop.reduce_axis"(%s) {op = "add", axes = array<i64: 1>} : (tensor<?x8xf32>) -> tensor<?x1xf32>
  %o = "uop.reshape"(%r, %n) : (tensor<?x1xf32>, index) -> tensor<?xf32>
  return %o : tensor<?xf32>
}
