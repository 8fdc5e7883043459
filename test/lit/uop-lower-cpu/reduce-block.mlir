// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

module {
  // uop.reduce_block = 4096: a sum of 10000 floats is 2 blocks of 4096 (a fresh accumulator each, added to the
  // outer one) and a tail of 1808 from 8192 on, added last
  // CHECK-LABEL: func.func @longsum
  // CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK: %[[OUT:.*]] = scf.for %[[B:.*]] = %{{.*}} to %c2 step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
  // CHECK-NEXT: %[[BASE:.*]] = arith.muli %[[B]], %c4096 : index
  // CHECK-NEXT: %[[BLK:.*]] = scf.for %[[I:.*]] = %{{.*}} to %c4096 step %{{.*}} iter_args(%[[IACC:.*]] = %[[ZERO]]) -> (f32) {
  // CHECK-NEXT: %[[IDX:.*]] = arith.addi %[[BASE]], %[[I]] : index
  // CHECK-NEXT: %[[V:.*]] = memref.load %arg1[%[[IDX]]]
  // CHECK-NEXT: arith.addf %[[IACC]], %[[V]]
  // CHECK: arith.addf %[[ACC]], %[[BLK]]
  // CHECK: %[[TAIL:.*]] = scf.for %[[T:.*]] = %{{.*}} to %c1808 step %{{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
  // CHECK-NEXT: arith.addi %[[T]], %c8192 : index
  // CHECK: %[[SUM:.*]] = arith.addf %[[OUT]], %[[TAIL]] : f32
  // CHECK-NEXT: memref.store %[[SUM]], %arg0
  func.func private @longsum(%arg0: memref<1xf32>, %arg1: memref<10000xf32>) attributes {uop.fastmath, uop.kernel, uop.reduce_block = 4096 : i64} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 10000 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.index"(%arg1, %2) : (memref<10000xf32>, index) -> !uop.ptr<f32>
    %4 = "uop.load"(%3) : (!uop.ptr<f32>) -> f32
    %5 = "uop.reduce"(%4, %2) {op = "add"} : (f32, index) -> f32
    %6 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }

  // rows of 4 x 4 floats in blocks of 8: the inner range (4) joins half of the outer one (2) in one accumulator (the
  // nest keeps its order: block, half, inner), and the 2 blocks add up outside
  // CHECK-LABEL: func.func @twoaxes
  // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %c3
  // CHECK: scf.for %[[O:.*]] = %{{.*}} to %c2 step
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %c2 step
  // CHECK: scf.for %[[J:.*]] = %{{.*}} to %c4 step
  // CHECK: memref.load %arg1
  // CHECK-NOT: scf.for
  // CHECK: memref.store
  func.func private @twoaxes(%arg0: memref<3xf32>, %arg1: memref<48xf32>) attributes {uop.fastmath, uop.kernel, uop.reduce_block = 8 : i64} {
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c16 = "uop.const"() {value = 16 : index} : () -> index
    %r = "uop.range"(%c3) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%c4) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %j = "uop.range"(%c4) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %a = "uop.mul"(%r, %c16) : (index, index) -> index
    %b = "uop.mul"(%i, %c4) : (index, index) -> index
    %ab = "uop.add"(%a, %b) : (index, index) -> index
    %x = "uop.add"(%ab, %j) : (index, index) -> index
    %p = "uop.index"(%arg1, %x) : (memref<48xf32>, index) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %s = "uop.reduce"(%v, %i, %j) {op = "add"} : (f32, index, index) -> f32
    %q = "uop.index"(%arg0, %r) : (memref<3xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%q, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%st, %r) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
