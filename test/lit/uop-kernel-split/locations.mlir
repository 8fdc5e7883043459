// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-kernel-split | FileCheck %s
// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-kernel-split | FileCheck %s --check-prefix=LINES

// A kernel's ops keep their locations in this file; the schedule's kernel op carries its kernel's.
// CHECK: func.func private
// CHECK: "uop.range"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+11]]:8)
// CHECK: "uop.load"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+12]]:8)
// CHECK: "uop.store"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+14]]:8)
// CHECK: func.func @schedule
// CHECK: "uop.kernel"() {{.*}} loc("{{.*}}locations.mlir":[[@LINE+13]]:8)
// Every location is one of this file's op lines, none a line of a pass's intermediate text.
// LINES-NOT: rebuilt
// LINES-NOT: locations.mlir":{{([1-9]|1[0-3]|2[6-9]|[3-9][0-9])}}:
module {
func.func @f(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.num_inputs = 1 : i64, uop.num_outputs = 1 : i64} {
  %0 = "uop.const"() {value = 4 : index} : () -> index
  %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %2 = "uop.index"(%arg0, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
  %4 = "uop.exp2"(%3) : (f32) -> f32
  %5 = "uop.index"(%arg1, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %6 = "uop.store"(%5, %4) : (!uop.ptr<f32>, f32) -> !uop.token
  %7 = "uop.end"(%6, %1) : (!uop.token, index) -> !uop.token
  "uop.sink"(%7) : (!uop.token) -> ()
  return
}
}
