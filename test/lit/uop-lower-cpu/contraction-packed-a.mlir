// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// The 128^3 matmul of contraction.mlir with relu applied to A as it is read: A is computed, so pack_a computes it
// once into 6-row panels (Ap[M/6][K][6], %arg3) and the micro-kernel broadcasts from the panels. 128 rows fill 21 panels
// and a third of the 22nd: its 4 rows past M repeat row 127 (left unwritten, the FMAs would read whatever the scratch
// held: denormals cost an Intel core a microcode assist each), so the pack runs over all 132 rows.
// CHECK-LABEL: func.func @mm_pack_a(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>, %arg3: memref<16896xf32>, %arg4: memref<16384xf32>, %arg5: memref<1xf32>, %arg6: index, %arg7: index)
// CHECK: %[[LAST:.*]] = arith.constant 127 : index
// CHECK: scf.for %[[ROW:.*]] = %arg6 to %arg7
// CHECK: arith.minsi %[[ROW]], %[[LAST]] : index
// CHECK: memref.load %arg1[
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %arg3[
// CHECK-LABEL: func.func @mm_mm(
// CHECK: %{{.*}}:12 = scf.for
// Each k step prefetches A's panel 1024 floats ahead into L2 (contraction.A_AHEAD), then broadcasts its row from it.
// CHECK: %[[PF:.*]] = arith.addi %[[AO:.*]], %c1024{{.*}} : index
// CHECK-NEXT: memref.prefetch %arg3[%[[PF]]], read, locality<2>, data : memref<16896xf32>
// CHECK-NEXT: memref.load %arg3[%[[AO]]]
// CHECK-LABEL: func.func @schedule(
// CHECK: %[[ROWS:.*]] = arith.constant 132 : index
// CHECK: call @mm_pack_a({{.*}}, %[[ROWS]])
// CHECK: call @mm_pack_b(
// CHECK: call @mm_mm(
module {
  func.func private @mm(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 128 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%0) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%0) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %0) : (index, index) -> index
    %5 = "uop.add"(%4, %2) : (index, index) -> index
    %8 = "uop.add"(%4, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %a = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %za = "uop.const"() {value = 0.0 : f32} : () -> f32
    %10 = "uop.max"(%a, %za) : (f32, f32) -> f32
    %11 = "uop.mul"(%3, %0) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %z = "uop.const"() {value = 0.0 : f32} : () -> f32
    %r = "uop.max"(%16, %z) : (f32, f32) -> f32
    %17 = "uop.index"(%arg0, %5) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %r) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>, %arg2: memref<16384xf32>) attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
