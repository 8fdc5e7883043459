// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-lower-cpu | FileCheck %s
// RUN: morok-opt %s --mlir-print-debuginfo --mlir-print-local-scope -p uop-lower-cpu | FileCheck %s --check-prefix=LINES

// The loops and arithmetic a kernel lowers to carry the kernel's location in this file; the schedule's calls the
// schedule's.
// CHECK: func.func @k(%arg0: memref<4xf32> loc("{{.*}}locations.mlir":[[@LINE+11]]:{{[0-9]+}})
// CHECK: scf.for
// CHECK: arith.subf {{.*}} loc("{{.*}}locations.mlir":[[@LINE+9]]:3)
// CHECK: } loc("{{.*}}locations.mlir":[[@LINE+8]]:3)
// CHECK: func.func @schedule
// CHECK: call @k{{.*}} loc("{{.*}}locations.mlir":[[@LINE+18]]:3)
// CHECK: } loc("{{.*}}locations.mlir":[[@LINE+17]]:3)
// Every location is one of this file's function lines, none a line of a pass's intermediate text.
// LINES-NOT: rebuilt
// LINES-NOT: locations.mlir":{{([1-9]|1[0-5]|1[89]|2[0-8]|3[0-9]|[4-9][0-9])}}:
module {
  func.func private @k(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 4 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.index"(%arg1, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %4 = "uop.load"(%3) : (!uop.ptr<f32>) -> f32
    %5 = "uop.exp2"(%4) : (f32) -> f32
    %6 = "uop.store"(%2, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    %7 = "uop.end"(%6, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%7) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<4xf32>, %arg1: memref<4xf32>) attributes {uop.num_inputs = 1 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @k, slots = array<i64: 1, 0>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
