// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16},uop-lower-cpu' | FileCheck %s

// uop.keep (softmax of 4 rows of 8, under a vector of lanes): the row sum's loop stores each exp2 it adds where the output goes, and the output
// loop loads it back from there (from cache) and scales it in place instead of computing exp2 again: one polynomial
// (one roundeven) per element. With a float16 output the float32 values cannot wait in the output: they go to a
// scratch row on the stack.
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: memref.alloca
// CHECK: arith.maximumf
// CHECK: math.roundeven
// CHECK: memref.store %[[E:.*]], %arg0[%[[R:.*]]] : memref<32xf32>
// CHECK-NEXT: arith.addf %{{.*}}, %[[E]] fastmath<reassoc,contract>
// CHECK-NOT: math.roundeven
// CHECK: %[[L:.*]] = memref.load %arg0[%[[J:.*]]] : memref<32xf32>
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[L]]
// CHECK-NEXT: memref.store %[[D]], %arg0[%[[J]]] : memref<32xf32>
// CHECK-NOT: math.roundeven
// CHECK: return
// CHECK-LABEL: func.func @softmax_f16(
// CHECK: %[[K:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK: math.roundeven
// CHECK: memref.store %[[E:.*]], %[[K]][%{{.*}}] : memref<8xf32>
// CHECK-NOT: math.roundeven
// CHECK: memref.load %[[K]][%{{.*}}] : memref<8xf32>
// CHECK-NOT: math.roundeven
// CHECK: return
module {
  func.func private @softmax(%arg0: memref<32xf32>, %arg1: memref<32xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 8 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %12 = "uop.add"(%4, %11) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.reduce"(%14, %11) {op = "max"} : (f32, index) -> f32
    %16 = "uop.sub"(%10, %15) : (f32, f32) -> f32
    %17 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %18 = "uop.mul"(%16, %17) : (f32, f32) -> f32
    %19 = "uop.exp2"(%18) : (f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %23 = "uop.load"(%22) : (!uop.ptr<f32>) -> f32
    %24 = "uop.sub"(%23, %15) : (f32, f32) -> f32
    %25 = "uop.mul"(%24, %17) : (f32, f32) -> f32
    %26 = "uop.exp2"(%25) : (f32) -> f32
    %27 = "uop.reduce"(%26, %20) {op = "add"} : (f32, index) -> f32
    %28 = "uop.fdiv"(%19, %27) : (f32, f32) -> f32
    %29 = "uop.store"(%7, %28) : (!uop.ptr<f32>, f32) -> !uop.token
    %30 = "uop.end"(%29, %2, %5) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%30) : (!uop.token) -> ()
    return
  }

  func.func private @softmax_f16(%arg0: memref<32xf16>, %arg1: memref<32xf16>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 8 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<32xf16>, index) -> !uop.ptr<f16>
    %9 = "uop.index"(%arg1, %6) : (memref<32xf16>, index) -> !uop.ptr<f16>
    %10 = "uop.load"(%9) : (!uop.ptr<f16>) -> f16
    %11 = "uop.cast"(%10) : (f16) -> f32
    %12 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.add"(%4, %12) : (index, index) -> index
    %14 = "uop.index"(%arg1, %13) : (memref<32xf16>, index) -> !uop.ptr<f16>
    %15 = "uop.load"(%14) : (!uop.ptr<f16>) -> f16
    %16 = "uop.cast"(%15) : (f16) -> f32
    %17 = "uop.reduce"(%16, %12) {op = "max"} : (f32, index) -> f32
    %18 = "uop.sub"(%11, %17) : (f32, f32) -> f32
    %19 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %20 = "uop.mul"(%18, %19) : (f32, f32) -> f32
    %21 = "uop.exp2"(%20) : (f32) -> f32
    %22 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %23 = "uop.add"(%4, %22) : (index, index) -> index
    %24 = "uop.index"(%arg1, %23) : (memref<32xf16>, index) -> !uop.ptr<f16>
    %25 = "uop.load"(%24) : (!uop.ptr<f16>) -> f16
    %26 = "uop.cast"(%25) : (f16) -> f32
    %27 = "uop.sub"(%26, %17) : (f32, f32) -> f32
    %28 = "uop.mul"(%27, %19) : (f32, f32) -> f32
    %29 = "uop.exp2"(%28) : (f32) -> f32
    %30 = "uop.reduce"(%29, %22) {op = "add"} : (f32, index) -> f32
    %31 = "uop.fdiv"(%21, %30) : (f32, f32) -> f32
    %32 = "uop.cast"(%31) : (f32) -> f16
    %33 = "uop.store"(%7, %32) : (!uop.ptr<f16>, f16) -> !uop.token
    %34 = "uop.end"(%33, %2, %5) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%34) : (!uop.token) -> ()
    return
  }

}
