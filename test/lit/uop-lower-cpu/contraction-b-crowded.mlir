// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// The 1x1 convolution of contraction-b-in-place.mlir with 256 input channels on a 56x56 image: B's rows, 3136 floats
// apart (49 KiB * 4: every row of a panel in 16 of the 64 L1 sets' pairs, 16 lines a set), would leave L1 between
// one tile's pass over a panel and the next's, so B is packed whole before mm (Contraction's l1_conflicts) and the
// tiles read its panels' consecutive lines from the scratch buffer %arg5, not the image %arg1.
// CHECK-LABEL: func.func @r_24_56_56_256_k0_pack_b(
// CHECK: vector.load %arg1[
// CHECK-LABEL: func.func @r_24_56_56_256_k0_mm(
// CHECK-NOT: vector.load %arg1[
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1 iter_args(
// CHECK: vector.load %arg5[%{{.*}}] : memref<802816xf32>, vector<16xf32>
// CHECK: vector.load %arg5[%{{.*}}] : memref<802816xf32>, vector<16xf32>
// CHECK-COUNT-16: vector.fma
// CHECK-LABEL: func.func @schedule(
// CHECK: call @r_24_56_56_256_k0_pack_b(
// CHECK: call @r_24_56_56_256_k0_mm(
module {
  func.func private @r_24_56_56_256_k0(%arg0: memref<75264xf32>, %arg1: memref<802816xf32>, %arg2: memref<6144xf32>, %arg3: memref<24xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 24 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 3136 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 56 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<75264xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 256 : index} : () -> index
    %12 = "uop.range"(%11) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.mul"(%12, %2) : (index, index) -> index
    %14 = "uop.add"(%13, %8) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<802816xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %11) : (index, index) -> index
    %18 = "uop.add"(%17, %12) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<6144xf32>, index) -> !uop.ptr<f32>
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
  func.func @schedule(%arg0: memref<802816xf32>, %arg1: memref<6144xf32>, %arg2: memref<24xf32>, %arg3: memref<75264xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_24_56_56_256_k0, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
