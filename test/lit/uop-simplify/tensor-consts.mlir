// RUN: morok-opt %s -p uop-simplify | FileCheck %s
// Tensor-typed constants are printed back with their element type: 2 + 3 folds to a splat 5 of tensor<4xi32>.
// CHECK-LABEL: func.func @graph
// CHECK: %[[C:.*]] = "uop.const"() {value = 5 : i32} : () -> tensor<4xi32>
// CHECK: return %[[C]]
func.func @graph() -> tensor<4xi32> {
  %a = "uop.const"() {value = 2 : i32} : () -> tensor<4xi32>
  %b = "uop.const"() {value = 3 : i32} : () -> tensor<4xi32>
  %c = "uop.add"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %c : tensor<4xi32>
}
