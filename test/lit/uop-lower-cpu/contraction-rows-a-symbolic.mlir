// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A batch of 4 products (L x L) x (L x 64), L symbolic (read from the variables' buffer, clamped to [1, 512]), whose A
// is computed along k with a reduce of its own over the row (attention's exp2(s - max)): pack_a writes A row-major
// with k as 16-lane vectors. The row's max and the stored values run in whole steps of 4 vectors to L / 64 (no masks,
// no tests: 4 loads and a tree of compare-and-selects per step of the max, a loop of 4 plain vector stores), then the
// groups past them one at a time to (L % 64 + 15) / 16, the lanes past L masked off (the max's filled with -inf,
// their stores not written); no scalar code runs along k.
// CHECK-LABEL: func.func @att_pack_a(
// CHECK: %[[L:.*]] = arith.minsi %{{.*}}, %c512 : index
// CHECK: %[[STEPS:.*]] = arith.divui %[[L]], %c64 : index
// CHECK: %[[REM:.*]] = arith.remui %[[L]], %c64 : index
// CHECK: %[[REM15:.*]] = arith.addi %[[REM]], %c15 : index
// CHECK: %[[TAIL:.*]] = arith.divui %[[REM15]], %c16 : index
// CHECK: scf.for %{{.*}} = %c0 to %[[L]] step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %[[STEPS]] step %c1 iter_args(%{{.*}}) -> (vector<16xf32>) {
// CHECK-COUNT-4: vector.load %arg2[{{.*}}] : memref<1048576xf32>, vector<16xf32>
// CHECK-NOT: vector.maskedload
// CHECK: arith.cmpf ogt
// CHECK: scf.yield %{{.*}} : vector<16xf32>
// the lanes' max: NaN if any lane is, else halves compared and selected, 16 -> 1
// CHECK: vector.reduction <or>, %{{.*}} : vector<16xi1> into i1
// CHECK-COUNT-4: vector.shuffle
// CHECK: vector.extract %{{.*}}[0] : f32 from vector<16xf32>
// CHECK: scf.for %{{.*}} = %c0 to %[[TAIL]] step %c1 iter_args(%{{.*}}) -> (vector<16xf32>) {
// CHECK: vector.maskedload %arg2[{{.*}}]
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[NEGINF:.*]] : vector<16xi1>, vector<16xf32>
// CHECK: vector.extract %{{.*}}[0] : f32 from vector<16xf32>
// CHECK-NEXT: arith.select
// CHECK-NEXT: arith.maximumf
// CHECK: scf.for %{{.*}} = %c0 to %[[STEPS]] step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK-NOT: maskedstore
// CHECK: vector.store %{{.*}}, %arg4[{{.*}}] : memref<1081344xf32>, vector<16xf32>
// CHECK: scf.for %{{.*}} = %c0 to %[[TAIL]] step %c1 {
// CHECK: vector.maskedstore %arg4[
// CHECK-NOT: memref.store
// CHECK-NOT: vector.reduction <maximumf>
// CHECK-LABEL: func.func @att_pack_b(
module {
  func.func private @att(%arg0: memref<131072xf32>, %arg1: memref<1xi64>, %arg2: memref<1048576xf32>, %arg3: memref<131072xf32>) attributes {uop.kernel} {
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c1 = "uop.const"() {value = 1 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c512 = "uop.const"() {value = 512 : index} : () -> index
    %c32768 = "uop.const"() {value = 32768 : index} : () -> index
    %c262144 = "uop.const"() {value = 262144 : index} : () -> index
    %v0 = "uop.index"(%arg1, %c0) : (memref<1xi64>, index) -> !uop.ptr<i64>
    %v1 = "uop.load"(%v0) : (!uop.ptr<i64>) -> i64
    %v2 = "uop.cast"(%v1) : (i64) -> index
    %v3 = "uop.max"(%v2, %c1) : (index, index) -> index
    %n = "uop.min"(%v3, %c512) : (index, index) -> index
    %t = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%c64) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%n) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %k2 = "uop.range"(%n) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %ts = "uop.mul"(%t, %c262144) : (index, index) -> index
    %is = "uop.mul"(%i, %c512) : (index, index) -> index
    %row = "uop.add"(%ts, %is) : (index, index) -> index
    %p2 = "uop.add"(%row, %k2) : (index, index) -> index
    %x2i = "uop.index"(%arg2, %p2) : (memref<1048576xf32>, index) -> !uop.ptr<f32>
    %x2 = "uop.load"(%x2i) : (!uop.ptr<f32>) -> f32
    %m = "uop.reduce"(%x2, %k2) {op = "max"} : (f32, index) -> f32
    %p = "uop.add"(%row, %k) : (index, index) -> index
    %xi = "uop.index"(%arg2, %p) : (memref<1048576xf32>, index) -> !uop.ptr<f32>
    %x = "uop.load"(%xi) : (!uop.ptr<f32>) -> f32
    %d = "uop.sub"(%x, %m) : (f32, f32) -> f32
    %e = "uop.exp2"(%d) : (f32) -> f32
    %tv = "uop.mul"(%t, %c32768) : (index, index) -> index
    %kv = "uop.mul"(%k, %c64) : (index, index) -> index
    %q0 = "uop.add"(%tv, %kv) : (index, index) -> index
    %q1 = "uop.add"(%q0, %j) : (index, index) -> index
    %bi = "uop.index"(%arg3, %q1) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %b = "uop.load"(%bi) : (!uop.ptr<f32>) -> f32
    %pr = "uop.mul"(%e, %b) : (f32, f32) -> f32
    %s = "uop.reduce"(%pr, %k) {op = "add"} : (f32, index) -> f32
    %io = "uop.mul"(%i, %c64) : (index, index) -> index
    %o0 = "uop.add"(%tv, %io) : (index, index) -> index
    %o1 = "uop.add"(%o0, %j) : (index, index) -> index
    %oi = "uop.index"(%arg0, %o1) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%oi, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %end = "uop.end"(%st, %t, %i, %j) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%end) : (!uop.token) -> ()
    return
  }
}
