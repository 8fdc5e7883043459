// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s --check-prefix=CPU16

// A float matrix-vector product, out[o] = sum_k x[k] * W[o*64 + k]: each output reads a row of its own, so the reduce
// runs as vector lanes (uop.reduce_lanes) and the row's loads prefetch 4 KiB ahead (lanes.STREAM_AHEAD: 1024 floats);
// the vector's loads, the same for every output, prefetch nothing.
// CHECK-LABEL: func.func private @matvec
// CHECK-SAME: uop.reduce_lanes = 16
// CPU16-LABEL: func.func @matvec
// CPU16-NOT: memref.prefetch %arg1
// CPU16: %[[AT:.*]] = arith.addi %[[I:.*]], %c1024{{.*}} : index
// CPU16-NEXT: memref.prefetch %arg2[%[[AT]]], read, locality<3>, data : memref<256xf32>
// CPU16-NEXT: vector.load %arg2[%[[I]]] : memref<256xf32>, vector<16xf32>
// CPU16: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// A sum of one vector (no output loop: no row of its own) stays LLVM's loop.
// CHECK-LABEL: func.func private @dot
// CHECK-NOT: uop.reduce_lanes
// CHECK-LABEL: func.func @schedule
module {
  func.func private @matvec(%arg0: memref<4xf32>, %arg1: memref<64xf32>, %arg2: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 4 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.index"(%arg1, %4) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %6 = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %7 = "uop.mul"(%1, %3) : (index, index) -> index
    %8 = "uop.add"(%7, %4) : (index, index) -> index
    %9 = "uop.index"(%arg2, %8) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.mul"(%6, %10) : (f32, f32) -> f32
    %12 = "uop.reduce"(%11, %4) {op = "add"} : (f32, index) -> f32
    %13 = "uop.store"(%2, %12) : (!uop.ptr<f32>, f32) -> !uop.token
    %14 = "uop.end"(%13, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%14) : (!uop.token) -> ()
    return
  }
  func.func private @dot(%arg0: memref<1xf32>, %arg1: memref<64xf32>, %arg2: memref<64xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.index"(%arg0, %0) : (memref<1xf32>, index) -> !uop.ptr<f32>
    %2 = "uop.const"() {value = 64 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.index"(%arg1, %3) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %5 = "uop.load"(%4) : (!uop.ptr<f32>) -> f32
    %6 = "uop.index"(%arg2, %3) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.mul"(%5, %7) : (f32, f32) -> f32
    %9 = "uop.reduce"(%8, %3) {op = "add"} : (f32, index) -> f32
    %10 = "uop.store"(%1, %9) : (!uop.ptr<f32>, f32) -> !uop.token
    "uop.sink"(%10) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<64xf32>, %arg1: memref<256xf32>, %arg2: memref<4xf32>, %arg3: memref<64xf32>, %arg4: memref<1xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 2 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @matvec, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    %1 = "uop.kernel"() {callee = @dot, slots = array<i64: 4, 0, 3>} : () -> !uop.token
    "uop.sink"(%0, %1) : (!uop.token, !uop.token) -> ()
    return
  }
}
