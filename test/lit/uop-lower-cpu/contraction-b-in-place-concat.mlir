// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// The 1x1 convolution of contraction-b-in-place.mlir on a concatenation of two images along channels (40 from %arg2,
// then 24 from %arg1: B's gates pick one by k < 40): each stretch of k its gates hold constant is a segment of B's rows
// read in place (Contraction.b_in_place), two k loops one after the other within the slice, the second carrying the
// first's accumulators, each loading its own image's rows (441 floats apart) under the same mask of the last panel.
// CHECK-NOT: func.func @r_24_21_21_64_k0_pack_b
// CHECK-LABEL: func.func @r_24_21_21_64_k0_mm(
// CHECK: %[[LO0:.*]] = arith.maxsi %{{.*}}, %c0{{.*}} : index
// CHECK: %[[HI0:.*]] = arith.minsi %{{.*}}, %c40 : index
// CHECK: %[[LO1:.*]] = arith.maxsi %{{.*}}, %c40{{.*}} : index
// CHECK: %[[HI1:.*]] = arith.minsi %{{.*}}, %c64{{.*}} : index
// CHECK: %[[ACC:.*]]:16 = scf.for %{{.*}} = %[[LO0]] to %[[HI0]] step %c1 iter_args(
// CHECK: vector.load %arg2[{{.*}}] : memref<17640xf32>, vector<16xf32>
// CHECK: vector.maskedload %arg2[
// CHECK-COUNT-16: vector.fma
// CHECK: scf.for %{{.*}} = %[[LO1]] to %[[HI1]] step %c1 iter_args(%{{.*}} = %[[ACC]]#0,
// CHECK: vector.load %arg1[{{.*}}] : memref<10584xf32>, vector<16xf32>
// CHECK: vector.maskedload %arg1[
// CHECK-COUNT-16: vector.fma
module {
  func.func private @r_24_21_21_64_k0(%arg0: memref<10584xf32>, %arg1: memref<10584xf32>, %arg2: memref<17640xf32>, %arg3: memref<1536xf32>) attributes {uop.kernel} {
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
    %11 = "uop.const"() {value = 39 : index} : () -> index
    %12 = "uop.const"() {value = 64 : index} : () -> index
    %13 = "uop.range"(%12) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %14 = "uop.cmplt"(%11, %13) : (index, index) -> i1
    %15 = "uop.const"() {value = -40 : index} : () -> index
    %16 = "uop.add"(%13, %15) : (index, index) -> index
    %17 = "uop.mul"(%16, %2) : (index, index) -> index
    %18 = "uop.add"(%17, %8) : (index, index) -> index
    %19 = "uop.index"(%arg1, %18, %14) : (memref<10584xf32>, index, i1) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %22 = "uop.where"(%14, %20, %21) : (i1, f32, f32) -> f32
    %23 = "uop.const"() {value = 40 : index} : () -> index
    %24 = "uop.cmplt"(%13, %23) : (index, index) -> i1
    %25 = "uop.mul"(%13, %2) : (index, index) -> index
    %26 = "uop.add"(%25, %8) : (index, index) -> index
    %27 = "uop.index"(%arg2, %26, %24) : (memref<17640xf32>, index, i1) -> !uop.ptr<f32>
    %28 = "uop.load"(%27) : (!uop.ptr<f32>) -> f32
    %29 = "uop.where"(%24, %28, %21) : (i1, f32, f32) -> f32
    %30 = "uop.where"(%14, %22, %29) : (i1, f32, f32) -> f32
    %31 = "uop.mul"(%1, %12) : (index, index) -> index
    %32 = "uop.add"(%31, %13) : (index, index) -> index
    %33 = "uop.index"(%arg3, %32) : (memref<1536xf32>, index) -> !uop.ptr<f32>
    %34 = "uop.load"(%33) : (!uop.ptr<f32>) -> f32
    %35 = "uop.mul"(%30, %34) : (f32, f32) -> f32
    %36 = "uop.reduce"(%35, %13) {op = "add"} : (f32, index) -> f32
    %37 = "uop.store"(%10, %36) : (!uop.ptr<f32>, f32) -> !uop.token
    %38 = "uop.end"(%37, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%38) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<10584xf32>, %arg1: memref<17640xf32>, %arg2: memref<1536xf32>, %arg3: memref<10584xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_24_21_21_64_k0, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
