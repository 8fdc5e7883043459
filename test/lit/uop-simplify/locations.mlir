// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-simplify | FileCheck %s

// A folded constant carries the location of the op it replaces in this file.
// CHECK-NOT: rebuilt
// CHECK: "uop.const"() {value = 3 : i32} : () -> i32 loc("{{.*}}locations.mlir":[[@LINE+6]]:8)
// CHECK: "uop.mul"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+6]]:8)
// CHECK: } loc("{{.*}}locations.mlir":[[@LINE+1]]:1)
func.func @f(%x: i32) -> i32 {
  %a = "uop.const"() {value = 1 : i32} : () -> i32
  %b = "uop.const"() {value = 2 : i32} : () -> i32
  %s = "uop.add"(%a, %b) : (i32, i32) -> i32
  %m = "uop.mul"(%x, %s) : (i32, i32) -> i32
  return %m : i32
}
