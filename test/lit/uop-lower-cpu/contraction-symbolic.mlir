// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=4194304 l3=33554432}' | FileCheck %s --check-prefix=OPT
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=4194304 l3=33554432},uop-lower-cpu' | FileCheck %s

// x[:m] @ W, 256 x 256, m symbolic (read from the variables' buffer, clamped to [1, 512]): the contraction is tiled as
// at m = 512 (8 x 32 register tiles of 16-lane vectors, KC 256, MC 512), laid out for it, and run to the m read at run
// time: ceil(ceil(m / 8) * 8 / 512) row blocks, the 8-row panels as 8 x 32 tiles ((m + 3) / 8 of them: the last one
// too when more than half full), the m % 8 <= 4 rows past them as tiles of 4, 2 and 1 rows (m % 8's bits), then the
// tile epilogue once on their panel.
// OPT: func.func private @mm({{.*}}uop.contraction = array<i64: 8, 32, 256, 512, 16>
// OPT-SAME: uop.threads = 2
// CHECK-LABEL: func.func @mm_pack_a(
// CHECK: %[[PM:.*]] = arith.minsi {{.*}}, %c512 : index
// rows up to a multiple of 8, those past m repeating row m - 1
// CHECK: scf.for %[[P:.*]] = {{.*}} {
// CHECK: arith.minsi %[[P]], {{.*}} : index
// CHECK-LABEL: func.func @mm_mm(
// CHECK: memref.load %arg1[{{.*}}] : memref<1xi64>
// CHECK: %[[M:.*]] = arith.minsi {{.*}}, %c512 : index
// CHECK: %[[M3:.*]] = arith.addi %[[M]], %c3 : index
// CHECK: %[[FULL:.*]] = arith.divsi %[[M3]], %c8 : index
// CHECK: %[[BLOCKS:.*]] = arith.divsi {{.*}}, %c512 : index
// CHECK: scf.for %{{.*}} = %c0 to %[[BLOCKS]] step %c1 {
// CHECK: scf.if
// CHECK: %[[ROW0:.*]] = arith.muli %[[FULL]], %{{.*}} : index
// CHECK-NEXT: %[[REM:.*]] = arith.subi %[[M]], %[[ROW0]] : index
// CHECK: arith.andi %[[REM]], %c4{{(_[0-9]+)?}} : index
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: arith.andi %[[REM]], %c2{{(_[0-9]+)?}} : index
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: arith.andi %[[REM]], %c1{{(_[0-9]+)?}} : index
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>) {
// CHECK: func.call @mm_epi(
// CHECK: %[[TILES:.*]] = arith.minsi %{{.*}}, %[[FULL]] : index
// CHECK-NEXT: scf.for %{{.*}} = %{{.*}} to %[[TILES]] step %c1 {
// CHECK: vector.fma
// CHECK-LABEL: func.func private @mm_epi(
module {
  func.func private @mm(%arg0: memref<131072xf32>, %arg1: memref<1xi64>, %arg2: memref<131072xf32>, %arg3: memref<65536xf32>) attributes {uop.kernel} {
    %2 = "uop.const"() {value = 0 : index} : () -> index
    %3 = "uop.index"(%arg1, %2) : (memref<1xi64>, index) -> !uop.ptr<i64>
    %4 = "uop.load"(%3) : (!uop.ptr<i64>) -> i64
    %5 = "uop.cast"(%4) : (i64) -> index
    %6 = "uop.const"() {value = 1 : index} : () -> index
    %7 = "uop.max"(%5, %6) : (index, index) -> index
    %8 = "uop.const"() {value = 512 : index} : () -> index
    %9 = "uop.min"(%7, %8) : (index, index) -> index
    %10 = "uop.range"(%9) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %11 = "uop.const"() {value = 256 : index} : () -> index
    %12 = "uop.mul"(%10, %11) : (index, index) -> index
    %13 = "uop.range"(%11) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %14 = "uop.add"(%12, %13) : (index, index) -> index
    %15 = "uop.index"(%arg0, %14) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %17 = "uop.range"(%11) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %18 = "uop.add"(%12, %17) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %22 = "uop.mul"(%17, %11) : (index, index) -> index
    %23 = "uop.add"(%13, %22) : (index, index) -> index
    %24 = "uop.index"(%arg3, %23) : (memref<65536xf32>, index) -> !uop.ptr<f32>
    %25 = "uop.load"(%24) : (!uop.ptr<f32>) -> f32
    %26 = "uop.mul"(%20, %25) : (f32, f32) -> f32
    %27 = "uop.reduce"(%26, %17) {op = "add"} : (f32, index) -> f32
    %28 = "uop.store"(%15, %27) : (!uop.ptr<f32>, f32) -> !uop.token
    %29 = "uop.end"(%28, %10, %13) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%29) : (!uop.token) -> ()
    return
  }
}
