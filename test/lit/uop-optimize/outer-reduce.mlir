// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432}' | FileCheck %s

// Reduces over a leading axis that column_reduce leaves (integers, bools): the reduce's range becomes a serial loop
// between the chunks of the innermost loop (the threads split the chunks) and the chunk's outputs, each output
// accumulated in place (outer_reduce): the first row stored as it is, later ones combined with the stored value, whose
// load is gated by row < rows so it stays inside the row loop.
// CHECK-LABEL: func.func private @int_sum_rows
// CHECK-SAME: uop.threads = 2
// CHECK-DAG: %[[TWO:.*]] = "uop.const"() {value = 2 : index}
// CHECK-DAG: %[[JC:.*]] = "uop.range"(%[[TWO]]) {axis = {{[0-9]+}} : i64, kind = "loop"}
// CHECK-DAG: %[[ROW:.*]] = "uop.range"(%{{.*}}) {axis = {{[0-9]+}} : i64, kind = "serial"}
// CHECK-DAG: %[[FIRST:.*]] = "uop.cmpeq"(%[[ROW]], %{{.*}})
// CHECK-DAG: %[[LIVE:.*]] = "uop.cmplt"(%[[ROW]], %{{.*}})
// CHECK: %[[AT:.*]] = "uop.index"(%arg0, %{{.*}}, %[[LIVE]])
// CHECK: %[[HELD:.*]] = "uop.load"(%[[AT]])
// CHECK: %[[SUM:.*]] = "uop.add"(%[[HELD]], %{{.*}}) : (i64, i64) -> i64
// CHECK: "uop.where"(%[[FIRST]], %{{.*}}, %[[SUM]])
// CHECK-NOT: uop.reduce
// CHECK: "uop.end"(%{{.*}}, %[[JC]], %[[ROW]], %{{.*}})
// A bool any over rows: cast(max(cast(x))) reduces the bools themselves, in the bool output.
// CHECK-LABEL: func.func private @any_rows
// CHECK: "uop.max"(%{{.*}}, %{{.*}}) : (i1, i1) -> i1
// CHECK-NOT: uop.reduce
// CHECK: "uop.sink"
module {
  func.func private @int_sum_rows(%arg0: memref<4096xi64>, %arg1: memref<262144xi32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 4096 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<4096xi64>, index) -> !uop.ptr<i64>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.mul"(%4, %0) : (index, index) -> index
    %6 = "uop.add"(%5, %1) : (index, index) -> index
    %7 = "uop.index"(%arg1, %6) : (memref<262144xi32>, index) -> !uop.ptr<i32>
    %8 = "uop.load"(%7) : (!uop.ptr<i32>) -> i32
    %9 = "uop.cast"(%8) : (i32) -> i64
    %10 = "uop.reduce"(%9, %4) {op = "add"} : (i64, index) -> i64
    %11 = "uop.store"(%2, %10) : (!uop.ptr<i64>, i64) -> !uop.token
    %12 = "uop.end"(%11, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%12) : (!uop.token) -> ()
    return
  }
  func.func private @any_rows(%arg0: memref<48xi1>, %arg1: memref<3072xi1>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 48 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<48xi1>, index) -> !uop.ptr<i1>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.mul"(%4, %0) : (index, index) -> index
    %6 = "uop.add"(%5, %1) : (index, index) -> index
    %7 = "uop.index"(%arg1, %6) : (memref<3072xi1>, index) -> !uop.ptr<i1>
    %8 = "uop.load"(%7) : (!uop.ptr<i1>) -> i1
    %9 = "uop.cast"(%8) : (i1) -> ui8
    %10 = "uop.reduce"(%9, %4) {op = "max"} : (ui8, index) -> ui8
    %11 = "uop.cast"(%10) : (ui8) -> i1
    %12 = "uop.store"(%2, %11) : (!uop.ptr<i1>, i1) -> !uop.token
    %13 = "uop.end"(%12, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%13) : (!uop.token) -> ()
    return
  }
}
