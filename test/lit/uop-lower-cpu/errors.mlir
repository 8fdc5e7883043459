// RUN: not morok-opt %s --split-input-file -p uop-lower-cpu 2>&1 | FileCheck %s

// CHECK: errors.mlir:[[@LINE+6]]:{{[0-9]+}}: error: uop-lower-cpu: uop.sqrt is not defined on int32
func.func private @k(%arg0: memref<4xi32>) attributes {uop.kernel} {
  %c4 = "uop.const"() {value = 4 : index} : () -> index
  %i = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg0, %i) : (memref<4xi32>, index) -> !uop.ptr<i32>
  %v = "uop.load"(%p) : (!uop.ptr<i32>) -> i32
  %s = "uop.sqrt"(%v) : (i32) -> i32
  %t = "uop.store"(%p, %s) : (!uop.ptr<i32>, i32) -> !uop.token
  %e = "uop.end"(%t, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// -----

// a store through a range that no uop.end closes
// CHECK: errors.mlir:[[@LINE+3]]:{{[0-9]+}}: error: uop-lower-cpu: range axis=0 is used outside the loop that closes it
func.func private @k(%arg0: memref<5xf32>) attributes {uop.kernel} {
  %c5 = "uop.const"() {value = 5 : index} : () -> index
  %i = "uop.range"(%c5) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg0, %i) : (memref<5xf32>, index) -> !uop.ptr<f32>
  %one = "uop.const"() {value = 1.0 : f32} : () -> f32
  %t = "uop.store"(%p, %one) : (!uop.ptr<f32>, f32) -> !uop.token
  "uop.sink"(%t) : (!uop.token) -> ()
  return
}
