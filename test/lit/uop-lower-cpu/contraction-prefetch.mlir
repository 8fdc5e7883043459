// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 128^3 matmul whose epilogue adds a residual (relu(a @ b + r)): before a tile's k loop, mm calls @mm_pf, which
// prefetches the rows of the output (write) and of the residual (read) that the epilogue will touch, each 8-lane
// vector's first and last element clamped into its buffer; it reads nothing of the tile and stores nothing. The
// epilogue itself, after the k loop, reads the residual and the tile and stores the output.
// CHECK-LABEL: func.func @mm_mm(
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<96xf32>
// CHECK: func.call @mm_pf(%arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}, %{{.*}}, %[[TILE]], %[[T:.*]], %{{.*}}) :
// CHECK: scf.for {{.*}} iter_args(
// CHECK-COUNT-12: vector.fma
// CHECK: func.call @mm_epi(%arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}, %{{.*}}, %[[TILE]], %[[T]], %{{.*}}) :
// CHECK-LABEL: func.func private @mm_epi(
// CHECK-NOT: memref.prefetch
// CHECK: vector.maskedstore %arg0[
// CHECK-LABEL: func.func private @mm_pf(
// CHECK-NOT: %arg7[
// CHECK: %[[O:.*]] = arith.minsi %{{.*}}, %c16383 : index
// CHECK-NEXT: %[[OC:.*]] = arith.maxsi %[[O]], %c0 : index
// CHECK-NEXT: memref.prefetch %arg0[%[[OC]]], write, locality<3>, data : memref<16384xf32>
// CHECK: memref.prefetch %arg0[%{{.*}}], write, locality<3>, data
// CHECK: memref.prefetch %arg3[%{{.*}}], read, locality<3>, data : memref<16384xf32>
// CHECK: memref.prefetch %arg3[%{{.*}}], read, locality<3>, data
// CHECK-NOT: vector.
// CHECK-NOT: memref.load
// CHECK-NOT: memref.store
// CHECK: return
module {
  func.func private @mm(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>, %arg3: memref<16384xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 128 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%0) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%0) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %0) : (index, index) -> index
    %5 = "uop.add"(%4, %2) : (index, index) -> index
    %8 = "uop.add"(%4, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.mul"(%3, %0) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %z = "uop.const"() {value = 0.0 : f32} : () -> f32
    %ri = "uop.index"(%arg3, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %rv = "uop.load"(%ri) : (!uop.ptr<f32>) -> f32
    %s = "uop.add"(%16, %rv) : (f32, f32) -> f32
    %r = "uop.max"(%s, %z) : (f32, f32) -> f32
    %17 = "uop.index"(%arg0, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %r) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>, %arg3: memref<16384xf32>) attributes {uop.schedule, uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
