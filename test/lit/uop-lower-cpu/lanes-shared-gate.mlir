// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8},uop-lower-cpu' | FileCheck %s

module {
  // A max pool (window 2, stride 2) over a cat of two 2-channel parts along the channels, as a pool reads a fire
  // module's output: each part's load is gated by the channel (c < 2, 1 < c), a gate every lane shares. Each load runs
  // under an scf.if on its scalar gate, zeros where it fails, rather than as a load with every lane masked off: a
  // channel reads only the part it is in (a plain load where its 16 elements lie in the buffer, else a masked one).
  // CHECK-LABEL: func.func @catpool(
  // CHECK: %[[A:.*]] = scf.if %{{.*}} -> (vector<8xf32>) {
  // CHECK-NEXT: %[[V:.*]] = scf.if %{{.*}} -> (vector<16xf32>) {
  // CHECK-NEXT: vector.load %arg1
  // CHECK: vector.maskedload %arg1[%{{.*}}], %{{.*}}, %{{.*}} : memref<32xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
  // CHECK: %[[S:.*]] = vector.shuffle %[[V]], %[[V]] [0, 2, 4, 6, 8, 10, 12, 14]
  // CHECK-NEXT: scf.yield %[[S]] : vector<8xf32>
  // CHECK-NEXT: } else {
  // CHECK-NEXT: %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
  // CHECK-NEXT: scf.yield %[[Z]] : vector<8xf32>
  // CHECK: scf.if %{{.*}} -> (vector<8xf32>) {
  // CHECK-NEXT: scf.if %{{.*}} -> (vector<16xf32>) {
  // CHECK-NEXT: vector.load %arg2
  func.func private @catpool(%arg0: memref<32xf32>, %arg1: memref<32xf32>, %arg2: memref<32xf32>) attributes {uop.kernel} {
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c1 = "uop.const"() {value = 1 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c8 = "uop.const"() {value = 8 : index} : () -> index
    %c16 = "uop.const"() {value = 16 : index} : () -> index
    %cm32 = "uop.const"() {value = -32 : index} : () -> index
    %c = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%c8) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c2) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %i2 = "uop.mul"(%i, %c2) : (index, index) -> index
    %j = "uop.add"(%i2, %k) : (index, index) -> index
    %row = "uop.mul"(%c, %c16) : (index, index) -> index
    %at = "uop.add"(%row, %j) : (index, index) -> index
    %lt = "uop.cmplt"(%c, %c2) : (index, index) -> i1
    %ge = "uop.cmplt"(%c1, %c) : (index, index) -> i1
    %pa = "uop.index"(%arg1, %at, %lt) : (memref<32xf32>, index, i1) -> !uop.ptr<f32>
    %va = "uop.load"(%pa) : (!uop.ptr<f32>) -> f32
    %zero = "uop.const"() {value = 0.0 : f32} : () -> f32
    %wa = "uop.where"(%lt, %va, %zero) : (i1, f32, f32) -> f32
    %atb = "uop.add"(%at, %cm32) : (index, index) -> index
    %pb = "uop.index"(%arg2, %atb, %ge) : (memref<32xf32>, index, i1) -> !uop.ptr<f32>
    %vb = "uop.load"(%pb) : (!uop.ptr<f32>) -> f32
    %x = "uop.where"(%lt, %wa, %vb) : (i1, f32, f32) -> f32
    %m = "uop.reduce"(%x, %k) {op = "max"} : (f32, index) -> f32
    %orow = "uop.mul"(%c, %c8) : (index, index) -> index
    %oat = "uop.add"(%orow, %i) : (index, index) -> index
    %o = "uop.index"(%arg0, %oat) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %c, %i) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
