// RUN: not morok-opt %s -p uop-rangeify 2>&1 | FileCheck %s

// An assign writes its target's buffer in place: a target that is a computed value (no buffer of its own) is an error
// at the op, not a store into nothing.
// CHECK: error: uop-rangeify: an assign's target must be an input buffer, assigned once per graph
func.func @computed_target(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "uop.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = "uop.assign"(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
