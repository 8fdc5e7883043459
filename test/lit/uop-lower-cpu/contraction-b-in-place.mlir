// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 64 -> 24 channel 1x1 convolution on a 21x21 image: one block of A's rows (24 output channels) sweeps each panel of
// B, the image, whose columns (441 positions over two ranges) are a channel's positions in sequence: B's rows are read
// where they are (Contraction.b_in_place), 441 floats apart, with no pack_b; the last panel holds 441 - 13 * 32 = 25
// columns, so the tile's second vector loads under a mask of the columns left (its first is whole in every panel). The
// weights (A, row-major) are read in place too: no scratch but the placeholders.
// CHECK-NOT: func.func @r_24_21_21_64_k0_pack_b
// CHECK-LABEL: func.func @r_24_21_21_64_k0_mm(
// CHECK-SAME: %arg4: memref<1xf32>, %arg5: memref<1xf32>, %arg6: memref<1xf32>
// CHECK: %[[LEFT:.*]] = arith.subi %c441, %[[COL:.*]] : index
// CHECK: %[[REST:.*]] = arith.addi %[[LEFT]], %c-16 : index
// CHECK: %[[MASK:.*]] = vector.create_mask %[[REST]] : vector<16xi1>
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %c1 iter_args(
// CHECK: %[[ROW:.*]] = arith.muli %[[K]], %c441{{.*}} : index
// CHECK: %[[AT:.*]] = arith.addi %[[COL]], %[[ROW]] : index
// CHECK: vector.load %arg1[%[[AT]]] : memref<28224xf32>, vector<16xf32>
// CHECK: %[[AT2:.*]] = arith.addi %[[AT]], %c16{{.*}} : index
// CHECK: vector.maskedload %arg1[%[[AT2]]], %[[MASK]], %cst : memref<28224xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK-COUNT-16: vector.fma
// CHECK-LABEL: func.func @schedule(
// CHECK-NOT: call @r_24_21_21_64_k0_pack
// CHECK: call @r_24_21_21_64_k0_mm(
module {
  func.func private @r_24_21_21_64_k0(%arg0: memref<10584xf32>, %arg1: memref<28224xf32>, %arg2: memref<1536xf32>, %arg3: memref<24xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 24 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 441 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 21 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<10584xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 64 : index} : () -> index
    %12 = "uop.range"(%11) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.mul"(%12, %2) : (index, index) -> index
    %14 = "uop.add"(%13, %8) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<28224xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %11) : (index, index) -> index
    %18 = "uop.add"(%17, %12) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<1536xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.mul"(%16, %20) : (f32, f32) -> f32
    %22 = "uop.reduce"(%21, %12) {op = "add"} : (f32, index) -> f32
    %23 = "uop.index"(%arg3, %1) : (memref<24xf32>, index) -> !uop.ptr<f32>
    %24 = "uop.load"(%23) : (!uop.ptr<f32>) -> f32
    %25 = "uop.add"(%22, %24) : (f32, f32) -> f32
    %26 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %27 = "uop.cmplt"(%25, %26) : (f32, f32) -> i1
    %28 = "uop.cmpeq"(%25, %26) : (f32, f32) -> i1
    %29 = "uop.or"(%27, %28) : (i1, i1) -> i1
    %30 = "uop.where"(%29, %26, %25) : (i1, f32, f32) -> f32
    %31 = "uop.store"(%10, %30) : (!uop.ptr<f32>, f32) -> !uop.token
    %32 = "uop.end"(%31, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%32) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<28224xf32>, %arg1: memref<1536xf32>, %arg2: memref<24xf32>, %arg3: memref<10584xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_24_21_21_64_k0, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
