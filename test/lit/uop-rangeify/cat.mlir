// RUN: morok-opt %s -p uop-rangeify | FileCheck %s

// A cat of three parts (mixin.cat: where(pad(all true), pad(part), rest)) read inside a product's reduce range is
// stored part by part: the last part padded over the whole buffer, then the others each into its slice (an `after`
// per slice), and the product loads the buffer: no per-element select among the parts.
// CHECK-LABEL: func.func @cat_then_product
// CHECK: %[[B:.*]] = "uop.bufferize"({{.*}}) : (f32, index) -> memref<96xf32>
// CHECK: "uop.store"
// CHECK: %[[A1:.*]] = "uop.after"(%[[B]], %{{.*}})
// CHECK: "uop.store"
// CHECK: %[[A2:.*]] = "uop.after"(%[[A1]], %{{.*}})
// CHECK-NOT: "uop.where"
// CHECK: "uop.index"(%[[A2]]
// CHECK: "uop.reduce"
func.func @cat_then_product(%a: tensor<32xf32>, %b: tensor<32xf32>, %c: tensor<32xf32>, %w: tensor<64x96xf32>) -> tensor<64x1xf32> {
  %t = "uop.const"() {value = true} : () -> tensor<32xi1>
  %pa = "uop.pad"(%a) {padding = array<i64: 0, 64>} : (tensor<32xf32>) -> tensor<96xf32>
  %pb = "uop.pad"(%b) {padding = array<i64: 32, 32>} : (tensor<32xf32>) -> tensor<96xf32>
  %mb = "uop.pad"(%t) {padding = array<i64: 32, 32>} : (tensor<32xi1>) -> tensor<96xi1>
  %ab = "uop.where"(%mb, %pb, %pa) : (tensor<96xi1>, tensor<96xf32>, tensor<96xf32>) -> tensor<96xf32>
  %pc = "uop.pad"(%c) {padding = array<i64: 64, 0>} : (tensor<32xf32>) -> tensor<96xf32>
  %mc = "uop.pad"(%t) {padding = array<i64: 64, 0>} : (tensor<32xi1>) -> tensor<96xi1>
  %cat = "uop.where"(%mc, %pc, %ab) : (tensor<96xi1>, tensor<96xf32>, tensor<96xf32>) -> tensor<96xf32>
  %cr = "uop.reshape"(%cat) {shape = array<i64: 1, 96>} : (tensor<96xf32>) -> tensor<1x96xf32>
  %ce = "uop.expand"(%cr) : (tensor<1x96xf32>) -> tensor<64x96xf32>
  %m = "uop.mul"(%ce, %w) : (tensor<64x96xf32>, tensor<64x96xf32>) -> tensor<64x96xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 1>} : (tensor<64x96xf32>) -> tensor<64x1xf32>
  return %r : tensor<64x1xf32>
}

// A cat that is an output (of 4096 elements or more, its parts tiling it): each part stored into its rows of the
// output by loops of its own (the output's buffer is %arg2), no per-element select among the parts; a smaller one
// stays one loop nest of selects.
// CHECK-LABEL: func.func @cat_output
// CHECK-NOT: "uop.where"
// CHECK: %[[I1:.*]] = "uop.index"(%arg2, %{{.*}}) : (memref<8192xf32>, index) -> !uop.ptr<f32>
// CHECK: "uop.exp2"
// CHECK: "uop.store"(%[[I1]]
// CHECK: %[[I2:.*]] = "uop.index"(%arg2, %{{.*}}) : (memref<8192xf32>, index) -> !uop.ptr<f32>
// CHECK: "uop.store"(%[[I2]]
// CHECK-NOT: "uop.store"
// CHECK-LABEL: func.func @small_cat_output
// CHECK: "uop.where"
func.func @cat_output(%a: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<8192xf32> {
  %t = "uop.const"() {value = true} : () -> tensor<4096xi1>
  %e = "uop.exp2"(%a) : (tensor<4096xf32>) -> tensor<4096xf32>
  %pa = "uop.pad"(%e) {padding = array<i64: 0, 4096>} : (tensor<4096xf32>) -> tensor<8192xf32>
  %pb = "uop.pad"(%b) {padding = array<i64: 4096, 0>} : (tensor<4096xf32>) -> tensor<8192xf32>
  %mb = "uop.pad"(%t) {padding = array<i64: 4096, 0>} : (tensor<4096xi1>) -> tensor<8192xi1>
  %cat = "uop.where"(%mb, %pb, %pa) : (tensor<8192xi1>, tensor<8192xf32>, tensor<8192xf32>) -> tensor<8192xf32>
  return %cat : tensor<8192xf32>
}
func.func @small_cat_output(%a: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<64xf32> {
  %t = "uop.const"() {value = true} : () -> tensor<32xi1>
  %pa = "uop.pad"(%a) {padding = array<i64: 0, 32>} : (tensor<32xf32>) -> tensor<64xf32>
  %pb = "uop.pad"(%b) {padding = array<i64: 32, 0>} : (tensor<32xf32>) -> tensor<64xf32>
  %mb = "uop.pad"(%t) {padding = array<i64: 32, 0>} : (tensor<32xi1>) -> tensor<64xi1>
  %cat = "uop.where"(%mb, %pb, %pa) : (tensor<64xi1>, tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %cat : tensor<64xf32>
}
