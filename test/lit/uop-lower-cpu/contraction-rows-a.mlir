// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A batch of 4 products 64x64x64 whose A is computed along k (exp2 of a row-major x, as attention's exp(s - max)):
// pack_a writes A row-major, each k's values next to the last (Ap[t][66][64], %arg3: the problem at t * 4224, row i at
// i * 64), not into 6-row panels where each k step's 6 values land 6 floats apart: k as 8-lane vectors, 2 whole steps
// of 4 (no masks); the tiles then read A's rows there, rows past the 64th repeating the last (min(row, 63)), from the
// batch's offset.
// CHECK-LABEL: func.func @bmm_pack_a(
// CHECK: %[[T:.*]] = arith.muli %{{.*}}, %c4224 : index
// CHECK: scf.for %[[I:.*]] = %c0 to %c64 step %c1 {
// CHECK-NEXT: %[[R:.*]] = arith.muli %[[I]], %c64 : index
// CHECK: %[[TR:.*]] = arith.addi %[[T]], %[[R]] : index
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK: %[[S:.*]] = arith.addi %[[TR]], %{{.*}} : index
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK: %[[AT:.*]] = arith.addi %[[S]], %{{.*}} : index
// CHECK-NEXT: vector.store %{{.*}}, %arg3[%[[AT]]] : memref<16896xf32>, vector<8xf32>
// CHECK-NOT: maskedstore
// CHECK-LABEL: func.func @bmm_mm(
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %c4224{{.*}} : index
// CHECK: %[[R0:.*]] = arith.minsi %{{.*}}, %c63 : index
// CHECK: %[[B0:.*]] = arith.muli %[[R0]], %c64{{.*}} : index
// CHECK: arith.addi %{{.*}}, %[[OFF]] : index
// CHECK: memref.load %arg3[
module {
  func.func private @bmm(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>) attributes {uop.kernel} {
    %n = "uop.const"() {value = 64 : index} : () -> index
    %nb = "uop.const"() {value = 4 : index} : () -> index
    %nn = "uop.const"() {value = 4096 : index} : () -> index
    %t = "uop.range"(%nb) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%n) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%n) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %tb = "uop.mul"(%t, %nn) : (index, index) -> index
    %ir = "uop.mul"(%i, %n) : (index, index) -> index
    %0 = "uop.add"(%tb, %ir) : (index, index) -> index
    %1 = "uop.add"(%0, %k) : (index, index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %a = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %e = "uop.exp2"(%a) : (f32) -> f32
    %kr = "uop.mul"(%k, %n) : (index, index) -> index
    %3 = "uop.add"(%tb, %kr) : (index, index) -> index
    %4 = "uop.add"(%3, %j) : (index, index) -> index
    %5 = "uop.index"(%arg2, %4) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %b = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %6 = "uop.mul"(%e, %b) : (f32, f32) -> f32
    %7 = "uop.reduce"(%6, %k) {op = "add"} : (f32, index) -> f32
    %8 = "uop.add"(%0, %j) : (index, index) -> index
    %9 = "uop.index"(%arg0, %8) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %7) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %t, %i, %j) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>) attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @bmm, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
