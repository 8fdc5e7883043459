// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// relu(A) @ B with A 1024x64 and B 64x24 (three vectors: a B of one or two packs a small computed A row-major instead,
// Contraction.ROWS_MAX): one B panel, so MC = 512 rows (half of M, a multiple of MR = 4), and blocks of A packed inside
// mm half that (256 rows x 64: 4 blocks). Each thread packs its block of A (all of K) inside mm, into its own buffer
// (%arg6 or %arg7, picked by the chunk index: mm's last argument), right before the tiles read it; there is no pack_a
// phase. pack_a writes block-local panels: (p mod 64) * 64 * 4 + k * 4 + lane.
// CHECK-LABEL: func.func @mm_pack_a(
// CHECK-SAME: %arg6: memref<16384xf32>, %arg7: memref<16384xf32>, %arg8: index, %arg9: index)
// CHECK: scf.for %{{.*}} = %arg8 to %arg9
// CHECK: arith.minsi
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %arg6[
// CHECK-LABEL: func.func @mm_mm(
// CHECK-SAME: %arg8: index, %arg9: index, %arg10: index)
// CHECK: %[[IS1:.*]] = arith.cmpi eq, %arg10, %{{.*}} : index
// CHECK: %[[MINE:.*]] = arith.select %[[IS1]], %arg7, %arg6 : memref<16384xf32>
// CHECK: scf.for %[[ICB:.*]] = %arg8 to %arg9
// CHECK: func.call @mm_pack_a(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %[[MINE]], %arg7, %{{.*}}, %{{.*}})
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.load %[[MINE]][
// CHECK-COUNT-12: vector.fma
// CHECK-LABEL: func.func @schedule(
// CHECK-NOT: call @mm_pack_a(
// CHECK: call @mm_pack_b(
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[N:.*]] = arith.constant 4 : index
// CHECK-NEXT: call @mm_mm({{.*}}, %[[Z]], %[[N]], %[[Z]])
module {
  func.func private @mm(%arg0: memref<24576xf32>, %arg1: memref<65536xf32>, %arg2: memref<1536xf32>) attributes {uop.kernel} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c16 = "uop.const"() {value = 24 : index} : () -> index
    %c1024 = "uop.const"() {value = 1024 : index} : () -> index
    %1 = "uop.range"(%c1024) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%c16) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%c64) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %c64) : (index, index) -> index
    %8 = "uop.add"(%4, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<65536xf32>, index) -> !uop.ptr<f32>
    %a = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %za = "uop.const"() {value = 0.0 : f32} : () -> f32
    %10 = "uop.max"(%a, %za) : (f32, f32) -> f32
    %11 = "uop.mul"(%3, %c16) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<1536xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %o1 = "uop.mul"(%1, %c16) : (index, index) -> index
    %o = "uop.add"(%o1, %2) : (index, index) -> index
    %17 = "uop.index"(%arg0, %o) : (memref<24576xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %16) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<65536xf32>, %arg1: memref<1536xf32>, %arg2: memref<24576xf32>) attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
