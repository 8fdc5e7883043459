// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A detector head: a 1x1 convolution 32 -> 72 channels at 24x24 plus bias, written transposed as [3 anchors, 24, 24,
// 24 classes] through a sigmoid. Its batch is one range of 72 (anchor, image row) problems: the image is read at
// (t % 24)*24 + w and the weights at ((t*24 + w) // 576)*24 + c, so the image's panels are the same for problems 24
// apart and the weights' for 24 problems in a row (Contraction.uses). Ap holds 24 problems (24 x 24 rows x 32 = 18432
// floats, not 72's 55296), Bp 3 (3 x 24 x 32 = 2304, not 55296), each packed once (pack_a over 24, pack_b over 3); mm
// finds problem t's at t % 24 and t // 24. The bias, read at the same anchor index as the weights, steps along the
// tile's columns as the output does: the epilogue runs on each tile (C takes no scratch: memref<1xf32>).
// CHECK-LABEL: func.func @r_1728_24_32_k0_pack_a(
// CHECK-SAME: %arg4: memref<18432xf32>, %arg5: memref<2304xf32>, %arg6: memref<1xf32>
// CHECK-LABEL: func.func @r_1728_24_32_k0_mm(
// CHECK: scf.for %[[BT:.*]] = %arg7 to %arg8
// CHECK: %[[A:.*]] = arith.remui %[[BT]], %c24{{.*}} : index
// CHECK: arith.muli %[[A]], %c768{{.*}} : index
// CHECK: %[[B:.*]] = arith.divui %[[BT]], %c24{{.*}} : index
// CHECK: arith.muli %[[B]], %c768{{.*}} : index
// CHECK: func.call @r_1728_24_32_k0_epi(
// CHECK-LABEL: func.func @schedule(
// CHECK: call @r_1728_24_32_k0_pack_a(%arg3, %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %c0{{.*}}, %c24)
// CHECK: call @r_1728_24_32_k0_pack_b(%arg3, %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %c0{{.*}}, %c3)
// CHECK-NOT: call @r_1728_24_32_k0_epi(
module {
  func.func private @r_1728_24_32_k0(%arg0: memref<41472xf32>, %arg1: memref<18432xf32>, %arg2: memref<2304xf32>, %arg3: memref<72xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 1728 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 24 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.range"(%2) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %5 = "uop.add"(%3, %4) : (index, index) -> index
    %6 = "uop.index"(%arg0, %5) : (memref<41472xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.const"() {value = 1.000000e+00 : f32} : () -> f32
    %8 = "uop.const"() {value = 32 : index} : () -> index
    %9 = "uop.range"(%8) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %10 = "uop.const"() {value = 576 : index} : () -> index
    %11 = "uop.mul"(%9, %10) : (index, index) -> index
    %12 = "uop.idiv"(%1, %2) : (index, index) -> index
    %13 = "uop.mod"(%12, %2) : (index, index) -> index
    %14 = "uop.mul"(%13, %2) : (index, index) -> index
    %15 = "uop.mod"(%1, %2) : (index, index) -> index
    %16 = "uop.add"(%14, %15) : (index, index) -> index
    %17 = "uop.add"(%11, %16) : (index, index) -> index
    %18 = "uop.index"(%arg1, %17) : (memref<18432xf32>, index) -> !uop.ptr<f32>
    %19 = "uop.load"(%18) : (!uop.ptr<f32>) -> f32
    %20 = "uop.idiv"(%1, %10) : (index, index) -> index
    %21 = "uop.mul"(%20, %2) : (index, index) -> index
    %22 = "uop.add"(%21, %4) : (index, index) -> index
    %23 = "uop.mul"(%22, %8) : (index, index) -> index
    %24 = "uop.add"(%23, %9) : (index, index) -> index
    %25 = "uop.index"(%arg2, %24) : (memref<2304xf32>, index) -> !uop.ptr<f32>
    %26 = "uop.load"(%25) : (!uop.ptr<f32>) -> f32
    %27 = "uop.mul"(%19, %26) : (f32, f32) -> f32
    %28 = "uop.reduce"(%27, %9) {op = "add"} : (f32, index) -> f32
    %29 = "uop.index"(%arg3, %22) : (memref<72xf32>, index) -> !uop.ptr<f32>
    %30 = "uop.load"(%29) : (!uop.ptr<f32>) -> f32
    %31 = "uop.add"(%28, %30) : (f32, f32) -> f32
    %32 = "uop.const"() {value = -1.44269502 : f32} : () -> f32
    %33 = "uop.mul"(%31, %32) : (f32, f32) -> f32
    %34 = "uop.exp2"(%33) : (f32) -> f32
    %35 = "uop.add"(%7, %34) : (f32, f32) -> f32
    %36 = "uop.recip"(%35) : (f32) -> f32
    %37 = "uop.store"(%6, %36) : (!uop.ptr<f32>, f32) -> !uop.token
    %38 = "uop.end"(%37, %1, %4) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%38) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<18432xf32>, %arg1: memref<2304xf32>, %arg2: memref<72xf32>, %arg3: memref<41472xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_1728_24_32_k0, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
