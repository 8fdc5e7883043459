// RUN: not morok-opt %s --split-input-file 2>&1 | FileCheck %s

// CHECK: errors.mlir:[[@LINE+2]]:{{[0-9]+}}: error: {{.*}}uop.permute{{.*}}not a permutation
func.func @bad_perm(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %p = "uop.permute"(%a) {order = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// CHECK: errors.mlir:[[@LINE+2]]:{{[0-9]+}}: error: 'uop.reduce_axis' op attribute "axes" is expected but not provided
func.func @missing_attr(%a: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %r = "uop.reduce_axis"(%a) {op = "add"} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}

// -----

// CHECK: errors.mlir:[[@LINE+2]]:{{[0-9]+}}: error: expected 'tensor<2x3xf32>' but got 'tensor<2x3xi32>'
func.func @wrong_operand(%a: tensor<2x3xf32>, %b: tensor<2x3xi32>) -> tensor<2x3xf32> {
  %r = "uop.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// -----

// CHECK: errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: {{.*}}uop.nosuch
%0 = "uop.nosuch"() : () -> i32
