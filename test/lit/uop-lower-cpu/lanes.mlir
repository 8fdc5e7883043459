// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8},uop-lower-cpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8}' | FileCheck %s --check-prefix=OPT

module {
  // A 1-D max pool, window 3, stride 2, padding 1: out[i] = max over k of in[2i + k - 1] where in range. The reduce
  // inside the output loop keeps LLVM from vectorizing that loop, so uop-optimize asks for 8 lanes (64 = 8 * 8):
  // 8 neighbouring outputs as one vector, each of the window's 3 taps one load of 16 elements with every second one taken
  // (stride 2): a plain load where every lane's padding gate holds and the 16 elements lie in the buffer (scalar tests),
  // else a masked one (padding gated off); the taps combined as a tree (no loop: none waits on an accumulator) of
  // compare-and-selects (one vmaxps each), NaN where any tap is NaN (unordered compares of pairs, ORed), one vector store.
  // OPT-LABEL: func.func private @pool
  // OPT-SAME: uop.lanes = 8
  // CHECK-LABEL: func.func @pool(
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %c8 step
  // CHECK-NOT: scf.for
  // CHECK: %[[IN:.*]] = arith.cmpi slt, %[[B:.*]], %c113 : index
  // CHECK: %[[ON:.*]] = arith.andi %{{.*}}, %[[IN]] : i1
  // CHECK: %[[V:.*]] = scf.if %[[ON]] -> (vector<16xf32>) {
  // CHECK-NEXT: vector.load %arg1[%[[B]]] : memref<128xf32>, vector<16xf32>
  // CHECK: } else {
  // CHECK-NEXT: vector.maskedload %arg1[%[[B]]], %{{.*}}, %{{.*}} : memref<128xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
  // CHECK: vector.shuffle %[[V]], %[[V]] [0, 2, 4, 6, 8, 10, 12, 14]
  // CHECK: vector.maskedload %arg1
  // CHECK: vector.maskedload %arg1
  // CHECK: %[[N0:.*]] = arith.cmpf uno, %[[T0:.*]], %[[T1:.*]] : vector<8xf32>
  // CHECK: %[[N1:.*]] = arith.cmpf uno, %[[T2:.*]], %[[T2]] : vector<8xf32>
  // CHECK: %[[NAN:.*]] = arith.ori %[[N0]], %[[N1]] : vector<8xi1>
  // CHECK: %[[G0:.*]] = arith.cmpf ogt, %[[T0]], %[[T1]] : vector<8xf32>
  // CHECK: %[[M:.*]] = arith.select %[[G0]], %[[T0]], %[[T1]] : vector<8xi1>, vector<8xf32>
  // CHECK: %[[G1:.*]] = arith.cmpf ogt, %[[M]], %[[T2]] : vector<8xf32>
  // CHECK: %[[M2:.*]] = arith.select %[[G1]], %[[M]], %[[T2]] : vector<8xi1>, vector<8xf32>
  // CHECK: %[[R:.*]] = arith.select %[[NAN]], %{{.*}}, %[[M2]] : vector<8xi1>, vector<8xf32>
  // CHECK: vector.store %[[R]], %arg0[%{{.*}}] : memref<64xf32>, vector<8xf32>
  func.func private @pool(%arg0: memref<64xf32>, %arg1: memref<128xf32>) attributes {uop.kernel} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %cm1 = "uop.const"() {value = -1 : index} : () -> index
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c128 = "uop.const"() {value = 128 : index} : () -> index
    %i = "uop.range"(%c64) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %a = "uop.mul"(%i, %c2) : (index, index) -> index
    %b = "uop.add"(%a, %k) : (index, index) -> index
    %j = "uop.add"(%b, %cm1) : (index, index) -> index
    %lo = "uop.cmplt"(%cm1, %j) : (index, index) -> i1
    %hi = "uop.cmplt"(%j, %c128) : (index, index) -> i1
    %ok = "uop.and"(%lo, %hi) : (i1, i1) -> i1
    %p = "uop.index"(%arg1, %j, %ok) : (memref<128xf32>, index, i1) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %ninf = "uop.const"() {value = 0xFF800000 : f32} : () -> f32
    %g = "uop.where"(%ok, %v, %ninf) : (i1, f32, f32) -> f32
    %m = "uop.reduce"(%g, %k) {op = "max"} : (f32, index) -> f32
    %o = "uop.index"(%arg0, %i) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }

  // 7 outputs: 8 lanes, the last masked off: no lane past the output loads or stores (gates with lane < 7). Each gate
  // is affine in the lane: one i32 compare of the lanes' constant steps against a scalar bound, at the load's width (16
  // elements for stride 2, every second off: their constant the largest i32) where it gates a load.
  // OPT-LABEL: func.func private @pool7
  // OPT-SAME: uop.lanes = 8
  // CHECK-LABEL: func.func @pool7(
  // CHECK: %[[W:.*]] = arith.constant dense<[0, 2147483647, -2, 2147483647, -4, {{.*}}]> : vector<16xi32>
  // CHECK: arith.cmpi slt, %[[W]], %{{.*}} : vector<16xi32>
  // CHECK: vector.maskedload %arg1[%{{.*}}], %{{.*}}, %{{.*}} : memref<14xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
  // CHECK: %[[L:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi32>
  // CHECK: %[[SEVEN:.*]] = arith.cmpi slt, %[[L]], %{{.*}} : vector<8xi32>
  // CHECK: vector.maskedstore %arg0[%{{.*}}], %[[SEVEN]], %{{.*}} : memref<7xf32>, vector<8xi1>, vector<8xf32>
  func.func private @pool7(%arg0: memref<7xf32>, %arg1: memref<14xf32>) attributes {uop.kernel} {
    %c7 = "uop.const"() {value = 7 : index} : () -> index
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %cm1 = "uop.const"() {value = -1 : index} : () -> index
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c14 = "uop.const"() {value = 14 : index} : () -> index
    %i = "uop.range"(%c7) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %a = "uop.mul"(%i, %c2) : (index, index) -> index
    %b = "uop.add"(%a, %k) : (index, index) -> index
    %j = "uop.add"(%b, %cm1) : (index, index) -> index
    %lo = "uop.cmplt"(%cm1, %j) : (index, index) -> i1
    %hi = "uop.cmplt"(%j, %c14) : (index, index) -> i1
    %ok = "uop.and"(%lo, %hi) : (i1, i1) -> i1
    %p = "uop.index"(%arg1, %j, %ok) : (memref<14xf32>, index, i1) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %ninf = "uop.const"() {value = 0xFF800000 : f32} : () -> f32
    %g = "uop.where"(%ok, %v, %ninf) : (i1, f32, f32) -> f32
    %m = "uop.reduce"(%g, %k) {op = "max"} : (f32, index) -> f32
    %o = "uop.index"(%arg0, %i) : (memref<7xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
