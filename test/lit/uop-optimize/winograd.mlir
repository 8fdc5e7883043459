// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=524288 l3=262144}' | FileCheck %s --check-prefix=BLOCKS

// A 3x3 convolution of stride 1 with 64 input and output channels, 12x13 tiles (156: 32 or more fill the panels), 46
// MFLOP as a plain product (2^25 or more): Winograd, its 16 products of 64 x 156 x 64 tiled as a contraction's, the
// whole image at once: its transformed tiles (1.5 MB) leave a 1 MiB L2, but blocks of tile rows would each read the
// 256 KB of transformed filters again, more than the tiles cost (optimize.winograd_block); so too with a 512 KB L2
// (uop-lower-cpu/winograd-blocked.mlir has a convolution that runs in blocks).
// CHECK: func.func private @conv({{.*}}uop.winograd = array<i64: 8, 32, 64, 64, 16, 0>
// BLOCKS: func.func private @conv({{.*}}uop.winograd = array<i64: 8, 32, 64, 64, 16, 0>
// CHECK-NOT: uop.contraction
module {
  func.func private @conv(%arg0: memref<38400xf32>, %arg1: memref<38400xf32>, %arg2: memref<36864xf32>, %arg3: memref<64xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 64 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 600 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 24 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.const"() {value = 25 : index} : () -> index
    %7 = "uop.mul"(%5, %6) : (index, index) -> index
    %8 = "uop.range"(%6) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %9 = "uop.add"(%7, %8) : (index, index) -> index
    %10 = "uop.add"(%3, %9) : (index, index) -> index
    %11 = "uop.index"(%arg0, %10) : (memref<38400xf32>, index) -> !uop.ptr<f32>
    %12 = "uop.const"() {value = 0 : index} : () -> index
    %13 = "uop.const"() {value = 3 : index} : () -> index
    %14 = "uop.range"(%13) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %15 = "uop.const"() {value = 27 : index} : () -> index
    %16 = "uop.mul"(%14, %15) : (index, index) -> index
    %17 = "uop.add"(%16, %5) : (index, index) -> index
    %18 = "uop.const"() {value = 26 : index} : () -> index
    %19 = "uop.mod"(%17, %18) : (index, index) -> index
    %20 = "uop.cmplt"(%12, %19) : (index, index) -> i1
    %21 = "uop.cmplt"(%19, %6) : (index, index) -> i1
    %22 = "uop.and"(%20, %21) : (i1, i1) -> i1
    %23 = "uop.range"(%13) {axis = 5 : i64, kind = "reduce"} : (index) -> index
    %24 = "uop.const"() {value = 28 : index} : () -> index
    %25 = "uop.mul"(%23, %24) : (index, index) -> index
    %26 = "uop.add"(%25, %8) : (index, index) -> index
    %27 = "uop.mod"(%26, %15) : (index, index) -> index
    %28 = "uop.cmplt"(%12, %27) : (index, index) -> i1
    %29 = "uop.cmplt"(%27, %18) : (index, index) -> i1
    %30 = "uop.and"(%28, %29) : (i1, i1) -> i1
    %31 = "uop.and"(%22, %30) : (i1, i1) -> i1
    %32 = "uop.const"() {value = -1 : index} : () -> index
    %33 = "uop.add"(%19, %32) : (index, index) -> index
    %34 = "uop.mul"(%33, %6) : (index, index) -> index
    %35 = "uop.add"(%27, %34) : (index, index) -> index
    %36 = "uop.range"(%0) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %37 = "uop.mul"(%36, %2) : (index, index) -> index
    %38 = "uop.add"(%35, %37) : (index, index) -> index
    %39 = "uop.add"(%38, %32) : (index, index) -> index
    %40 = "uop.index"(%arg1, %39, %31) : (memref<38400xf32>, index, i1) -> !uop.ptr<f32>
    %41 = "uop.load"(%40) : (!uop.ptr<f32>) -> f32
    %42 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %43 = "uop.where"(%31, %41, %42) : (i1, f32, f32) -> f32
    %44 = "uop.const"() {value = 576 : index} : () -> index
    %45 = "uop.mul"(%1, %44) : (index, index) -> index
    %46 = "uop.const"() {value = 9 : index} : () -> index
    %47 = "uop.mul"(%36, %46) : (index, index) -> index
    %48 = "uop.mul"(%14, %13) : (index, index) -> index
    %49 = "uop.add"(%48, %23) : (index, index) -> index
    %50 = "uop.add"(%47, %49) : (index, index) -> index
    %51 = "uop.add"(%45, %50) : (index, index) -> index
    %52 = "uop.index"(%arg2, %51) : (memref<36864xf32>, index) -> !uop.ptr<f32>
    %53 = "uop.load"(%52) : (!uop.ptr<f32>) -> f32
    %54 = "uop.mul"(%43, %53) : (f32, f32) -> f32
    %55 = "uop.reduce"(%54, %36, %14, %23) {op = "add"} : (f32, index, index, index) -> f32
    %56 = "uop.index"(%arg3, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %57 = "uop.load"(%56) : (!uop.ptr<f32>) -> f32
    %58 = "uop.add"(%55, %57) : (f32, f32) -> f32
    %59 = "uop.cmplt"(%58, %42) : (f32, f32) -> i1
    %60 = "uop.cmpeq"(%58, %42) : (f32, f32) -> i1
    %61 = "uop.or"(%59, %60) : (i1, i1) -> i1
    %62 = "uop.where"(%61, %42, %58) : (i1, f32, f32) -> f32
    %63 = "uop.store"(%11, %62) : (!uop.ptr<f32>, f32) -> !uop.token
    %64 = "uop.end"(%63, %1, %5, %8) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%64) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<38400xf32>, %arg1: memref<36864xf32>, %arg2: memref<64xf32>, %arg3: memref<38400xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @conv, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}

