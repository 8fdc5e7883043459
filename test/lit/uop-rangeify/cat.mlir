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
