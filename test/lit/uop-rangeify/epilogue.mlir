// RUN: morok-opt %s -p uop-rangeify --split-input-file | FileCheck %s

// relu(a @ b + c) @ d: the second product reads the first's result inside its reduce range, so something is stored.
// What is stored is the top of the elementwise chain on the first product (bias and relu, computed once per element
// in the first product's kernel), not the product itself: the second kernel only loads.
// CHECK-LABEL: func.func @chain_top
// CHECK: %[[S:.*]] = "uop.reduce"({{.*}}) {op = "add"}
// CHECK: %[[B:.*]] = "uop.add"(%[[S]], %{{.*}})
// CHECK: %[[W:.*]] = "uop.max"(%[[B]], %{{.*}})
// CHECK: %[[T:.*]] = "uop.bufferize"(%[[W]], {{.*}}) : (f32, index, index) -> memref<4096xf32>
// CHECK-NOT: uop.bufferize
// CHECK: "uop.index"(%[[T]]
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
func.func @chain_top(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %c: tensor<64x64xf32>, %d: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %ar = "uop.reshape"(%a) {shape = array<i64: 64, 1, 64>} : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %ae = "uop.expand"(%ar) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %bt = "uop.permute"(%b) {order = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %br = "uop.reshape"(%bt) {shape = array<i64: 1, 64, 64>} : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %be = "uop.expand"(%br) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %m = "uop.mul"(%ae, %be) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %h = "uop.reshape"(%r) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  %hb = "uop.add"(%h, %c) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %z = "uop.const"() {value = 0.0 : f32} : () -> tensor<64x64xf32>
  %y = "uop.max"(%hb, %z) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %yr = "uop.reshape"(%y) {shape = array<i64: 64, 1, 64>} : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %ye = "uop.expand"(%yr) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %dt = "uop.permute"(%d) {order = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %dr = "uop.reshape"(%dt) {shape = array<i64: 1, 64, 64>} : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %de = "uop.expand"(%dr) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %m2 = "uop.mul"(%ye, %de) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %r2 = "uop.reduce_axis"(%m2) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %o = "uop.reshape"(%r2) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// -----

// a @ b + c @ d: a kernel tiles one contraction, so the second product met inline is stored by a kernel of its own
// and the sum's kernel computes the first inline and loads the second.
// CHECK-LABEL: func.func @two_products
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
// CHECK: %[[P:.*]] = "uop.bufferize"({{.*}}) : (f32, index, index) -> memref<4096xf32>
// CHECK-NOT: uop.bufferize
// CHECK: "uop.index"(%[[P]]
// CHECK: "uop.store"
func.func @two_products(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %c: tensor<64x64xf32>, %d: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %ar = "uop.reshape"(%a) {shape = array<i64: 64, 1, 64>} : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %ae = "uop.expand"(%ar) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %br = "uop.reshape"(%b) {shape = array<i64: 1, 64, 64>} : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %be = "uop.expand"(%br) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %m = "uop.mul"(%ae, %be) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %cr = "uop.reshape"(%c) {shape = array<i64: 64, 1, 64>} : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %ce = "uop.expand"(%cr) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %dr = "uop.reshape"(%d) {shape = array<i64: 1, 64, 64>} : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %de = "uop.expand"(%dr) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %m2 = "uop.mul"(%ce, %de) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %r2 = "uop.reduce_axis"(%m2) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %s = "uop.add"(%r, %r2) : (tensor<64x64x1xf32>, tensor<64x64x1xf32>) -> tensor<64x64x1xf32>
  %o = "uop.reshape"(%s) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// -----

// A grouped product (2 groups of 32 rows: a grouped convolution's output, its groups and channels merged into 64
// channels by a reshape), bias and relu, read through a channel shuffle (reshape, permute, reshape) inside a second
// product's reduce: the relu is stored (the bias and relu in the grouped product's kernel, indexed through the merge,
// which uop-optimize splits back into group and channel), not the product with its bias and relu redone per read.
// CHECK-LABEL: func.func @grouped_chain_top
// CHECK: %[[S:.*]] = "uop.reduce"({{.*}}) {op = "add"}
// CHECK: %[[B:.*]] = "uop.add"(%[[S]], %{{.*}})
// CHECK: %[[W:.*]] = "uop.max"(%[[B]], %{{.*}})
// CHECK: %[[T:.*]] = "uop.bufferize"(%[[W]], {{.*}}) : (f32, index, index) -> memref<4096xf32>
// CHECK-NOT: uop.bufferize
// CHECK: "uop.index"(%[[T]]
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
func.func @grouped_chain_top(%a: tensor<2x32x16xf32>, %b: tensor<2x16x64xf32>, %c: tensor<64x64xf32>, %d: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %ar = "uop.reshape"(%a) {shape = array<i64: 2, 32, 1, 16>} : (tensor<2x32x16xf32>) -> tensor<2x32x1x16xf32>
  %ae = "uop.expand"(%ar) : (tensor<2x32x1x16xf32>) -> tensor<2x32x64x16xf32>
  %bt = "uop.permute"(%b) {order = array<i64: 0, 2, 1>} : (tensor<2x16x64xf32>) -> tensor<2x64x16xf32>
  %br = "uop.reshape"(%bt) {shape = array<i64: 2, 1, 64, 16>} : (tensor<2x64x16xf32>) -> tensor<2x1x64x16xf32>
  %be = "uop.expand"(%br) : (tensor<2x1x64x16xf32>) -> tensor<2x32x64x16xf32>
  %m = "uop.mul"(%ae, %be) : (tensor<2x32x64x16xf32>, tensor<2x32x64x16xf32>) -> tensor<2x32x64x16xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 3>} : (tensor<2x32x64x16xf32>) -> tensor<2x32x64x1xf32>
  %h = "uop.reshape"(%r) {shape = array<i64: 64, 64>} : (tensor<2x32x64x1xf32>) -> tensor<64x64xf32>
  %hb = "uop.add"(%h, %c) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %z = "uop.const"() {value = 0.0 : f32} : () -> tensor<64x64xf32>
  %y = "uop.max"(%hb, %z) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %y3 = "uop.reshape"(%y) {shape = array<i64: 2, 32, 64>} : (tensor<64x64xf32>) -> tensor<2x32x64xf32>
  %yt = "uop.permute"(%y3) {order = array<i64: 1, 0, 2>} : (tensor<2x32x64xf32>) -> tensor<32x2x64xf32>
  %ys = "uop.reshape"(%yt) {shape = array<i64: 64, 64>} : (tensor<32x2x64xf32>) -> tensor<64x64xf32>
  %yr = "uop.reshape"(%ys) {shape = array<i64: 64, 1, 64>} : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %ye = "uop.expand"(%yr) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %dt = "uop.permute"(%d) {order = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %dr = "uop.reshape"(%dt) {shape = array<i64: 1, 64, 64>} : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %de = "uop.expand"(%dr) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %m2 = "uop.mul"(%ye, %de) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %r2 = "uop.reduce_axis"(%m2) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %o = "uop.reshape"(%r2) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
