// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A column sum of 256 rows of 512 (a bias gradient) runs as a contraction with a ones vector (optimize.column_reduce)
// whose B, the rows reduced, mm loads where they are (%arg1, rows 2 KiB apart: each is read once, so sharing cache
// sets costs nothing), the last panel's lanes past column 512 masked: no pack_b phase copies the data first.
// CHECK-NOT: func.func @r_512_256_k0_pack_b(
// CHECK-LABEL: func.func @r_512_256_k0_mm(
// CHECK: vector.load %arg1[%{{.*}}] : memref<131072xf32>, vector<8xf32>
// CHECK: vector.maskedload %arg1[
// CHECK-LABEL: func.func @schedule(
// CHECK-NOT: call @r_512_256_k0_pack_b(
// CHECK: call @r_512_256_k0_mm(
module {
  func.func private @r_512_256_k0(%arg0: memref<512xf32>, %arg1: memref<131072xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 512 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<512xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.const"() {value = 256 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.mul"(%4, %0) : (index, index) -> index
    %6 = "uop.add"(%5, %1) : (index, index) -> index
    %7 = "uop.index"(%arg1, %6) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %8 = "uop.load"(%7) : (!uop.ptr<f32>) -> f32
    %9 = "uop.reduce"(%8, %4) {op = "add"} : (f32, index) -> f32
    %10 = "uop.store"(%2, %9) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<131072xf32>, %arg1: memref<512xf32>) attributes {uop.num_inputs = 1 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_512_256_k0, slots = array<i64: 1, 0>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}

