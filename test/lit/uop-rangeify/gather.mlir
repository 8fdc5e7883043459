// RUN: morok-opt %s -p uop-rangeify | FileCheck %s

// gather reads through a data-dependent index: the index element is loaded, cast to index and used as the row of the
// source's address (no compare against every row); an index outside [0, 5) gates the load off and selects 0.
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[SRC:.*]]: memref<15xf32>, %[[IDX:.*]]: memref<6xi32>, %[[OUT:.*]]: memref<6xf32>)
// CHECK: %[[I:.*]] = "uop.load"({{.*}}) : (!uop.ptr<i32>) -> i32
// CHECK: %[[ROW:.*]] = "uop.cast"(%[[I]]) : (i32) -> index
// CHECK-DAG: "uop.cmplt"(%[[ROW]], %{{.*}})
// CHECK: %[[A:.*]] = "uop.index"(%[[SRC]], %{{.*}}, %[[GATE:.*]]) : (memref<15xf32>, index, i1) -> !uop.ptr<f32>
// CHECK: %[[V:.*]] = "uop.load"(%[[A]])
// CHECK: "uop.where"(%[[GATE]], %[[V]], %{{.*}})
// CHECK-NOT: uop.gather
func.func @gather(%a: tensor<5x3xf32>, %i: tensor<2x3xi32>) -> tensor<2x3xf32> {
  %0 = "uop.gather"(%a, %i) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
