// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432}' | FileCheck %s

module {
  // a column sum (a bias gradient: 256 rows of 512): the reduce steps a row (512 floats) per term while the loop reads
  // along the row, so it becomes a contraction with a ones vector (M = 1): rows packed in panels, 16 lanes at a time
  // CHECK-LABEL: func.func private @colsum
  // CHECK-SAME: uop.contraction = array<i64: 1,
  // CHECK: %[[ONE:.*]] = "uop.const"() {value = 1.000000e+00 : f32}
  // CHECK: "uop.mul"(%{{.*}}, %[[ONE]])
  func.func private @colsum(%arg0: memref<512xf32>, %arg1: memref<131072xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 512 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 256 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%3, %0) : (index, index) -> index
    %5 = "uop.add"(%1, %4) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.reduce"(%7, %3) {op = "add"} : (f32, index) -> f32
    %9 = "uop.index"(%arg0, %1) : (memref<512xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  // a column max the same way: the contraction combines with max instead of an FMA (lowering: arith.maximumf)
  // CHECK-LABEL: func.func private @colmax
  // CHECK-SAME: uop.contraction = array<i64: 1,
  // CHECK: "uop.mul"(%{{.*}}, %{{.*}})
  // CHECK: "uop.reduce"({{.*}}) {op = "max"}
  func.func private @colmax(%arg0: memref<512xf32>, %arg1: memref<131072xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 512 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 256 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%3, %0) : (index, index) -> index
    %5 = "uop.add"(%1, %4) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.reduce"(%7, %3) {op = "max"} : (f32, index) -> f32
    %9 = "uop.index"(%arg0, %1) : (memref<512xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  // a row sum of the same size reads along its reduce: plain loops (LLVM vectorizes the k loop)
  // CHECK-LABEL: func.func private @rowsum
  // CHECK-NOT: uop.contraction
  // CHECK: "uop.reduce"
  func.func private @rowsum(%arg0: memref<256xf32>, %arg1: memref<131072xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 256 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 512 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %2) : (index, index) -> index
    %5 = "uop.add"(%4, %3) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.reduce"(%7, %3) {op = "add"} : (f32, index) -> f32
    %9 = "uop.index"(%arg0, %1) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
}
