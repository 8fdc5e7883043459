// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p 'uop-optimize{threads=1 vec=8}' | FileCheck %s
// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p 'uop-optimize{threads=1 vec=8}' | FileCheck %s --check-prefix=LINES

// The one loop uop-optimize merges three contiguous loops into runs where they ended in this file; the ops it keeps
// keep their own locations.
// CHECK: "uop.range"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+25]]:10)
// CHECK: "uop.load"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+19]]:10)
// CHECK: "uop.store"({{.*}} loc("{{.*}}locations.mlir":[[@LINE+22]]:10)
// CHECK: } loc("{{.*}}locations.mlir":[[@LINE+5]]:3)
// Every location is one of this file's op lines, none a line of a pass's intermediate text.
// LINES-NOT: rebuilt
// LINES-NOT: locations.mlir":{{([1-9]|1[0-2]|3[3-9]|[4-9][0-9])}}:
module {
  func.func private @contiguous(%arg0: memref<784xf32>, %arg1: memref<784xf32>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c14 = "uop.const"() {value = 14 : index} : () -> index
    %c196 = "uop.const"() {value = 196 : index} : () -> index
    %c = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %h = "uop.range"(%c14) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %w = "uop.range"(%c14) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %0 = "uop.mul"(%c, %c196) : (index, index) -> index
    %1 = "uop.mul"(%h, %c14) : (index, index) -> index
    %2 = "uop.add"(%0, %1) : (index, index) -> index
    %3 = "uop.add"(%2, %w) : (index, index) -> index
    %4 = "uop.index"(%arg1, %3) : (memref<784xf32>, index) -> !uop.ptr<f32>
    %5 = "uop.load"(%4) : (!uop.ptr<f32>) -> f32
    %one = "uop.const"() {value = 1.0 : f32} : () -> f32
    %6 = "uop.add"(%5, %one) : (f32, f32) -> f32
    %7 = "uop.index"(%arg0, %3) : (memref<784xf32>, index) -> !uop.ptr<f32>
    %8 = "uop.store"(%7, %6) : (!uop.ptr<f32>, f32) -> !uop.token
    %9 = "uop.end"(%8, %c, %h, %w) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%9) : (!uop.token) -> ()
    return
  }
}
