// --mlir-print-debuginfo prints every op's location with this file's name; --split-input-file keeps chunks apart
// and keeps their line numbers.
// RUN: morok-opt %s --split-input-file --mlir-print-debuginfo -p uop-cse | FileCheck %s

// CHECK: "uop.neg"(%arg0) : (f32) -> f32 loc(#[[L:loc[0-9]*]])
// CHECK: #[[L]] = loc("{{.*}}debuginfo.mlir":[[@LINE+3]]:8)
// CHECK: // -----
func.func @f(%a: f32) -> f32 {
  %0 = "uop.neg"(%a) : (f32) -> f32
  return %0 : f32
}

// -----

// CHECK: "uop.sqrt"(%arg0) : (f32) -> f32 loc(#[[M:loc[0-9]*]])
// CHECK: #[[M]] = loc("{{.*}}debuginfo.mlir":[[@LINE+2]]:8)
func.func @g(%a: f32) -> f32 {
  %0 = "uop.sqrt"(%a) : (f32) -> f32
  return %0 : f32
}
