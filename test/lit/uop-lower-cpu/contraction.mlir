// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432},uop-lower-cpu,convert-scf-to-cf,convert-vector-to-llvm,convert-math-to-llvm,expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts' | FileCheck %s --check-prefix=LLVM

// A 128^3 matmul with a fused epilogue (relu): B packed into 16-wide panels (8-lane vector copies of its rows), A
// (row-major, rows 512 B apart) read in place, a 6x16 tile of vector FMAs from zero (K is one slice: no C to load),
// each k step prefetching the same row of the next B panel into L2 (the last panel's next is itself: clamped once,
// before the k loop);
// mm stores the tile on its stack and calls the epilogue on it (a private function: it inlines), in 8-lane vectors,
// rows past M (128 = 21 * 6 + 2) masked off, so C takes no scratch; each phase takes the bounds of its threaded outer
// loop, and @schedule runs the phases over whole ranges.
// (contraction-packed-a.mlir: an A that must be packed.)
// CHECK-NOT: func.func @mm_pack_a
// CHECK-LABEL: func.func @mm_pack_b(
// CHECK: vector.store %{{.*}}, %arg4[
// CHECK-LABEL: func.func @mm_mm(
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<96xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.for %{{.*}} = %arg6 to %arg7 step
// CHECK: scf.for
// CHECK-COUNT-6: arith.minsi %{{.*}}, %c127
// CHECK: %[[NEXT:.*]] = arith.minsi %{{.*}}, %c14336 : index
// CHECK-NEXT: %{{.*}}:12 = scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, {{.*}}vector<8xf32>)
// CHECK-COUNT-2: vector.load %arg4
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[NEXT]], %{{.*}} : index
// CHECK-NEXT: memref.prefetch %arg4[%[[AT]]], read, locality<2>, data : memref<16384xf32>
// CHECK-NOT: arith.minsi
// CHECK: memref.load %arg1[
// CHECK: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK-COUNT-12: vector.fma
// CHECK-NOT: vector.load %arg5
// CHECK-COUNT-12: vector.store %{{.*}}, %[[TILE]]
// CHECK-NOT: scf.if
// CHECK: func.call @mm_epi(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %[[TILE]], %{{.*}}, %{{.*}}) :
// CHECK-LABEL: func.func private @mm_epi(
// CHECK: scf.for %{{.*}} = %arg7 to %arg8 step
// CHECK: %[[C:.*]] = vector.load %arg6[%{{.*}}] : memref<96xf32>, vector<8xf32>
// CHECK: arith.maximumf %[[C]]
// CHECK: vector.maskedstore %arg0[
// CHECK-LABEL: func.func @schedule(
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1xf32>
// CHECK-NOT: call @mm_pack_a(
// CHECK: call @mm_pack_b(
// CHECK: call @mm_mm(
// CHECK-NOT: call @mm_epi(
// CHECK: memref.dealloc
// LLVM-NOT: vector.
// LLVM: llvm.intr.fmuladd
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
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
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
