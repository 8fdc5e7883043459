// Types the passes do not handle are refused by verify.py at the op (or the function) that has them, before any pass
// runs, naming what is supported: never an internal error inside a pass.
// RUN: not morok-opt %s --split-input-file -p uop-rangeify,uop-simplify,uop-kernel-split,uop-optimize,uop-lower-cpu 2>&1 | FileCheck %s

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.add' op element type tf32 of tensor<4xtf32> is not supported (supported: i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64, f8E4M3FN, f8E5M2, f16, bf16, f32, f64, index)
func.func @f(%a: tensor<4xtf32>) -> tensor<4xtf32> {
  %0 = "uop.add"(%a, %a) : (tensor<4xtf32>, tensor<4xtf32>) -> tensor<4xtf32>
  return %0 : tensor<4xtf32>
}

// -----

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.neg' op element type f8E4M3FNUZ of tensor<4xf8E4M3FNUZ> is not supported
func.func @f(%a: tensor<4xf8E4M3FNUZ>) -> tensor<4xf8E4M3FNUZ> {
  %0 = "uop.neg"(%a) : (tensor<4xf8E4M3FNUZ>) -> tensor<4xf8E4M3FNUZ>
  return %0 : tensor<4xf8E4M3FNUZ>
}

// -----

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.neg' op unsupported type tensor<4xvector<4xf32>>
func.func @f(%a: tensor<4xvector<4xf32>>) -> tensor<4xvector<4xf32>> {
  %0 = "uop.neg"(%a) : (tensor<4xvector<4xf32>>) -> tensor<4xvector<4xf32>>
  return %0 : tensor<4xvector<4xf32>>
}

// -----

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.neg' op needs static shapes, got tensor<?x4xf32>
func.func @f(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = "uop.neg"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.neg' op tensor<99999999999x99999999999xf32> has 9999999999800000000001 elements of 4 bytes: more than 2^47 bytes
func.func @f(%a: tensor<99999999999x99999999999xf32>) -> tensor<99999999999x99999999999xf32> {
  %0 = "uop.neg"(%a) : (tensor<99999999999x99999999999xf32>) -> tensor<99999999999x99999999999xf32>
  return %0 : tensor<99999999999x99999999999xf32>
}

// -----

// CHECK: types.mlir:[[@LINE+2]]:8: error: 'uop.buffer' op slot 99999 out of range: the function has 1 argument(s)
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "uop.buffer"() {slot = 99999 : i64} : () -> tensor<4xf32>
  %1 = "uop.add"(%a, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK: types.mlir:[[@LINE+1]]:1: error: 'func.func' op @f argument 1: element type i3 of tensor<4xi3> is not supported
func.func @f(%a: tensor<4xf32>, %b: tensor<4xi3>) -> tensor<4xf32> {
  %0 = "uop.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A function without uop ops is only refused by a pass that imports it as a uop graph.
// CHECK: types.mlir:[[@LINE+1]]:1: error: uop-rangeify: 'func.func' op @f argument 0: element type tf32 of tensor<4xtf32> is not supported
func.func @f(%a: tensor<4xtf32>) -> tensor<4xtf32> {
  return %a : tensor<4xtf32>
}
