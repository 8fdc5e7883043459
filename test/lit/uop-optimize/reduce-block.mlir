// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8}' | FileCheck %s

module {
  // a float sum of 10000 terms: longer than a block, so it accumulates in blocks
  // CHECK-LABEL: func.func private @longsum
  // CHECK-SAME: uop.reduce_block = 4096 : i64
  func.func private @longsum(%arg0: memref<1xf32>, %arg1: memref<10000xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 10000 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.index"(%arg1, %2) : (memref<10000xf32>, index) -> !uop.ptr<f32>
    %4 = "uop.load"(%3) : (!uop.ptr<f32>) -> f32
    %5 = "uop.reduce"(%4, %2) {op = "add"} : (f32, index) -> f32
    %6 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
  // 64 x 128 terms over two ranges: their product counts
  // CHECK-LABEL: func.func private @twoaxes
  // CHECK-SAME: uop.reduce_block = 4096 : i64
  func.func private @twoaxes(%arg0: memref<1xf32>, %arg1: memref<8192xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 64 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.const"() {value = 128 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.mul"(%2, %3) : (index, index) -> index
    %6 = "uop.add"(%5, %4) : (index, index) -> index
    %7 = "uop.index"(%arg1, %6) : (memref<8192xf32>, index) -> !uop.ptr<f32>
    %8 = "uop.load"(%7) : (!uop.ptr<f32>) -> f32
    %9 = "uop.reduce"(%8, %2, %4) {op = "add"} : (f32, index, index) -> f32
    %10 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.store"(%10, %9) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  // no blocks: a float sum that fits one block, a float max (no rounding), an integer sum (exact)
  // CHECK-LABEL: func.func private @short
  // CHECK-NOT: uop.reduce_block
  // CHECK-LABEL: func.func private @fmax
  // CHECK-NOT: uop.reduce_block
  // CHECK-LABEL: func.func private @isum
  // CHECK-NOT: uop.reduce_block
  func.func private @short(%arg0: memref<1xf32>, %arg1: memref<4096xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 4096 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.index"(%arg1, %2) : (memref<4096xf32>, index) -> !uop.ptr<f32>
    %4 = "uop.load"(%3) : (!uop.ptr<f32>) -> f32
    %5 = "uop.reduce"(%4, %2) {op = "add"} : (f32, index) -> f32
    %6 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
  func.func private @fmax(%arg0: memref<1xf32>, %arg1: memref<10000xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 10000 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.index"(%arg1, %2) : (memref<10000xf32>, index) -> !uop.ptr<f32>
    %4 = "uop.load"(%3) : (!uop.ptr<f32>) -> f32
    %5 = "uop.reduce"(%4, %2) {op = "max"} : (f32, index) -> f32
    %6 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
  func.func private @isum(%arg0: memref<1xi32>, %arg1: memref<10000xi32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.const"() {value = 10000 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.index"(%arg1, %2) : (memref<10000xi32>, index) -> !uop.ptr<i32>
    %4 = "uop.load"(%3) : (!uop.ptr<i32>) -> i32
    %5 = "uop.reduce"(%4, %2) {op = "add"} : (i32, index) -> i32
    %6 = "uop.index"(%arg0, %0) : (memref<1xi32>, index) -> !uop.ptr<i32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<i32>, i32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
}
