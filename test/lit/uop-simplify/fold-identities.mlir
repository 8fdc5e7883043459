// RUN: morok-opt %s -p uop-simplify | FileCheck %s

// CHECK-LABEL: func.func @fold
// CHECK-NEXT: %[[A:.*]] = "uop.const"() {value = -128 : i8} : () -> i8
// CHECK-NEXT: %[[B:.*]] = "uop.const"() {value = -3 : i32} : () -> i32
// CHECK-NEXT: %[[C:.*]] = "uop.const"() {value = 3.000000e+00 : f32} : () -> f32
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]]
func.func @fold() -> (i8, i32, f32) {
  %a = "uop.const"() {value = 127 : i8} : () -> i8
  %b = "uop.const"() {value = 1 : i8} : () -> i8
  %s = "uop.add"(%a, %b) : (i8, i8) -> i8
  %c = "uop.const"() {value = -7 : i32} : () -> i32
  %d = "uop.const"() {value = 2 : i32} : () -> i32
  %q = "uop.idiv"(%c, %d) : (i32, i32) -> i32
  %x = "uop.const"() {value = 1.5 : f32} : () -> f32
  %y = "uop.add"(%x, %x) : (f32, f32) -> f32
  return %s, %q, %y : i8, i32, f32
}

// CHECK-LABEL: func.func @identities(%arg0: i32, %arg1: f32)
// CHECK-NEXT: %[[Z:.*]] = "uop.const"() {value = 0 : i32} : () -> i32
// CHECK-NEXT: %[[N:.*]] = "uop.neg"(%arg1)
// CHECK-NEXT: return %arg0, %[[Z]], %arg1, %[[N]]
func.func @identities(%x: i32, %f: f32) -> (i32, i32, f32, f32) {
  %z = "uop.const"() {value = 0 : i32} : () -> i32
  %o = "uop.const"() {value = 1.0 : f32} : () -> f32
  %m = "uop.const"() {value = -1.0 : f32} : () -> f32
  %a = "uop.add"(%x, %z) : (i32, i32) -> i32
  %s = "uop.sub"(%x, %x) : (i32, i32) -> i32
  %n = "uop.neg"(%f) : (f32) -> f32
  %nn = "uop.neg"(%n) : (f32) -> f32
  %mo = "uop.mul"(%nn, %o) : (f32, f32) -> f32
  %mm = "uop.mul"(%m, %f) : (f32, f32) -> f32
  return %a, %s, %mo, %mm : i32, i32, f32, f32
}

// x + 0.0 is not x for x = -0.0: it must stay
// CHECK-LABEL: func.func @float_add_zero_kept
// CHECK: "uop.add"
func.func @float_add_zero_kept(%f: f32) -> f32 {
  %z = "uop.const"() {value = 0.0 : f32} : () -> f32
  %a = "uop.add"(%f, %z) : (f32, f32) -> f32
  return %a : f32
}
