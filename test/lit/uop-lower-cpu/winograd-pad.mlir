// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 3x3 convolution of 64 -> 61 channels at 26x26 as Winograd: the products read only what the call writes.
// wt: A's 8-row panels hold 64 rows for 61 channels: rows 61..63 repeat row 60 (the memory there is whatever it held
//     before, and a denormal read by an FMA costs an Intel core a microcode assist);
// pad: 13 rows of 16 tiles are 208 columns, 32-wide panels 224: each call zeroes the last panel (16 products, 64 rows
//     of 32) before the input transform writes its columns.
// CHECK-LABEL: func.func @{{.*}}_wt(
// CHECK: arith.minsi %{{.*}}, %c60 : index
// CHECK-LABEL: func.func @{{.*}}_pad(
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[PANEL:.*]] = arith.constant 2048 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[PANEL]]
// CHECK: memref.store %[[ZERO]], %arg4[
// CHECK-LABEL: func.func @{{.*}}_in(
// CHECK-LABEL: func.func @schedule(
// CHECK: call @{{.*}}_wt(
// CHECK-NEXT: call @{{.*}}_pad(
// CHECK: call @{{.*}}_in(
// CHECK: call @{{.*}}_mm(
module {
  func.func private @r_61_26_26_3_3_64_k0(%arg0: memref<41236xf32>, %arg1: memref<43264xf32>, %arg2: memref<35136xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 61 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 676 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 26 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<41236xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 0 : index} : () -> index
    %12 = "uop.const"() {value = 3 : index} : () -> index
    %13 = "uop.range"(%12) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %14 = "uop.const"() {value = 29 : index} : () -> index
    %15 = "uop.mul"(%13, %14) : (index, index) -> index
    %16 = "uop.add"(%15, %5) : (index, index) -> index
    %17 = "uop.const"() {value = 28 : index} : () -> index
    %18 = "uop.mod"(%16, %17) : (index, index) -> index
    %19 = "uop.cmplt"(%11, %18) : (index, index) -> i1
    %20 = "uop.const"() {value = 27 : index} : () -> index
    %21 = "uop.cmplt"(%18, %20) : (index, index) -> i1
    %22 = "uop.and"(%19, %21) : (i1, i1) -> i1
    %23 = "uop.range"(%12) {axis = 5 : i64, kind = "reduce"} : (index) -> index
    %24 = "uop.mul"(%23, %14) : (index, index) -> index
    %25 = "uop.add"(%24, %7) : (index, index) -> index
    %26 = "uop.mod"(%25, %17) : (index, index) -> index
    %27 = "uop.cmplt"(%11, %26) : (index, index) -> i1
    %28 = "uop.cmplt"(%26, %20) : (index, index) -> i1
    %29 = "uop.and"(%27, %28) : (i1, i1) -> i1
    %30 = "uop.and"(%22, %29) : (i1, i1) -> i1
    %31 = "uop.const"() {value = -1 : index} : () -> index
    %32 = "uop.add"(%18, %31) : (index, index) -> index
    %33 = "uop.mul"(%32, %4) : (index, index) -> index
    %34 = "uop.add"(%26, %33) : (index, index) -> index
    %35 = "uop.const"() {value = 64 : index} : () -> index
    %36 = "uop.range"(%35) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %37 = "uop.mul"(%36, %2) : (index, index) -> index
    %38 = "uop.add"(%34, %37) : (index, index) -> index
    %39 = "uop.add"(%38, %31) : (index, index) -> index
    %40 = "uop.index"(%arg1, %39, %30) : (memref<43264xf32>, index, i1) -> !uop.ptr<f32>
    %41 = "uop.load"(%40) : (!uop.ptr<f32>) -> f32
    %42 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %43 = "uop.where"(%30, %41, %42) : (i1, f32, f32) -> f32
    %44 = "uop.const"() {value = 576 : index} : () -> index
    %45 = "uop.mul"(%1, %44) : (index, index) -> index
    %46 = "uop.const"() {value = 9 : index} : () -> index
    %47 = "uop.mul"(%36, %46) : (index, index) -> index
    %48 = "uop.mul"(%13, %12) : (index, index) -> index
    %49 = "uop.add"(%48, %23) : (index, index) -> index
    %50 = "uop.add"(%47, %49) : (index, index) -> index
    %51 = "uop.add"(%45, %50) : (index, index) -> index
    %52 = "uop.index"(%arg2, %51) : (memref<35136xf32>, index) -> !uop.ptr<f32>
    %53 = "uop.load"(%52) : (!uop.ptr<f32>) -> f32
    %54 = "uop.mul"(%43, %53) : (f32, f32) -> f32
    %55 = "uop.reduce"(%54, %36, %13, %23) {op = "add"} : (f32, index, index, index) -> f32
    %56 = "uop.store"(%10, %55) : (!uop.ptr<f32>, f32) -> !uop.token
    %57 = "uop.end"(%56, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%57) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<43264xf32>, %arg1: memref<35136xf32>, %arg2: memref<41236xf32>) attributes {uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_61_26_26_3_3_64_k0, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
