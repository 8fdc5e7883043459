// RUN: morok-opt %s -p uop-cse | FileCheck %s

// Identical pure ops merge into the first; their users follow, so whole identical chains merge.
// CHECK-LABEL: func.func @graph
// CHECK-NEXT: %0 = "uop.add"(%arg0, %arg1)
// CHECK-NOT: "uop.add"
// CHECK-NEXT: %1 = "uop.neg"(%0)
// CHECK-NOT: "uop.neg"
// CHECK-NEXT: %2 = "uop.mul"(%1, %1)
// CHECK-NEXT: return %2
func.func @graph(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "uop.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "uop.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "uop.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "uop.mul"(%2, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// Different operand order, attributes or result types are different ops: all kept.
// CHECK-LABEL: func.func @distinct
// CHECK-NEXT: "uop.sub"(%arg0, %arg1)
// CHECK-NEXT: "uop.sub"(%arg1, %arg0)
// CHECK-NEXT: "uop.const"() {value = 1.000000e+00 : f32}
// CHECK-NEXT: "uop.const"() {value = 2.000000e+00 : f32}
// CHECK-NEXT: "uop.cast"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
// CHECK-NEXT: "uop.cast"(%arg0) : (tensor<4xf32>) -> tensor<4xi16>
func.func @distinct(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %0 = "uop.sub"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.sub"(%b, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "uop.const"() {value = 1.0 : f32} : () -> tensor<4xf32>
  %3 = "uop.const"() {value = 2.0 : f32} : () -> tensor<4xf32>
  %4 = "uop.cast"(%a) : (tensor<4xf32>) -> tensor<4xi32>
  %5 = "uop.cast"(%a) : (tensor<4xf32>) -> tensor<4xi16>
  return
}

// Side effects never merge: two identical stores are two stores. Loads and index math do merge.
// CHECK-LABEL: func.func @kernel
// CHECK-NEXT: %0 = "uop.index"(%arg0, %arg1)
// CHECK-NOT: "uop.index"
// CHECK-NEXT: %1 = "uop.load"(%0)
// CHECK-NOT: "uop.load"
// CHECK-NEXT: %2 = "uop.store"(%0, %1)
// CHECK-NEXT: %3 = "uop.store"(%0, %1)
// CHECK-NEXT: "uop.sink"(%2, %3)
func.func @kernel(%buf: memref<16xf32>, %i: index) {
  %p = "uop.index"(%buf, %i) : (memref<16xf32>, index) -> !uop.ptr<f32>
  %q = "uop.index"(%buf, %i) : (memref<16xf32>, index) -> !uop.ptr<f32>
  %l = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %m = "uop.load"(%q) : (!uop.ptr<f32>) -> f32
  %s = "uop.store"(%p, %l) : (!uop.ptr<f32>, f32) -> !uop.token
  %t = "uop.store"(%q, %m) : (!uop.ptr<f32>, f32) -> !uop.token
  "uop.sink"(%s, %t) : (!uop.token, !uop.token) -> ()
  return
}

// Ops are compared within one block only (no dominance analysis across blocks).
// CHECK-LABEL: func.func @blocks
// CHECK: "uop.neg"(%arg0)
// CHECK: ^bb1:
// CHECK-NEXT: "uop.neg"(%arg0)
func.func @blocks(%a: f32) -> f32 {
  %0 = "uop.neg"(%a) : (f32) -> f32
  cf.br ^bb1
^bb1:
  %1 = "uop.neg"(%a) : (f32) -> f32
  %2 = "uop.add"(%0, %1) : (f32, f32) -> f32
  return %2 : f32
}
