// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576 l3=33554432}' | FileCheck %s

// Neighbouring loops that address only as one run as one loop. @contiguous: out[c][h][w] = x[c][h][w] + 1 over
// (4, 14, 14): every address is c*196 + h*14 + w, so the three loops become one of 784 iterations (LLVM then vectorizes
// it whole, not 56 runs of 14). @bias: out[c][h][w] = x[c][h][w] + b[c]: b's address uses c alone, so c keeps its loop
// and only h, w merge (196). @padded: out[c][h][w] = where(0 < w, x[c][h][w - 1], 0): the gate reads w alone, so w keeps
// its loop; c and h still merge (c*14 + h has c's coefficient 14 times h's).
// CHECK-LABEL: func.func private @contiguous
// CHECK: %[[N:[0-9]+]] = "uop.const"() {value = 784 : index}
// CHECK-NEXT: %[[R:[0-9]+]] = "uop.range"(%[[N]]) {axis = 0 : i64, kind = "loop"}
// CHECK-NOT: "uop.range"
// CHECK: "uop.end"(%{{[0-9]+}}, %[[R]]) : (!uop.token, index)
// CHECK-LABEL: func.func private @bias
// CHECK-DAG: "uop.const"() {value = 4 : index}
// CHECK-DAG: "uop.const"() {value = 196 : index}
// CHECK: "uop.end"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (!uop.token, index, index)
// @folded: out[c][w] = x[(c*14 + w) // 14 + c*13 + w] over (4, 14): the division folds first (affine_simplify, by w's
// bounds: c), the address is then 14c + w like the output's, and the loops merge into one of 56 reading x[r].
// CHECK-LABEL: func.func private @folded
// CHECK: %[[N:[0-9]+]] = "uop.const"() {value = 56 : index}
// CHECK-NEXT: %[[R:[0-9]+]] = "uop.range"(%[[N]])
// CHECK-NOT: uop.idiv
// CHECK: "uop.index"(%arg1, %[[R]])
// CHECK: "uop.end"(%{{[0-9]+}}, %[[R]]) : (!uop.token, index)
// CHECK-LABEL: func.func private @padded
// CHECK-DAG: "uop.const"() {value = 56 : index}
// CHECK-DAG: "uop.const"() {value = 14 : index}
// CHECK: "uop.end"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (!uop.token, index, index)
// @pool: out[c] = sum over (h, w) of x[c][h][w] (a global average pool over (8, 5, 5)): the reduce's two ranges address
// as one (h*5 + w) and become one of 25, summed by the one reduce.
// CHECK-LABEL: func.func private @pool
// CHECK: %[[N:[0-9]+]] = "uop.const"() {value = 25 : index}
// CHECK: %[[R:[0-9]+]] = "uop.range"(%[[N]]) {axis = 1 : i64, kind = "reduce"}
// CHECK-NOT: "uop.range"
// CHECK: "uop.reduce"(%{{[0-9]+}}, %[[R]]) {op = "add"} : (f32, index) -> f32
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
  func.func private @bias(%arg0: memref<784xf32>, %arg1: memref<784xf32>, %arg2: memref<4xf32>) attributes {uop.kernel} {
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
    %b = "uop.index"(%arg2, %c) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %bv = "uop.load"(%b) : (!uop.ptr<f32>) -> f32
    %6 = "uop.add"(%5, %bv) : (f32, f32) -> f32
    %7 = "uop.index"(%arg0, %3) : (memref<784xf32>, index) -> !uop.ptr<f32>
    %8 = "uop.store"(%7, %6) : (!uop.ptr<f32>, f32) -> !uop.token
    %9 = "uop.end"(%8, %c, %h, %w) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%9) : (!uop.token) -> ()
    return
  }
  func.func private @folded(%arg0: memref<56xf32>, %arg1: memref<56xf32>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c13 = "uop.const"() {value = 13 : index} : () -> index
    %c14 = "uop.const"() {value = 14 : index} : () -> index
    %c = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %w = "uop.range"(%c14) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %0 = "uop.mul"(%c, %c14) : (index, index) -> index
    %1 = "uop.add"(%0, %w) : (index, index) -> index
    %2 = "uop.idiv"(%1, %c14) : (index, index) -> index
    %3 = "uop.mul"(%c, %c13) : (index, index) -> index
    %4 = "uop.add"(%2, %3) : (index, index) -> index
    %5 = "uop.add"(%4, %w) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<56xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.index"(%arg0, %1) : (memref<56xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.store"(%8, %7) : (!uop.ptr<f32>, f32) -> !uop.token
    %10 = "uop.end"(%9, %c, %w) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%10) : (!uop.token) -> ()
    return
  }
  func.func private @padded(%arg0: memref<784xf32>, %arg1: memref<784xf32>) attributes {uop.kernel} {
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c14 = "uop.const"() {value = 14 : index} : () -> index
    %cm1 = "uop.const"() {value = -1 : index} : () -> index
    %c = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %h = "uop.range"(%c14) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %w = "uop.range"(%c14) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %0 = "uop.mul"(%c, %c14) : (index, index) -> index
    %1 = "uop.add"(%0, %h) : (index, index) -> index
    %2 = "uop.mul"(%1, %c14) : (index, index) -> index
    %3 = "uop.add"(%2, %w) : (index, index) -> index
    %4 = "uop.add"(%3, %cm1) : (index, index) -> index
    %g = "uop.cmplt"(%c0, %w) : (index, index) -> i1
    %5 = "uop.index"(%arg1, %4, %g) : (memref<784xf32>, index, i1) -> !uop.ptr<f32>
    %6 = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %z = "uop.const"() {value = 0.0 : f32} : () -> f32
    %7 = "uop.where"(%g, %6, %z) : (i1, f32, f32) -> f32
    %8 = "uop.index"(%arg0, %3) : (memref<784xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.store"(%8, %7) : (!uop.ptr<f32>, f32) -> !uop.token
    %10 = "uop.end"(%9, %c, %h, %w) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%10) : (!uop.token) -> ()
    return
  }
  func.func private @pool(%arg0: memref<8xf32>, %arg1: memref<200xf32>) attributes {uop.kernel} {
    %c8 = "uop.const"() {value = 8 : index} : () -> index
    %c5 = "uop.const"() {value = 5 : index} : () -> index
    %c25 = "uop.const"() {value = 25 : index} : () -> index
    %c = "uop.range"(%c8) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %o = "uop.index"(%arg0, %c) : (memref<8xf32>, index) -> !uop.ptr<f32>
    %0 = "uop.mul"(%c, %c25) : (index, index) -> index
    %h = "uop.range"(%c5) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %1 = "uop.mul"(%h, %c5) : (index, index) -> index
    %2 = "uop.add"(%0, %1) : (index, index) -> index
    %w = "uop.range"(%c5) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %3 = "uop.add"(%2, %w) : (index, index) -> index
    %4 = "uop.index"(%arg1, %3) : (memref<200xf32>, index) -> !uop.ptr<f32>
    %5 = "uop.load"(%4) : (!uop.ptr<f32>) -> f32
    %6 = "uop.reduce"(%5, %h, %w) {op = "add"} : (f32, index, index) -> f32
    %7 = "uop.store"(%o, %6) : (!uop.ptr<f32>, f32) -> !uop.token
    %8 = "uop.end"(%7, %c) : (!uop.token, index) -> !uop.token
    "uop.sink"(%8) : (!uop.token) -> ()
    return
  }
}
