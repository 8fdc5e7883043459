// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432}' | FileCheck %s --check-prefix=ONE

module {
  // a large elementwise kernel: its outer loop runs on 2 threads; no reduce, so no fastmath
  // CHECK-LABEL: func.func private @ew
  // CHECK-SAME: uop.threads = 2 : i64
  // CHECK-NOT: uop.fastmath
  // ONE-LABEL: func.func private @ew
  // ONE-NOT: uop.threads
  func.func private @ew(%arg0: memref<1048576xf32>, %arg1: memref<1048576xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 1048576 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<1048576xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %4 = "uop.exp2"(%3) : (f32) -> f32
    %5 = "uop.index"(%arg0, %1) : (memref<1048576xf32>, index) -> !uop.ptr<f32>
    %6 = "uop.store"(%5, %4) : (!uop.ptr<f32>, f32) -> !uop.token
    %7 = "uop.end"(%6, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
  // a float row sum: the accumulator may reassociate
  // CHECK-LABEL: func.func private @rowsum
  // CHECK-SAME: uop.fastmath
  // CHECK-NOT: uop.contraction
  func.func private @rowsum(%arg0: memref<3xf32>, %arg1: memref<15xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 3 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 5 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %2) : (index, index) -> index
    %5 = "uop.add"(%4, %3) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<15xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.reduce"(%7, %3) {op = "add"} : (f32, index) -> f32
    %9 = "uop.index"(%arg0, %1) : (memref<3xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }
  // C[i,j] = sum_k A[(i*128+j)/128*128 + k] * B[k*128 + j]: A's index mentions j but does not depend on it (the
  // dependence is evaluated, not read off the expression), so this is a contraction: a 6x16 tile at 8 lanes
  // CHECK-LABEL: func.func private @mm
  // (KC = K: the 128-deep B panel is far under an eighth of L2; MC = all of M, padded to MR: its block fits L2)
  // CHECK-SAME: uop.contraction = array<i64: 6, 16, 128, 132, 8>
  // CHECK-SAME: uop.fastmath
  // CHECK-SAME: uop.threads = 2 : i64
  // ONE-LABEL: func.func private @mm
  // ONE-SAME: uop.contraction = array<i64: 8, 32, 128, 128, 16>
  func.func private @mm(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 128 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%0) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%0) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %0) : (index, index) -> index
    %5 = "uop.add"(%4, %2) : (index, index) -> index
    %6 = "uop.idiv"(%5, %0) : (index, index) -> index
    %7 = "uop.mul"(%6, %0) : (index, index) -> index
    %8 = "uop.add"(%7, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.mul"(%3, %0) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %17 = "uop.index"(%arg0, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %16) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  // skinny N: C[256x10] = A[256x512] @ B[512x10] (an MLP's last layer): NR is N padded to the lanes (one zmm, 16; at
  // 8 lanes two ymm), not a 32-wide panel two thirds empty; one B panel, so on 2 threads MC splits M in two blocks
  // CHECK-LABEL: func.func private @n10
  // CHECK-SAME: uop.contraction = array<i64: 6, 16, 512, 132, 8>
  // ONE-LABEL: func.func private @n10
  // ONE-SAME: uop.contraction = array<i64: 8, 16, 512, 256, 16>
  func.func private @n10(%arg0: memref<2560xf32>, %arg1: memref<131072xf32>, %arg2: memref<5120xf32>) attributes {uop.kernel} {
    %c256 = "uop.const"() {value = 256 : index} : () -> index
    %c10 = "uop.const"() {value = 10 : index} : () -> index
    %c512 = "uop.const"() {value = 512 : index} : () -> index
    %1 = "uop.range"(%c256) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%c10) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%c512) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %c512) : (index, index) -> index
    %5 = "uop.add"(%4, %3) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.mul"(%3, %c10) : (index, index) -> index
    %9 = "uop.add"(%8, %2) : (index, index) -> index
    %10 = "uop.index"(%arg2, %9) : (memref<5120xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.load"(%10) : (!uop.ptr<f32>) -> f32
    %12 = "uop.mul"(%7, %11) : (f32, f32) -> f32
    %13 = "uop.reduce"(%12, %3) {op = "add"} : (f32, index) -> f32
    %14 = "uop.mul"(%1, %c10) : (index, index) -> index
    %15 = "uop.add"(%14, %2) : (index, index) -> index
    %16 = "uop.index"(%arg0, %15) : (memref<2560xf32>, index) -> !uop.ptr<f32>
    %17 = "uop.store"(%16, %13) : (!uop.ptr<f32>, f32) -> !uop.token
    %18 = "uop.end"(%17, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%18) : (!uop.token) -> ()
    return
  }
  // a vector times a matrix, y[n] = sum_k x[k] * W[k*2048 + n]: the matrix's k steps are 2048 apart, so a contraction
  // with M = 1 (one row, wide panels: 1 x 56 of 16 ymm, 1 x 128 of 32 zmm), its rows packed into k-contiguous panels;
  // KC: a KC x NR panel of B in an eighth of L2
  // CHECK-LABEL: func.func private @gemv
  // CHECK-SAME: uop.contraction = array<i64: 1, 56, 512, 1, 8>
  // ONE-LABEL: func.func private @gemv
  // ONE-SAME: uop.contraction = array<i64: 1, 128, 256, 1, 16>
  func.func private @gemv(%arg0: memref<2048xf32>, %arg1: memref<1024xf32>, %arg2: memref<2097152xf32>) attributes {uop.kernel} {
    %c2048 = "uop.const"() {value = 2048 : index} : () -> index
    %c1024 = "uop.const"() {value = 1024 : index} : () -> index
    %1 = "uop.range"(%c2048) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%c1024) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %6 = "uop.index"(%arg1, %3) : (memref<1024xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.mul"(%3, %c2048) : (index, index) -> index
    %9 = "uop.add"(%8, %1) : (index, index) -> index
    %10 = "uop.index"(%arg2, %9) : (memref<2097152xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.load"(%10) : (!uop.ptr<f32>) -> f32
    %12 = "uop.mul"(%7, %11) : (f32, f32) -> f32
    %13 = "uop.reduce"(%12, %3) {op = "add"} : (f32, index) -> f32
    %16 = "uop.index"(%arg0, %1) : (memref<2048xf32>, index) -> !uop.ptr<f32>
    %17 = "uop.store"(%16, %13) : (!uop.ptr<f32>, f32) -> !uop.token
    %18 = "uop.end"(%17, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%18) : (!uop.token) -> ()
    return
  }
  // a matrix times a vector, y[m] = sum_k W[m*1024 + k] * x[k]: W's rows are k-contiguous, so plain loops (one vector
  // reduce per row) and no contraction
  // CHECK-LABEL: func.func private @gemv_rows
  // CHECK-NOT: uop.contraction
  // CHECK-SAME: uop.fastmath
  func.func private @gemv_rows(%arg0: memref<2048xf32>, %arg1: memref<1024xf32>, %arg2: memref<2097152xf32>) attributes {uop.kernel} {
    %c2048 = "uop.const"() {value = 2048 : index} : () -> index
    %c1024 = "uop.const"() {value = 1024 : index} : () -> index
    %1 = "uop.range"(%c2048) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%c1024) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %6 = "uop.index"(%arg1, %3) : (memref<1024xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.mul"(%1, %c1024) : (index, index) -> index
    %9 = "uop.add"(%8, %3) : (index, index) -> index
    %10 = "uop.index"(%arg2, %9) : (memref<2097152xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.load"(%10) : (!uop.ptr<f32>) -> f32
    %12 = "uop.mul"(%11, %7) : (f32, f32) -> f32
    %13 = "uop.reduce"(%12, %3) {op = "add"} : (f32, index) -> f32
    %16 = "uop.index"(%arg0, %1) : (memref<2048xf32>, index) -> !uop.ptr<f32>
    %17 = "uop.store"(%16, %13) : (!uop.ptr<f32>, f32) -> !uop.token
    %18 = "uop.end"(%17, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%18) : (!uop.token) -> ()
    return
  }
  // a full reduction: split in one partial reduce per thread, then a reduce over the partials
  // CHECK-LABEL: func.func private @total
  // CHECK-SAME: uop.split_reduce = 2 : i64
  // CHECK-SAME: uop.threads = 2 : i64
  // ONE-LABEL: func.func private @total
  // ONE-NOT: uop.split_reduce
  func.func private @total(%arg0: memref<1xf32>, %arg1: memref<1048576xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 1048576 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<1048576xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %4 = "uop.reduce"(%3, %1) {op = "add"} : (f32, index) -> f32
    %5 = "uop.const"() {value = 0 : index} : () -> index
    %6 = "uop.index"(%arg0, %5) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %4) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
}
