// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8}' | FileCheck %s --check-prefix=OPT
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8},uop-lower-cpu' | FileCheck %s

// A 4096x4096 f32 elementwise output (64 MiB, contiguous along the inner axis) of rows read 4100 apart (so the loops
// stay two, see merge-loops.mlir): uop-optimize streams it past the cache (uop.nontemporal = 8 lanes; the threads split
// the outer loop, so no grain is needed). uop-lower-cpu steps the
// inner loop by 8, computes the 8 lanes (addresses base + 0..7) and stores them with one aligned nontemporal store.
// A small output (1024 elements) keeps plain stores.
// OPT-LABEL: func.func private @big
// OPT-SAME: uop.nontemporal = 8 : i64
// OPT-NOT: uop.grain
// OPT-LABEL: func.func private @small
// OPT-NOT: uop.nontemporal
// CHECK-LABEL: func.func @big(
// CHECK: scf.for %{{.*}} = %arg2 to %arg3 step %c1
// CHECK: scf.for %[[J:.*]] = %c0{{.*}} to %c4096{{.*}} step %c8
// CHECK: memref.load %arg1[%[[BASE:.*]]]
// CHECK: %[[L1:.*]] = arith.addi %[[BASE]], %c1
// CHECK: memref.load %arg1[%[[L1]]]
// CHECK: %[[V:.*]] = vector.from_elements %{{.*}} : vector<8xf32>
// CHECK: vector.store %[[V]], %arg0[%{{.*}}] {alignment = 32 : i64, nontemporal = true} : memref<16777216xf32>, vector<8xf32>
// CHECK-LABEL: func.func @small(
// CHECK-NOT: vector.store
// CHECK: memref.store
module {
  func.func private @big(%arg0: memref<16777216xf32>, %arg1: memref<16793600xf32>) attributes {uop.kernel} {
    %n = "uop.const"() {value = 4096 : index} : () -> index
    %i = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %r = "uop.mul"(%i, %n) : (index, index) -> index
    %a = "uop.add"(%r, %j) : (index, index) -> index
    %m = "uop.const"() {value = 4100 : index} : () -> index
    %ri = "uop.mul"(%i, %m) : (index, index) -> index
    %ai = "uop.add"(%ri, %j) : (index, index) -> index
    %p = "uop.index"(%arg1, %ai) : (memref<16793600xf32>, index) -> !uop.ptr<f32>
    %x = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %y = "uop.mul"(%x, %x) : (f32, f32) -> f32
    %q = "uop.index"(%arg0, %a) : (memref<16777216xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%q, %y) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i, %j) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
  func.func private @small(%arg0: memref<1024xf32>, %arg1: memref<1024xf32>) attributes {uop.kernel} {
    %n = "uop.const"() {value = 1024 : index} : () -> index
    %i = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %p = "uop.index"(%arg1, %i) : (memref<1024xf32>, index) -> !uop.ptr<f32>
    %x = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %y = "uop.mul"(%x, %x) : (f32, f32) -> f32
    %q = "uop.index"(%arg0, %i) : (memref<1024xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%q, %y) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<16777216xf32>, %arg1: memref<16793600xf32>, %arg2: memref<1024xf32>, %arg3: memref<1024xf32>) attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 2 : i64} {
    %0 = "uop.kernel"() {callee = @big, slots = array<i64: 0, 1>} : () -> !uop.token
    %1 = "uop.kernel"() {callee = @small, slots = array<i64: 2, 3>} : () -> !uop.token
    "uop.sink"(%0, %1) : (!uop.token, !uop.token) -> ()
    return
  }
}
