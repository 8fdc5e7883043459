// RUN: morok-opt %s -p uop-rangeify | FileCheck %s

// scatter: the target is stored into the output first; an `after` names the output once that store is done, and the
// updates read-modify-write it in place at a data-dependent row, gated (an index outside [0, 5) writes nothing).
// The indexed axis is a serial loop: two updates meet in one element only along it.
// CHECK-LABEL: func.func @scatter
// CHECK-SAME: (%[[A:.*]]: memref<15xf32>, %[[IDX:.*]]: memref<6xi32>, %[[V:.*]]: memref<6xf32>, %[[OUT:.*]]: memref<15xf32>)
// CHECK: %[[COPY:.*]] = "uop.end"
// CHECK: %[[DONE:.*]] = "uop.after"(%[[OUT]], %[[COPY]]) : (memref<15xf32>, !uop.token) -> memref<15xf32>
// CHECK: %[[J:.*]] = "uop.range"(%{{.*}}) {axis = 2 : i64, kind = "serial"}
// CHECK: %[[K:.*]] = "uop.range"(%{{.*}}) {axis = 3 : i64, kind = "loop"}
// CHECK: %[[I:.*]] = "uop.load"({{.*}}) : (!uop.ptr<i32>) -> i32
// CHECK: %[[ROW:.*]] = "uop.cast"(%[[I]]) : (i32) -> index
// CHECK: %[[AT:.*]] = "uop.index"(%[[DONE]], %{{.*}}, %[[GATE:.*]]) : (memref<15xf32>, index, i1) -> !uop.ptr<f32>
// CHECK: %[[OLD:.*]] = "uop.load"(%[[AT]])
// CHECK: %[[NEW:.*]] = "uop.add"(%[[OLD]], %{{.*}}) : (f32, f32) -> f32
// CHECK: %[[ST:.*]] = "uop.store"(%[[AT]], %[[NEW]])
// CHECK: %[[E:.*]] = "uop.end"(%[[ST]], %[[J]], %[[K]])
// CHECK: "uop.sink"(%[[E]])
// CHECK-NOT: uop.scatter
func.func @scatter(%a: tensor<5x3xf32>, %i: tensor<2x3xi32>, %v: tensor<2x3xf32>) -> tensor<5x3xf32> {
  %0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// A scatter that another op reads is materialised in a buffer of its own (bufferize, then after), then loaded.
// CHECK-LABEL: func.func @scatter_used
// CHECK: %[[B:.*]] = "uop.bufferize"
// CHECK: %[[T:.*]] = "uop.after"(%[[B]], %{{.*}}) : (memref<15xf32>, !uop.token) -> memref<15xf32>
// CHECK: "uop.index"(%[[T]], %{{.*}}) : (memref<15xf32>, index) -> !uop.ptr<f32>
func.func @scatter_used(%a: tensor<5x3xf32>, %i: tensor<2x3xi32>, %v: tensor<2x3xf32>) -> tensor<5x3xf32> {
  %0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "store"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %1 = "uop.mul"(%0, %0) : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %1 : tensor<5x3xf32>
}
