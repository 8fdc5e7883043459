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

// -----

// kernel choices are typed attributes; a malformed one is refused at the function, not an internal error
// CHECK: errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: uop-lower-cpu: @k: attribute uop.threads must be an i64 integer, got "x"
func.func private @k(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.kernel, uop.threads = "x"} {
  %c = "uop.const"() {value = 4 : index} : () -> index
  %r = "uop.range"(%c) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg1, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %q = "uop.index"(%arg0, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %v) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// -----

// kernel choices are typed attributes; a malformed one is refused at the function, not an internal error
// CHECK: errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: uop-lower-cpu: @k: attribute uop.nontemporal must be an i64 integer, got 2.500000e+00 : f32
func.func private @k(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.kernel, uop.nontemporal = 2.5 : f32} {
  %c = "uop.const"() {value = 4 : index} : () -> index
  %r = "uop.range"(%c) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg1, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %q = "uop.index"(%arg0, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %v) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// -----

// kernel choices are typed attributes; a malformed one is refused at the function, not an internal error
// CHECK: errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: uop-lower-cpu: @k: uop.contraction on a kernel that is not a contraction
func.func private @k(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.kernel, uop.contraction = array<i64: 6, 16>} {
  %c = "uop.const"() {value = 4 : index} : () -> index
  %r = "uop.range"(%c) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg1, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %q = "uop.index"(%arg0, %r) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %v) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// -----

// a loop to a size read at run time is a plain loop (threads take their parts of it at run time): lanes of nontemporal
// stores need its static size
// CHECK: errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: uop-lower-cpu: @k: uop.nontemporal needs static range sizes (a loop here runs to a symbolic size)
func.func private @k(%arg0: memref<8xf32>, %arg1: memref<1xi64>) attributes {uop.kernel, uop.nontemporal = 4 : i64} {
  %c0 = "uop.const"() {value = 0 : index} : () -> index
  %p0 = "uop.index"(%arg1, %c0) : (memref<1xi64>, index) -> !uop.ptr<i64>
  %v = "uop.load"(%p0) : (!uop.ptr<i64>) -> i64
  %n = "uop.cast"(%v) : (i64) -> index
  %i = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg0, %i) : (memref<8xf32>, index) -> !uop.ptr<f32>
  %one = "uop.const"() {value = 1.0 : f32} : () -> f32
  %t = "uop.store"(%p, %one) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%t, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}

// -----

// uop.keep naming a reduce whose source no loop of the kernel computes again
// CHECK: errors.mlir:[[@LINE+10]]:{{[0-9]+}}: error: uop-lower-cpu: @k: uop.keep names a reduce its loops do not recompute
func.func private @k(%arg0: memref<3xf32>, %arg1: memref<15xf32>) attributes {uop.kernel, uop.keep = array<i64: 1>} {
  %0 = "uop.const"() {value = 3 : index} : () -> index
  %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %2 = "uop.const"() {value = 5 : index} : () -> index
  %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
  %4 = "uop.mul"(%1, %2) : (index, index) -> index
  %5 = "uop.add"(%4, %3) : (index, index) -> index
  %6 = "uop.index"(%arg1, %5) : (memref<15xf32>, index) -> !uop.ptr<f32>
  %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
  %8 = "uop.reduce"(%7, %3) {op = "add"} : (f32, index) -> f32
  %9 = "uop.index"(%arg0, %1) : (memref<3xf32>, index) -> !uop.ptr<f32>
  %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
  %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
  "uop.sink"(%11) : (!uop.token) -> ()
  return
}
