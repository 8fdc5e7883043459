// RUN: morok-opt %s -p uop-allreduce --split-input-file | FileCheck %s

// Below the ring size each device copies every other device's value and adds it to its own (no copy of its own).
// CHECK-LABEL: func.func @naive_add
// CHECK-NEXT: %0 = "uop.copy"(%arg1) {device = "CPU"}
// CHECK-NEXT: %1 = "uop.add"(%arg0, %0)
// CHECK-NEXT: %2 = "uop.copy"(%arg0) {device = "CPU:1"}
// CHECK-NEXT: %3 = "uop.add"(%2, %arg1)
// CHECK-NEXT: return %1, %3
// CHECK-NOT: "uop.allreduce"
func.func @naive_add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "uop.allreduce"(%a, %b) {device = "CPU", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.allreduce"(%a, %b) {device = "CPU:1", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// max reduces with max; three devices: the third's result takes two copies.
// CHECK-LABEL: func.func @naive_max
// CHECK-NEXT: %0 = "uop.copy"(%arg0) {device = "CPU:2"}
// CHECK-NEXT: %1 = "uop.copy"(%arg1) {device = "CPU:2"}
// CHECK-NEXT: %2 = "uop.max"(%0, %1)
// CHECK-NEXT: %3 = "uop.max"(%2, %arg2)
// CHECK-NEXT: return %3
func.func @naive_max(%a: tensor<2x3xi32>, %b: tensor<2x3xi32>, %c: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %0 = "uop.allreduce"(%a, %b, %c) {device = "CPU:2", devices = "CPU,CPU:1,CPU:2", op = "max"} : (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}
