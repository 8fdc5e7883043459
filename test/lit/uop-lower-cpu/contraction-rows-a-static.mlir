// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s --check-prefix=AVX2

// A batch of 4 products (100 x 100) x (100 x 64) whose A is computed along k with a reduce of its own over the row
// (attention's exp2(s - max)), L = 100 static: pack_a runs k as vector lanes as it does for a symbolic L, not as a
// 100-long scalar loop for LLVM to unroll: the row's max and the stored values in whole steps of 4 vectors (no masks),
// then the groups past them, the last one's lanes past 100 masked off (-inf in the max, not stored). 16 lanes: one
// step (64), then 3 groups (the max's as a tree of combines); 8 lanes: 3 steps (96), then one group.
// CHECK-LABEL: func.func @att_pack_a(
// CHECK: scf.for %{{.*}} = %c0 to %c100 step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1 iter_args(%{{.*}}) -> (vector<16xf32>) {
// CHECK-COUNT-4: vector.load %[[A:arg[0-9]+]][{{.*}}] : memref<40000xf32>, vector<16xf32>
// CHECK-NOT: vector.maskedload
// CHECK: scf.yield %{{.*}} : vector<16xf32>
// CHECK: vector.reduction <or>, %{{.*}} : vector<16xi1> into i1
// CHECK: vector.maskedload %[[A]][{{.*}}]
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK: arith.maximumf
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK-NOT: maskedstore
// CHECK: vector.store %{{.*}}, %[[AP:arg[0-9]+]][{{.*}}] : memref<40800xf32>, vector<16xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1 {
// CHECK: vector.maskedstore %[[AP]][
// CHECK-NOT: memref.store
// CHECK-NOT: vector.reduction <maximumf>
// CHECK-LABEL: func.func @att_pack_b(
// AVX2-LABEL: func.func @att_pack_a(
// AVX2: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%{{.*}}) -> (vector<8xf32>) {
// AVX2-COUNT-4: vector.load %[[A:arg[0-9]+]][{{.*}}] : memref<40000xf32>, vector<8xf32>
// AVX2: vector.maskedload %[[A]][
// AVX2: scf.for %{{.*}} = %c0 to %c3 step %c1 {
// AVX2: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// AVX2: vector.store %{{.*}}, %[[AP:arg[0-9]+]][{{.*}}] : memref<40800xf32>, vector<8xf32>
// AVX2: scf.for %{{.*}} = %c0 to %c1 step %c1 {
// AVX2: vector.maskedstore %[[AP]][
// AVX2-NOT: memref.store
// AVX2-LABEL: func.func @att_pack_b(
module {
  func.func private @att(%arg0: memref<25600xf32>, %arg2: memref<40000xf32>, %arg3: memref<25600xf32>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %n = "uop.const"() {value = 100 : index} : () -> index
    %c6400 = "uop.const"() {value = 6400 : index} : () -> index
    %c10000 = "uop.const"() {value = 10000 : index} : () -> index
    %t = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%c64) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%n) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %k2 = "uop.range"(%n) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %ts = "uop.mul"(%t, %c10000) : (index, index) -> index
    %is = "uop.mul"(%i, %n) : (index, index) -> index
    %row = "uop.add"(%ts, %is) : (index, index) -> index
    %p2 = "uop.add"(%row, %k2) : (index, index) -> index
    %x2i = "uop.index"(%arg2, %p2) : (memref<40000xf32>, index) -> !uop.ptr<f32>
    %x2 = "uop.load"(%x2i) : (!uop.ptr<f32>) -> f32
    %m = "uop.reduce"(%x2, %k2) {op = "max"} : (f32, index) -> f32
    %p = "uop.add"(%row, %k) : (index, index) -> index
    %xi = "uop.index"(%arg2, %p) : (memref<40000xf32>, index) -> !uop.ptr<f32>
    %x = "uop.load"(%xi) : (!uop.ptr<f32>) -> f32
    %d = "uop.sub"(%x, %m) : (f32, f32) -> f32
    %e = "uop.exp2"(%d) : (f32) -> f32
    %tv = "uop.mul"(%t, %c6400) : (index, index) -> index
    %kv = "uop.mul"(%k, %c64) : (index, index) -> index
    %q0 = "uop.add"(%tv, %kv) : (index, index) -> index
    %q1 = "uop.add"(%q0, %j) : (index, index) -> index
    %bi = "uop.index"(%arg3, %q1) : (memref<25600xf32>, index) -> !uop.ptr<f32>
    %b = "uop.load"(%bi) : (!uop.ptr<f32>) -> f32
    %pr = "uop.mul"(%e, %b) : (f32, f32) -> f32
    %s = "uop.reduce"(%pr, %k) {op = "add"} : (f32, index) -> f32
    %io = "uop.mul"(%i, %c64) : (index, index) -> index
    %o0 = "uop.add"(%tv, %io) : (index, index) -> index
    %o1 = "uop.add"(%o0, %j) : (index, index) -> index
    %oi = "uop.index"(%arg0, %o1) : (memref<25600xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%oi, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %end = "uop.end"(%st, %t, %i, %j) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%end) : (!uop.token) -> ()
    return
  }
}
