// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=262144 l3=33554432},uop-lower-cpu' | FileCheck %s
// A 64 x 64 matmul over K = 4096 with a bias on the output columns: K takes several KC slices, so the tile's
// accumulators start from C (scratch, 66 rows: MR = 6) after the first slice and go back to C after each but the last;
// after the last, the tile goes to mm's stack and the epilogue runs on it there, rows past 64 masked off. One test
// of the last slice guards both the prefetch of the epilogue's rows (before the k loop) and the tile's store.
// CHECK-LABEL: func.func @mm_mm(
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<96xf32>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0
// CHECK: %[[C0:.*]] = vector.load %arg6[%{{.*}}] : memref<4224xf32>
// CHECK: arith.select %[[FIRST]], %{{.*}}, %[[C0]]
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %{{.*}}, %c4096
// CHECK-NEXT: scf.if %[[LAST]] {
// CHECK-NEXT: func.call @mm_pf(
// CHECK: vector.fma
// CHECK: scf.if %[[LAST]] {
// CHECK-COUNT-12: vector.store %{{.*}}, %[[TILE]][
// CHECK: func.call @mm_epi(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %[[TILE]],
// CHECK: } else {
// CHECK-COUNT-12: vector.store %{{.*}}, %arg6[
// CHECK-LABEL: func.func private @mm_epi(
// CHECK: %[[C:.*]] = vector.load %arg7[%{{.*}}] : memref<96xf32>, vector<8xf32>
// CHECK: %[[B:.*]] = vector.load %arg3[
// CHECK: arith.addf %[[C]], %[[B]]
// CHECK: vector.maskedstore %arg0[
// CHECK-LABEL: func.func @schedule(
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<4224xf32>
// CHECK-NOT: call @mm_epi(
module {
  func.func private @mm(%arg0: memref<4096xf32>, %arg1: memref<262144xf32>, %arg2: memref<262144xf32>, %arg3: memref<64xf32>) attributes {uop.kernel} {
    %n = "uop.const"() {value = 64 : index} : () -> index
    %k = "uop.const"() {value = 4096 : index} : () -> index
    %1 = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.range"(%k) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %n) : (index, index) -> index
    %5 = "uop.add"(%4, %2) : (index, index) -> index
    %6 = "uop.mul"(%1, %k) : (index, index) -> index
    %8 = "uop.add"(%6, %3) : (index, index) -> index
    %9 = "uop.index"(%arg1, %8) : (memref<262144xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.mul"(%3, %n) : (index, index) -> index
    %12 = "uop.add"(%11, %2) : (index, index) -> index
    %13 = "uop.index"(%arg2, %12) : (memref<262144xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.mul"(%10, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %3) {op = "add"} : (f32, index) -> f32
    %b = "uop.index"(%arg3, %2) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %bv = "uop.load"(%b) : (!uop.ptr<f32>) -> f32
    %r = "uop.add"(%16, %bv) : (f32, f32) -> f32
    %17 = "uop.index"(%arg0, %5) : (memref<4096xf32>, index) -> !uop.ptr<f32>
    %18 = "uop.store"(%17, %r) : (!uop.ptr<f32>, f32) -> !uop.token
    %19 = "uop.end"(%18, %1, %2) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%19) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<4096xf32>, %arg1: memref<262144xf32>, %arg2: memref<262144xf32>, %arg3: memref<64xf32>) attributes {uop.schedule, uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64} {
    %0 = "uop.kernel"() {callee = @mm, slots = array<i64: 0, 1, 2, 3>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
