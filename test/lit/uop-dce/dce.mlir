// RUN: morok-opt %s -p uop-dce | FileCheck %s

// A dead chain goes entirely (the mul dies once the neg that used it is gone); what the result needs stays.
// CHECK-LABEL: func.func @graph
// CHECK-NEXT: %0 = "uop.add"(%arg0, %arg0)
// CHECK-NOT: "uop.{{mul|neg|const|reshape}}"
// CHECK-NEXT: return %0
func.func @graph(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "uop.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.mul"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "uop.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "uop.const"() {value = 1.0 : f32} : () -> tensor<4xf32>
  %4 = "uop.reshape"(%a) : (tensor<4xf32>) -> tensor<2x2xf32>
  return %0 : tensor<4xf32>
}

// Side effects stay though nothing uses their tokens: store, end, sink, kernel, barrier, if, endif; and the values
// they use. The unused load and range go.
// CHECK-LABEL: func.func @kernel
// CHECK-NEXT: %0 = "uop.range"(%arg1) {axis = 0 : i64, kind = "loop"}
// CHECK-NOT: "uop.range"
// CHECK-NEXT: %1 = "uop.index"(%arg0, %0)
// CHECK-NOT: "uop.load"
// CHECK-NEXT: %2 = "uop.store"(%1, %arg2)
// CHECK-NEXT: %3 = "uop.end"(%2, %0)
// CHECK-NEXT: %4 = "uop.barrier"(%3)
// CHECK-NEXT: %5 = "uop.if"(%arg3)
// CHECK-NEXT: %6 = "uop.endif"(%5)
// CHECK-NEXT: %7 = "uop.kernel"() {callee = @k0, slots = array<i64: 0>}
// CHECK-NEXT: "uop.sink"(%3)
// CHECK-NEXT: return
func.func @kernel(%buf: memref<16xf32>, %n: index, %v: f32, %c: i1) {
  %r = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %r2 = "uop.range"(%n) {axis = 1 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%buf, %r) : (memref<16xf32>, index) -> !uop.ptr<f32>
  %l = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %s = "uop.store"(%p, %v) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r) : (!uop.token, index) -> !uop.token
  %b = "uop.barrier"(%e) : (!uop.token) -> !uop.token
  %i = "uop.if"(%c) : (i1) -> !uop.token
  %ei = "uop.endif"(%i) : (!uop.token) -> !uop.token
  %k = "uop.kernel"() {callee = @k0, slots = array<i64: 0>} : () -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// assign and copy write or move data: kept unused. Upstream ops are not ours to erase.
// CHECK-LABEL: func.func @effects
// CHECK-NEXT: "uop.assign"
// CHECK-NEXT: "uop.copy"
// CHECK-NOT: "uop.detach"
// CHECK-NEXT: arith.constant
// CHECK-NEXT: return
func.func @effects(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %0 = "uop.assign"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "uop.copy"(%a) {device = "CPU"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "uop.detach"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = arith.constant 1.0 : f32
  return
}
