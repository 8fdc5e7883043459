// What IRDL cannot check, dialects/verify.py does, at the op's location.
// RUN: not morok-opt %s --split-input-file 2>&1 | FileCheck %s

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.reshape' op reshape from (2, 3) to (5,) changes the element count (6 vs 5)
func.func @f(%a: tensor<2x3xf32>) {
  %0 = "uop.reshape"(%a) : (tensor<2x3xf32>) -> tensor<5xf32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.expand' op cannot expand (2, 3) to (4, 3) (only size-1 dims broadcast)
func.func @f(%a: tensor<2x3xf32>) {
  %0 = "uop.expand"(%a) : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.pad' op pad of (4,) by [1, 1] gives (6,), not (7,)
func.func @f(%a: tensor<4xf32>) {
  %0 = "uop.pad"(%a) {padding = array<i64: 1, 1>} : (tensor<4xf32>) -> tensor<7xf32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.reduce_axis' op reduce of (2, 3) over [1] gives (2, 1)xf32, not (2,)xf32
func.func @f(%a: tensor<2x3xf32>) {
  %0 = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.cmplt' op result must have the operands' shape with element type i1, got tensor<4xf32>
func.func @f(%a: tensor<4xf32>) {
  %0 = "uop.cmplt"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.index' op pointer element i32 differs from buffer element f32
func.func @f(%m: memref<16xf32>, %i: index) {
  %0 = "uop.index"(%m, %i) : (memref<16xf32>, index) -> !uop.ptr<i32>
  return
}

// -----

// CHECK: shapes.mlir:[[@LINE+2]]:8: error: 'uop.permute' op attribute 'order' must be an array<i64: ...>, got array<i32: 1, 0>
func.func @f(%a: tensor<2x3xf32>) {
  %0 = "uop.permute"(%a) {order = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}
