// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432}' | FileCheck %s --check-prefix=OPT
// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// An elementwise kernel over n x 1024 rows, n symbolic (read from the variables' buffer, clamped to [1, 4096]): its
// outer loop runs on 2 threads (4096 x 1024 elements at n's largest value are worth it), each taking its part of the
// size read at run time: chunk bounds lo .. hi of 2 parts become rows n * lo / 2 .. n * hi / 2 (no chunk split is
// fixed at compile time, so one compiled kernel serves every n); @schedule runs both parts in one call.
// OPT: func.func private @ew({{.*}}uop.threads = 2
// CHECK-LABEL: func.func @ew(
// CHECK-SAME: %[[LO:[a-z0-9]+]]: index, %[[HI:[a-z0-9]+]]: index)
// CHECK: %[[N:.*]] = arith.minsi
// CHECK: %[[A:.*]] = arith.muli %[[N]], %[[LO]] : index
// CHECK-NEXT: %[[S:.*]] = arith.divui %[[A]], %c2 : index
// CHECK-NEXT: %[[B:.*]] = arith.muli %[[N]], %[[HI]] : index
// CHECK-NEXT: %[[E:.*]] = arith.divui %[[B]], %c2 : index
// CHECK-NEXT: scf.for %{{.*}} = %[[S]] to %[[E]] step
// CHECK-LABEL: func.func @schedule(
// CHECK: call @ew(%arg2, %arg1, %arg0, %c0, %c2)
module {
  func.func private @ew(%arg0: memref<4194304xf32>, %arg1: memref<1xi64>, %arg2: memref<4194304xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 0 : index} : () -> index
    %1 = "uop.index"(%arg1, %0) : (memref<1xi64>, index) -> !uop.ptr<i64>
    %2 = "uop.load"(%1) : (!uop.ptr<i64>) -> i64
    %3 = "uop.cast"(%2) : (i64) -> index
    %4 = "uop.const"() {value = 1 : index} : () -> index
    %5 = "uop.max"(%3, %4) : (index, index) -> index
    %6 = "uop.const"() {value = 4096 : index} : () -> index
    %7 = "uop.min"(%5, %6) : (index, index) -> index
    %8 = "uop.range"(%7) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %9 = "uop.const"() {value = 1024 : index} : () -> index
    %10 = "uop.mul"(%8, %9) : (index, index) -> index
    %11 = "uop.range"(%9) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %12 = "uop.add"(%10, %11) : (index, index) -> index
    %13 = "uop.index"(%arg0, %12) : (memref<4194304xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.index"(%arg2, %12) : (memref<4194304xf32>, index) -> !uop.ptr<f32>
    %15 = "uop.load"(%14) : (!uop.ptr<f32>) -> f32
    %16 = "uop.const"() {value = 2.000000e+00 : f32} : () -> f32
    %17 = "uop.mul"(%15, %16) : (f32, f32) -> f32
    %18 = "uop.const"() {value = 1.000000e+00 : f32} : () -> f32
    %19 = "uop.add"(%17, %18) : (f32, f32) -> f32
    %20 = "uop.const"() {value = 1.44269502 : f32} : () -> f32
    %21 = "uop.mul"(%19, %20) : (f32, f32) -> f32
    %22 = "uop.exp2"(%21) : (f32) -> f32
    %23 = "uop.store"(%13, %22) : (!uop.ptr<f32>, f32) -> !uop.token
    %24 = "uop.end"(%23, %8, %11) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%24) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<4194304xf32>, %arg1: memref<1xi64>, %arg2: memref<4194304xf32>) attributes {uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @ew, slots = array<i64: 2, 1, 0>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}

