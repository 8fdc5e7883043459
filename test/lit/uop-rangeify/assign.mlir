// RUN: morok-opt %s -p uop-rangeify | FileCheck %s
// RUN: morok-opt %s -p uop-rangeify,uop-kernel-split | FileCheck %s --check-prefix=SPLIT

// assign(target, write through a slice): the write (Tensor.__setitem__: where(pad(all true), pad(v), target)) is stored
// into the target's own buffer (%arg0), over the box v fills only (3 x 4 of the 96 elements, row 5 of 8), and the
// output is marked as that buffer (uop.aliases: output 0 is input 0): nothing is allocated, nothing else copied.
// CHECK-LABEL: func.func @kv_row
// CHECK-SAME: uop.aliases = array<i64: 0, 0>
// CHECK: %[[H:.*]] = "uop.range"(%{{.*}}) {axis = 0 : i64, kind = "loop"} : (index) -> index
// CHECK: %[[ROW:.*]] = "uop.const"() {value = 20 : index}
// CHECK: %[[D:.*]] = "uop.range"(%{{.*}}) {axis = 1 : i64, kind = "loop"} : (index) -> index
// CHECK: %[[AT:.*]] = "uop.index"(%arg0, %{{.*}}) : (memref<96xf32>, index) -> !uop.ptr<f32>
// CHECK: %[[V:.*]] = "uop.load"
// CHECK: "uop.store"(%[[AT]], %[[V]])
// CHECK: "uop.end"(%{{.*}}, %[[H]], %[[D]])
// CHECK-NOT: "uop.store"
// SPLIT-LABEL: func.func private @kv_row_E_3_4_k0(%arg0: memref<96xf32>, %arg1: memref<12xf32>)
// SPLIT: func.func @kv_row_schedule({{.*}}) attributes {uop.aliases = array<i64: 0, 0>
// SPLIT-NEXT: "uop.kernel"() {callee = @kv_row_E_3_4_k0, slots = array<i64: 0, 1>}
// SPLIT-NOT: "uop.kernel"
func.func @kv_row(%c: tensor<1x3x8x4xf32>, %k: tensor<1x3x1x4xf32>) -> tensor<1x3x8x4xf32> {
  %t = "uop.const"() {value = true} : () -> tensor<i1>
  %r = "uop.reshape"(%t) : (tensor<i1>) -> tensor<1x1x1x1xi1>
  %e = "uop.expand"(%r) : (tensor<1x1x1x1xi1>) -> tensor<1x3x1x4xi1>
  %m = "uop.pad"(%e) {padding = array<i64: 0, 0, 0, 0, 5, 2, 0, 0>} : (tensor<1x3x1x4xi1>) -> tensor<1x3x8x4xi1>
  %v = "uop.pad"(%k) {padding = array<i64: 0, 0, 0, 0, 5, 2, 0, 0>} : (tensor<1x3x1x4xf32>) -> tensor<1x3x8x4xf32>
  %w = "uop.where"(%m, %v, %c) : (tensor<1x3x8x4xi1>, tensor<1x3x8x4xf32>, tensor<1x3x8x4xf32>) -> tensor<1x3x8x4xf32>
  %a = "uop.assign"(%c, %w) : (tensor<1x3x8x4xf32>, tensor<1x3x8x4xf32>) -> tensor<1x3x8x4xf32>
  return %a : tensor<1x3x8x4xf32>
}

// t[0:3] = t[1:4]: the value reads the target at other elements than it stores, so it is stored to a buffer of its
// own first (a bufferize, its kernel before the store's), and the in-place store reads that buffer.
// CHECK-LABEL: func.func @shifted
// CHECK: %[[TMP:.*]] = "uop.bufferize"
// CHECK: "uop.index"(%[[TMP]]
// CHECK: "uop.store"
// SPLIT-LABEL: func.func @shifted_schedule
// SPLIT: %[[K0:.*]] = "uop.kernel"() {callee = @{{.*}}, slots = array<i64: 2, 0>}
// SPLIT: "uop.kernel"(%[[K0]]) {callee = @{{.*}}, slots = array<i64: 0, 2>}
func.func @shifted(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = "uop.const"() {value = true} : () -> tensor<i1>
  %r = "uop.reshape"(%t) : (tensor<i1>) -> tensor<1xi1>
  %e = "uop.expand"(%r) : (tensor<1xi1>) -> tensor<3xi1>
  %m = "uop.pad"(%e) {padding = array<i64: 0, 1>} : (tensor<3xi1>) -> tensor<4xi1>
  %s = "uop.shrink"(%x) {bounds = array<i64: 1, 4>} : (tensor<4xf32>) -> tensor<3xf32>
  %v = "uop.pad"(%s) {padding = array<i64: 0, 1>} : (tensor<3xf32>) -> tensor<4xf32>
  %w = "uop.where"(%m, %v, %x) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = "uop.assign"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
