// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// relu(a @ b + s[i] + r): the tile's prefetch (@mm_pf) touches the output's and the residual's rows, whose addresses
// step with the lanes, and not the per-row scale s (%arg4: one element a row, read by every lane), which stays in
// cache: prefetching it would cost as many prefetches as the tile has rows. The helpers mm calls are of internal
// linkage (LLVM inlines each into mm and keeps no copy of its own, no packed wrapper). The prefetch's loops are left
// rolled (llvm.loop.unroll.disable): unrolled, their clamped prefetches cost LLVM's time and gain nothing.
// CHECK: #loop_unroll = #llvm.loop_unroll<disable = true>
// CHECK-NEXT: #loop_annotation = #llvm.loop_annotation<unroll = #loop_unroll>
// CHECK-LABEL: func.func @mm_mm(
// CHECK: func.call @mm_pf(
// CHECK: func.call @mm_epi(
// CHECK-LABEL: func.func private @mm_epi({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>} {
// CHECK: memref.load %arg4[
// CHECK-LABEL: func.func private @mm_pf({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>} {
// CHECK-NOT: %arg4[
// CHECK: memref.prefetch %arg0[%{{.*}}], write, locality<3>, data : memref<16384xf32>
// CHECK-NOT: %arg4[
// CHECK: memref.prefetch %arg3[%{{.*}}], read, locality<3>, data : memref<16384xf32>
// CHECK-NOT: %arg4[
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: return
module {
  func.func private @mm(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>, %arg3: memref<16384xf32>, %arg4: memref<128xf32>) attributes {uop.kernel} {
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
    %si = "uop.index"(%arg4, %1) : (memref<128xf32>, index) -> !uop.ptr<f32>
    %sv = "uop.load"(%si) : (!uop.ptr<f32>) -> f32
    %ss = "uop.mul"(%16, %sv) : (f32, f32) -> f32
    %ri = "uop.index"(%arg3, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %rv = "uop.load"(%ri) : (!uop.ptr<f32>) -> f32
    %s = "uop.add"(%ss, %rv) : (f32, f32) -> f32
    %r = "uop.max"(%s, %z) : (f32, f32) -> f32
    %17 = "uop.index"(%arg0, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %r) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>, %arg3: memref<128xf32>, %arg4: memref<16384xf32>) attributes {uop.schedule, uop.num_inputs = 4 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 4, 0, 1, 2, 3>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
