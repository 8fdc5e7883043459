// RUN: morok-opt %s -p uop-simplify | FileCheck %s

// A 3x4 buffer read through reshape(3x4 -> 12 -> 2x6 -> 12 -> 3x4): the index folds back to r0*4 + r1.
// CHECK-LABEL: func.func private @k0
// CHECK-NOT: uop.idiv
// CHECK-NOT: uop.mod
// CHECK: %[[R0:.*]] = "uop.range"({{.*}}) {axis = 0 : i64, kind = "loop"}
// CHECK: %[[C4:.*]] = "uop.const"() {value = 4 : index} : () -> index
// CHECK: %[[M:.*]] = "uop.mul"(%[[R0]], %[[C4]])
// CHECK: %[[R1:.*]] = "uop.range"(%[[C4]]) {axis = 1 : i64, kind = "loop"}
// CHECK: %[[L:.*]] = "uop.add"(%[[M]], %[[R1]])
// CHECK: "uop.index"(%arg1, %[[L]])
// CHECK-LABEL: func.func private @k1
func.func private @k0(%arg0: memref<12xf32>, %arg1: memref<12xf32>) attributes {uop.kernel} {
  %c3 = "uop.const"() {value = 3 : index} : () -> index
  %c4 = "uop.const"() {value = 4 : index} : () -> index
  %c6 = "uop.const"() {value = 6 : index} : () -> index
  %r0 = "uop.range"(%c3) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %r1 = "uop.range"(%c4) {axis = 1 : i64, kind = "loop"} : (index) -> index
  %m = "uop.mul"(%r0, %c4) : (index, index) -> index
  %l = "uop.add"(%m, %r1) : (index, index) -> index
  %i0 = "uop.idiv"(%l, %c6) : (index, index) -> index
  %i1 = "uop.mod"(%l, %c6) : (index, index) -> index
  %m2 = "uop.mul"(%i0, %c6) : (index, index) -> index
  %l2 = "uop.add"(%m2, %i1) : (index, index) -> index
  %j0 = "uop.idiv"(%l2, %c4) : (index, index) -> index
  %j1 = "uop.mod"(%l2, %c4) : (index, index) -> index
  %m3 = "uop.mul"(%j0, %c4) : (index, index) -> index
  %l3 = "uop.add"(%m3, %j1) : (index, index) -> index
  %p = "uop.index"(%arg1, %l3) : (memref<12xf32>, index) -> !uop.ptr<f32>
  %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %q = "uop.index"(%arg0, %l) : (memref<12xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %v) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r0, %r1) : (!uop.token, index, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// A range smaller than the modulus: r % 8 -> r, r // 8 -> 0, and offsets combine: (r + 2) + 3 -> r + 5
// CHECK: %[[R:.*]] = "uop.range"
// CHECK-NEXT: %[[C5:.*]] = "uop.const"() {value = 5 : index}
// CHECK-NEXT: %[[A:.*]] = "uop.add"(%[[R]], %[[C5]])
// CHECK-NEXT: "uop.index"(%arg0, %[[A]])
func.func private @k1(%arg0: memref<16xi32>) attributes {uop.kernel} {
  %c4 = "uop.const"() {value = 4 : index} : () -> index
  %c8 = "uop.const"() {value = 8 : index} : () -> index
  %c2 = "uop.const"() {value = 2 : index} : () -> index
  %c3 = "uop.const"() {value = 3 : index} : () -> index
  %r = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %m = "uop.mod"(%r, %c8) : (index, index) -> index
  %d = "uop.idiv"(%r, %c8) : (index, index) -> index
  %s = "uop.add"(%m, %d) : (index, index) -> index
  %a = "uop.add"(%s, %c2) : (index, index) -> index
  %b = "uop.add"(%a, %c3) : (index, index) -> index
  %p = "uop.index"(%arg0, %b) : (memref<16xi32>, index) -> !uop.ptr<i32>
  %v = "uop.const"() {value = 1 : i32} : () -> i32
  %st = "uop.store"(%p, %v) : (!uop.ptr<i32>, i32) -> !uop.token
  %e = "uop.end"(%st, %r) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}
