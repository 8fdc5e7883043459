// RUN: morok-opt %s -p 'uop-lower-cpu' | FileCheck %s

module {
  // uop.lanes = 8 on a store two elements apart a lane (out[2i] = 2 in[i]), without a partner store for the elements
  // between: the 8 lanes spread over 16 elements (every second one taken) and one masked store of those 16, the ones
  // between left unwritten.
  // CHECK-LABEL: func.func @spread(
  // CHECK: %[[V:.*]] = arith.mulf %{{.*}} : vector<8xf32>
  // CHECK: %[[W:.*]] = vector.shuffle %[[V]], %[[V]] [0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0] : vector<8xf32>, vector<8xf32>
  // CHECK: %[[M:.*]] = arith.constant dense<[true, false, true, false, true, false, true, false, true, false, true, false, true, false, true, false]> : vector<16xi1>
  // CHECK: vector.maskedstore %arg0[%{{.*}}], %[[M]], %[[W]] : memref<128xf32>, vector<16xi1>, vector<16xf32>
  // CHECK-NOT: vector.store
  func.func private @spread(%arg0: memref<128xf32>, %arg1: memref<64xf32>) attributes {uop.kernel, uop.lanes = 8 : i64} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %two = "uop.const"() {value = 2.0 : f32} : () -> f32
    %i = "uop.range"(%c64) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %p = "uop.index"(%arg1, %i) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %m = "uop.mul"(%v, %two) : (f32, f32) -> f32
    %j = "uop.mul"(%i, %c2) : (index, index) -> index
    %o = "uop.index"(%arg0, %j) : (memref<128xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
