// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// relu(A) @ B with A 1024x64 (within L2: Contraction.ROWS_MAX) and B 64x16, two vectors wide: pack_a writes relu(A)
// row-major (%arg3, row i at i * 64), k as 8-lane vectors (4 of them a step, 2 steps), a vector.maximumf each, not
// into 6-row panels element by element; the schedule runs it as a phase of its own over A's 1024 rows, and the tiles
// read A's rows there, rows past the 1024th repeating the last.
// CHECK-LABEL: func.func @mm_pack_a(
// CHECK: scf.for %[[I:.*]] = %arg6 to %arg7 step %c1 {
// CHECK-NEXT: %[[R:.*]] = arith.muli %[[I]], %c64 : index
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: %[[X:.*]] = vector.load %arg1[%[[AT:.*]]] : memref<65536xf32>, vector<8xf32>
// CHECK-NEXT: %[[Y:.*]] = arith.maximumf %[[X]], %{{.*}} : vector<8xf32>
// CHECK-NEXT: vector.store %[[Y]], %arg3[%[[AT]]] : memref<65664xf32>, vector<8xf32>
// CHECK-LABEL: func.func @mm_mm(
// CHECK: arith.minsi %{{.*}}, %c1023 : index
// CHECK: memref.load %arg3[
// CHECK-LABEL: func.func @schedule(
// CHECK: call @mm_pack_a({{.*}}, %c0, %c1024)
// CHECK: call @mm_pack_b(
// CHECK: call @mm_mm(
module {
  func.func private @mm(%arg0: memref<16384xf32>, %arg1: memref<65536xf32>, %arg2: memref<1024xf32>) attributes {uop.kernel} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c16 = "uop.const"() {value = 16 : index} : () -> index
    %c1024 = "uop.const"() {value = 1024 : index} : () -> index
    %1 = "uop.range"(%c1024) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%c16) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%c64) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %c64) : (index, index) -> index
    %8 = "uop.add"(%4, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<65536xf32>, index) -> !uop.ptr<f32>
    %a = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %za = "uop.const"() {value = 0.0 : f32} : () -> f32
    %10 = "uop.max"(%a, %za) : (f32, f32) -> f32
    %11 = "uop.mul"(%3, %c16) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<1024xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %o1 = "uop.mul"(%1, %c16) : (index, index) -> index
    %o = "uop.add"(%o1, %2) : (index, index) -> index
    %17 = "uop.index"(%arg0, %o) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %16) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<65536xf32>, %arg1: memref<1024xf32>, %arg2: memref<16384xf32>) attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
