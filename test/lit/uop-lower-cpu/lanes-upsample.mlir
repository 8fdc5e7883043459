// RUN: morok-opt %s -p 'uop-lower-cpu' | FileCheck %s

module {
  // uop.lanes = 8 on a load of in[i // 2] (a nearest upsample by 2 along the lanes): each group of 8 lanes reads the 4
  // elements its lanes share, one plain vector load, and one shuffle spreads each to its two lanes.
  // CHECK-LABEL: func.func @upsample(
  // CHECK: %[[L:.*]] = vector.load %arg1[%{{.*}}] : memref<32xf32>, vector<4xf32>
  // CHECK: %[[S:.*]] = vector.shuffle %[[L]], %[[L]] [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xf32>, vector<4xf32>
  // CHECK: arith.mulf %[[S]], %{{.*}} : vector<8xf32>
  func.func private @upsample(%arg0: memref<64xf32>, %arg1: memref<32xf32>) attributes {uop.kernel, uop.lanes = 8 : i64} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %two = "uop.const"() {value = 2.0 : f32} : () -> f32
    %i = "uop.range"(%c64) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %h = "uop.idiv"(%i, %c2) : (index, index) -> index
    %p = "uop.index"(%arg1, %h) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %m = "uop.mul"(%v, %two) : (f32, f32) -> f32
    %o = "uop.index"(%arg0, %i) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }

  // 60 outputs: the last group's lanes 4-7 are gated off. An element is read where either of its two lanes' gates holds
  // (the lane mask's even and odd halves ORed), by a plain load where every lane's holds, and gated lanes take 0.
  // CHECK-LABEL: func.func @upsample_tail(
  // CHECK: %[[G:.*]] = arith.cmpi slt, %{{.*}} : vector<8xi32>
  // CHECK: %[[E:.*]] = vector.shuffle %[[G]], %[[G]] [0, 2, 4, 6] : vector<8xi1>, vector<8xi1>
  // CHECK: %[[O:.*]] = vector.shuffle %[[G]], %[[G]] [1, 3, 5, 7] : vector<8xi1>, vector<8xi1>
  // CHECK: %[[M:.*]] = arith.ori %[[E]], %[[O]] : vector<4xi1>
  // CHECK: vector.load %arg1[%{{.*}}] : memref<32xf32>, vector<4xf32>
  // CHECK: vector.maskedload %arg1[%{{.*}}], %[[M]], %{{.*}} : memref<32xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  // CHECK: %[[T:.*]] = vector.shuffle %{{.*}} [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xf32>, vector<4xf32>
  // CHECK: arith.select %[[G]], %[[T]], %{{.*}} : vector<8xi1>, vector<8xf32>
  func.func private @upsample_tail(%arg0: memref<64xf32>, %arg1: memref<32xf32>) attributes {uop.kernel, uop.lanes = 8 : i64} {
    %c64 = "uop.const"() {value = 60 : index} : () -> index
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %two = "uop.const"() {value = 2.0 : f32} : () -> f32
    %i = "uop.range"(%c64) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %h = "uop.idiv"(%i, %c2) : (index, index) -> index
    %p = "uop.index"(%arg1, %h) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %m = "uop.mul"(%v, %two) : (f32, f32) -> f32
    %o = "uop.index"(%arg0, %i) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%o, %m) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
