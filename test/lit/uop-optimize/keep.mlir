// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=64}' | FileCheck %s --check-prefix=SMALL

// softmax of 4 rows of 8: the output loop computes exp2((x - max) * log2e) again at its own index, what the row sum
// (the reduce over axis 3) reduced: that reduce keeps its source (uop.keep names it by its range's axis). A row of
// x * 2 is too cheap to keep, and with an L2 of 64 bytes a row of 8 f32 does not fit the scratch budget (l2 / 4).
// CHECK-LABEL: func.func private @softmax
// CHECK-SAME: uop.keep = array<i64: 3>
// CHECK-LABEL: func.func private @cheap
// CHECK-NOT: uop.keep
// SMALL-LABEL: func.func private @softmax
// SMALL-NOT: uop.keep
// A kept row waits in the output (see uop-lower-cpu/keep.mlir), scaled there from cache; but the 4096x4096 softmax's
// output is big enough to stream past the cache: its kept rows wait in a per-thread scratch row instead
// (uop-lower-cpu/keep-nontemporal.mlir), and no line of the output is read before it is written. Recomputing, it is
// streamed too (SMALL).
// CHECK-LABEL: func.func private @big
// CHECK-SAME: uop.keep = array<i64: 3>
// CHECK-SAME: uop.nontemporal = 8
// SMALL-LABEL: func.func private @big
// SMALL-SAME: uop.nontemporal = 8
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

  func.func private @cheap(%arg0: memref<32xf32>, %arg1: memref<32xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 8 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %17 = "uop.const"() {value = 2.0 : f32} : () -> f32
    %18 = "uop.mul"(%10, %17) : (f32, f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %23 = "uop.load"(%22) : (!uop.ptr<f32>) -> f32
    %25 = "uop.mul"(%23, %17) : (f32, f32) -> f32
    %27 = "uop.reduce"(%25, %20) {op = "add"} : (f32, index) -> f32
    %28 = "uop.fdiv"(%18, %27) : (f32, f32) -> f32
    %29 = "uop.store"(%7, %28) : (!uop.ptr<f32>, f32) -> !uop.token
    %30 = "uop.end"(%29, %2, %5) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%30) : (!uop.token) -> ()
    return
  }
  func.func private @big(%arg0: memref<16777216xf32>, %arg1: memref<16777216xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4096 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 4096 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<16777216xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<16777216xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %12 = "uop.add"(%4, %11) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<16777216xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.reduce"(%14, %11) {op = "max"} : (f32, index) -> f32
    %16 = "uop.sub"(%10, %15) : (f32, f32) -> f32
    %17 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %18 = "uop.mul"(%16, %17) : (f32, f32) -> f32
    %19 = "uop.exp2"(%18) : (f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<16777216xf32>, index) -> !uop.ptr<f32>
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

}
