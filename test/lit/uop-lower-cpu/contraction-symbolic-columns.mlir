// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// x @ W[:, :n], 256 x 256 times 256 x n, n symbolic (read from the variables' buffer, clamped to [1, 512]): tiled as at
// n = 512 (8 x 32 register tiles of 16-lane vectors). A panel of B that holds at most 16 of the n columns (the last
// one, at n % 32 <= 16) runs its tiles 8 x 16: 8 accumulators, not 16 (half of them for columns past n), each row
// stored into the tile at its 32-float place, so the epilogue reads the tile as for a full panel.
// CHECK-LABEL: func.func @mm_mm(
// CHECK: %[[N:.*]] = arith.minsi %{{.*}}, %c512 : index
// CHECK: %[[LEFT:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK: %[[HALF:.*]] = arith.cmpi sle, %[[LEFT]], %c16{{(_[0-9]+)?}} : index
// CHECK-NEXT: scf.if %[[HALF]] {
// CHECK: %[[T:.*]]:8 = scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-8: vector.fma
// CHECK: vector.store %[[T]]#1, %alloca[%c32{{(_[0-9]+)?}}] : memref<256xf32>, vector<16xf32>
// CHECK: func.call @mm_epi(
// CHECK: } else {
// CHECK: %[[W:.*]]:16 = scf.for
// CHECK-COUNT-16: vector.fma
// CHECK: vector.store %[[W]]#1, %alloca[%c16{{(_[0-9]+)?}}] : memref<256xf32>, vector<16xf32>
// CHECK: func.call @mm_epi(
module {
  func.func private @mm(%arg0: memref<131072xf32>, %arg1: memref<1xi64>, %arg2: memref<65536xf32>, %arg3: memref<131072xf32>) attributes {uop.kernel} {
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c1 = "uop.const"() {value = 1 : index} : () -> index
    %c256 = "uop.const"() {value = 256 : index} : () -> index
    %c512 = "uop.const"() {value = 512 : index} : () -> index
    %v0 = "uop.index"(%arg1, %c0) : (memref<1xi64>, index) -> !uop.ptr<i64>
    %v1 = "uop.load"(%v0) : (!uop.ptr<i64>) -> i64
    %v2 = "uop.cast"(%v1) : (i64) -> index
    %v3 = "uop.max"(%v2, %c1) : (index, index) -> index
    %n = "uop.min"(%v3, %c512) : (index, index) -> index
    %i = "uop.range"(%c256) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c256) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %ir = "uop.mul"(%i, %c256) : (index, index) -> index
    %ai = "uop.add"(%ir, %k) : (index, index) -> index
    %ap = "uop.index"(%arg2, %ai) : (memref<65536xf32>, index) -> !uop.ptr<f32>
    %a = "uop.load"(%ap) : (!uop.ptr<f32>) -> f32
    %kr = "uop.mul"(%k, %c512) : (index, index) -> index
    %bi = "uop.add"(%kr, %j) : (index, index) -> index
    %bp = "uop.index"(%arg3, %bi) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %b = "uop.load"(%bp) : (!uop.ptr<f32>) -> f32
    %p = "uop.mul"(%a, %b) : (f32, f32) -> f32
    %s = "uop.reduce"(%p, %k) {op = "add"} : (f32, index) -> f32
    %or = "uop.mul"(%i, %c512) : (index, index) -> index
    %oi = "uop.add"(%or, %j) : (index, index) -> index
    %op = "uop.index"(%arg0, %oi) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%op, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %end = "uop.end"(%st, %i, %j) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%end) : (!uop.token) -> ()
    return
  }
}
