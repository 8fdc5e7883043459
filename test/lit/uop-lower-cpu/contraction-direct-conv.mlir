// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432}' | FileCheck %s --check-prefix=OPT
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 3 -> 16 channel 6x6 convolution of stride 2, padding 2, on a 40x40 image (a detector's stem): few output channels,
// so a direct convolution (kernel_facts.direct_conv): the image is operand a, its tile rows 8 output positions, the
// tile's vectors 16 output channels; the tiles' rows are 400 output positions.
// OPT: func.func private @r_16_20_20_6_6_3_k0({{.*}}uop.contraction = array<i64: 8, 16, 108, 200, 16>, uop.direct_conv
// pack_a is the padded copy of the image (3 x 44 x 44: each window's extent, 2 * 19 + 6), a row of it 16 lanes at a
// time, the padding's masks on the loads and the row's tail masked on the store; pack_b packs the weights.
// CHECK-LABEL: func.func @r_16_20_20_6_6_3_k0_pack_a(
// CHECK-SAME: %arg3: memref<5808xf32>
// CHECK: vector.maskedload %arg1[
// CHECK: vector.maskedstore %arg3[
// CHECK-LABEL: func.func @r_16_20_20_6_6_3_k0_pack_b(
// mm's k loop nests as the window's ranges (3 channels, 6 rows, 6 columns), each step one element of the padded copy
// per tile row (8), broadcast, times the weights' vector: no im2col of the image anywhere.
// CHECK-LABEL: func.func @r_16_20_20_6_6_3_k0_mm(
// CHECK: %{{.*}}:8 = scf.for {{.*}} iter_args(
// CHECK: %{{.*}}:8 = scf.for %{{.*}} = %c0 to %c6{{.*}} iter_args(
// CHECK: %{{.*}}:8 = scf.for %{{.*}} = %c0 to %c6{{.*}} iter_args(
// CHECK-COUNT-8: memref.load %arg3[
// CHECK: func.call @r_16_20_20_6_6_3_k0_epi(
module {
  func.func private @r_16_20_20_6_6_3_k0(%arg0: memref<6400xf32>, %arg1: memref<4800xf32>, %arg2: memref<1728xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 400 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 20 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<6400xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 1 : index} : () -> index
    %12 = "uop.const"() {value = 6 : index} : () -> index
    %13 = "uop.range"(%12) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %14 = "uop.const"() {value = 45 : index} : () -> index
    %15 = "uop.mul"(%13, %14) : (index, index) -> index
    %16 = "uop.const"() {value = 2 : index} : () -> index
    %17 = "uop.mul"(%5, %16) : (index, index) -> index
    %18 = "uop.add"(%15, %17) : (index, index) -> index
    %19 = "uop.const"() {value = 44 : index} : () -> index
    %20 = "uop.mod"(%18, %19) : (index, index) -> index
    %21 = "uop.cmplt"(%11, %20) : (index, index) -> i1
    %22 = "uop.const"() {value = 42 : index} : () -> index
    %23 = "uop.cmplt"(%20, %22) : (index, index) -> i1
    %24 = "uop.and"(%21, %23) : (i1, i1) -> i1
    %25 = "uop.range"(%12) {axis = 5 : i64, kind = "reduce"} : (index) -> index
    %26 = "uop.mul"(%25, %14) : (index, index) -> index
    %27 = "uop.mul"(%7, %16) : (index, index) -> index
    %28 = "uop.add"(%26, %27) : (index, index) -> index
    %29 = "uop.mod"(%28, %19) : (index, index) -> index
    %30 = "uop.cmplt"(%11, %29) : (index, index) -> i1
    %31 = "uop.cmplt"(%29, %22) : (index, index) -> i1
    %32 = "uop.and"(%30, %31) : (i1, i1) -> i1
    %33 = "uop.and"(%24, %32) : (i1, i1) -> i1
    %34 = "uop.const"() {value = -2 : index} : () -> index
    %35 = "uop.add"(%20, %34) : (index, index) -> index
    %36 = "uop.const"() {value = 40 : index} : () -> index
    %37 = "uop.mul"(%35, %36) : (index, index) -> index
    %38 = "uop.add"(%29, %37) : (index, index) -> index
    %39 = "uop.const"() {value = 3 : index} : () -> index
    %40 = "uop.range"(%39) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %41 = "uop.const"() {value = 1600 : index} : () -> index
    %42 = "uop.mul"(%40, %41) : (index, index) -> index
    %43 = "uop.add"(%38, %42) : (index, index) -> index
    %44 = "uop.add"(%43, %34) : (index, index) -> index
    %45 = "uop.index"(%arg1, %44, %33) : (memref<4800xf32>, index, i1) -> !uop.ptr<f32>
    %46 = "uop.load"(%45) : (!uop.ptr<f32>) -> f32
    %47 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %48 = "uop.where"(%33, %46, %47) : (i1, f32, f32) -> f32
    %49 = "uop.const"() {value = 108 : index} : () -> index
    %50 = "uop.mul"(%1, %49) : (index, index) -> index
    %51 = "uop.const"() {value = 36 : index} : () -> index
    %52 = "uop.mul"(%40, %51) : (index, index) -> index
    %53 = "uop.mul"(%13, %12) : (index, index) -> index
    %54 = "uop.add"(%53, %25) : (index, index) -> index
    %55 = "uop.add"(%52, %54) : (index, index) -> index
    %56 = "uop.add"(%50, %55) : (index, index) -> index
    %57 = "uop.index"(%arg2, %56) : (memref<1728xf32>, index) -> !uop.ptr<f32>
    %58 = "uop.load"(%57) : (!uop.ptr<f32>) -> f32
    %59 = "uop.mul"(%48, %58) : (f32, f32) -> f32
    %60 = "uop.reduce"(%59, %40, %13, %25) {op = "add"} : (f32, index, index, index) -> f32
    %61 = "uop.store"(%10, %60) : (!uop.ptr<f32>, f32) -> !uop.token
    %62 = "uop.end"(%61, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%62) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<4800xf32>, %arg1: memref<1728xf32>, %arg2: memref<6400xf32>) attributes {uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_16_20_20_6_6_3_k0, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
