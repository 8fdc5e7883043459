// RUN: morok-opt %s -p uop-rangeify --split-input-file | FileCheck %s

// (x / c) @ w, a matrix-vector product: the vector is read inside the reduce at an index no output loop moves, the same
// 1024 elements for each of the 1000 outputs. Inline, the division would run once per weight (1000 x 1024); stored by
// a kernel of its own, once per element: the product's kernel only loads it.
// CHECK-LABEL: func.func @matvec
// CHECK: %[[D:.*]] = "uop.fdiv"
// CHECK: %[[V:.*]] = "uop.bufferize"(%[[D]], {{.*}}) : (f32, index) -> memref<1024xf32>
// CHECK-NOT: uop.fdiv
// CHECK: "uop.index"(%[[V]]
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
func.func @matvec(%x: tensor<1024xf32>, %c: tensor<1xf32>, %w: tensor<1000x1024xf32>) -> tensor<1000xf32> {
  %ce = "uop.expand"(%c) : (tensor<1xf32>) -> tensor<1024xf32>
  %d = "uop.fdiv"(%x, %ce) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %dr = "uop.reshape"(%d) {shape = array<i64: 1, 1024>} : (tensor<1024xf32>) -> tensor<1x1024xf32>
  %de = "uop.expand"(%dr) : (tensor<1x1024xf32>) -> tensor<1000x1024xf32>
  %m = "uop.mul"(%de, %w) : (tensor<1000x1024xf32>, tensor<1000x1024xf32>) -> tensor<1000x1024xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 1>} : (tensor<1000x1024xf32>) -> tensor<1000x1xf32>
  %o = "uop.reshape"(%r) {shape = array<i64: 1000>} : (tensor<1000x1xf32>) -> tensor<1000xf32>
  return %o : tensor<1000xf32>
}

// -----

// The same for 8 outputs of 64: recomputing the division 8 times (4096 divisions) costs less than a kernel, so it stays
// inline; and a matrix's rows (an index that the output rows move) are never stored for this.
// CHECK-LABEL: func.func @small
// CHECK-NOT: uop.bufferize
// CHECK: "uop.fdiv"
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
func.func @small(%x: tensor<64xf32>, %c: tensor<1xf32>, %w: tensor<8x64xf32>) -> tensor<8xf32> {
  %ce = "uop.expand"(%c) : (tensor<1xf32>) -> tensor<64xf32>
  %d = "uop.fdiv"(%x, %ce) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %dr = "uop.reshape"(%d) {shape = array<i64: 1, 64>} : (tensor<64xf32>) -> tensor<1x64xf32>
  %de = "uop.expand"(%dr) : (tensor<1x64xf32>) -> tensor<8x64xf32>
  %m = "uop.mul"(%de, %w) : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 1>} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %o = "uop.reshape"(%r) {shape = array<i64: 8>} : (tensor<8x1xf32>) -> tensor<8xf32>
  return %o : tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @rows
// CHECK-NOT: uop.bufferize
// CHECK: "uop.fdiv"
// CHECK: "uop.reduce"({{.*}}) {op = "add"}
func.func @rows(%x: tensor<64x1024xf32>, %c: tensor<1x1xf32>, %w: tensor<64x1024xf32>) -> tensor<64x64xf32> {
  %ce = "uop.expand"(%c) : (tensor<1x1xf32>) -> tensor<64x1024xf32>
  %d = "uop.fdiv"(%x, %ce) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %dr = "uop.reshape"(%d) {shape = array<i64: 64, 1, 1024>} : (tensor<64x1024xf32>) -> tensor<64x1x1024xf32>
  %de = "uop.expand"(%dr) : (tensor<64x1x1024xf32>) -> tensor<64x64x1024xf32>
  %wr = "uop.reshape"(%w) {shape = array<i64: 1, 64, 1024>} : (tensor<64x1024xf32>) -> tensor<1x64x1024xf32>
  %we = "uop.expand"(%wr) : (tensor<1x64x1024xf32>) -> tensor<64x64x1024xf32>
  %m = "uop.mul"(%de, %we) : (tensor<64x64x1024xf32>, tensor<64x64x1024xf32>) -> tensor<64x64x1024xf32>
  %r = "uop.reduce_axis"(%m) {op = "add", axes = array<i64: 2>} : (tensor<64x64x1024xf32>) -> tensor<64x64x1xf32>
  %o = "uop.reshape"(%r) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
