// RUN: morok-opt %s -p uop-rangeify --split-input-file | FileCheck %s

// A row reduce opens a reduce range and closes it with uop.reduce; the loop range is closed by end.
// CHECK-LABEL: func.func @row_sum
// CHECK: %[[R0:.*]] = "uop.range"({{.*}}) {axis = 0 : i64, kind = "loop"}
// CHECK: %[[R1:.*]] = "uop.range"({{.*}}) {axis = 1 : i64, kind = "reduce"}
// CHECK: "uop.reduce"(%{{.*}}, %[[R1]]) {op = "add"} : (f32, index) -> f32
// CHECK: "uop.end"(%{{.*}}, %[[R0]])
func.func @row_sum(%a: tensor<3x4xf32>) -> tensor<3x1xf32> {
  %r = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  return %r : tensor<3x1xf32>
}

// -----

// x - x.max(1, keepdim): the max depends only on the outer loop, so it stays inline (no bufferize).
// CHECK-LABEL: func.func @sub_max
// CHECK-NOT: uop.bufferize
// CHECK: "uop.reduce"({{.*}}) {op = "max"}
// CHECK: "uop.sub"
func.func @sub_max(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %e = "uop.expand"(%m) : (tensor<3x1xf32>) -> tensor<3x4xf32>
  %s = "uop.sub"(%a, %e) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}

// -----

// x - x.max(0, keepdim): the max would be recomputed inside the outer row loop, so it is materialised.
// CHECK-LABEL: func.func @sub_colmax
// CHECK: %[[B:.*]] = "uop.bufferize"({{.*}}) : (f32, index) -> memref<4xf32>
// CHECK: "uop.index"(%[[B]]
func.func @sub_colmax(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<1x4xf32>
  %e = "uop.expand"(%m) : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %s = "uop.sub"(%a, %e) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}

// -----

// contiguous always materialises.
// CHECK-LABEL: func.func @contig
// CHECK: "uop.bufferize"
func.func @contig(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = "uop.contiguous"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %n = "uop.neg"(%c) : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// A big reduce under a pad (a cat of products): stored where it is valid, not computed at every padded place.
// CHECK-LABEL: func.func @pad_of_big_reduce
// CHECK: %[[B:.*]] = "uop.bufferize"({{.*}}) : (f32, index, index) -> memref<4096xf32>
// CHECK: "uop.index"(%[[B]]
func.func @pad_of_big_reduce(%a: tensor<64x64x64xf32>) -> tensor<64x128xf32> {
  %r = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 2>} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %s = "uop.reshape"(%r) {shape = array<i64: 64, 64>} : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  %p = "uop.pad"(%s) {padding = array<i64: 0, 0, 0, 64>} : (tensor<64x64xf32>) -> tensor<64x128xf32>
  return %p : tensor<64x128xf32>
}

// -----

// A small one stays inline under its gate: computing it at the padded places costs less than a kernel.
// CHECK-LABEL: func.func @pad_of_small_reduce
// CHECK-NOT: uop.bufferize
// CHECK: "uop.reduce"
func.func @pad_of_small_reduce(%a: tensor<3x4xf32>) -> tensor<5x1xf32> {
  %r = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %p = "uop.pad"(%r) {padding = array<i64: 1, 1, 0, 0>} : (tensor<3x1xf32>) -> tensor<5x1xf32>
  return %p : tensor<5x1xf32>
}
