// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16},uop-lower-cpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8},uop-lower-cpu' | FileCheck %s --check-prefix=AVX2

// A softmax of 4 static rows of 100 (uop.row_lanes): the row's max, its sum of exps and the stored values run along the
// row as vector lanes, whole steps of 4 vectors unmasked, then the groups past them, the last one's lanes past 100
// masked off; no scalar code runs along the row (LLVM would unroll it whole). Rows of 1000 (16 vectors or more) keep the
// exps in the output (uop.keep) and scale them there: one exp per element.
// CHECK-LABEL: func.func @softmax100(
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1 iter_args(%{{.*}}) -> (vector<16xf32>) {
// CHECK-COUNT-4: vector.load %arg1[{{.*}}] : memref<400xf32>, vector<16xf32>
// CHECK: vector.maskedload %arg1[
// CHECK: math.roundeven %{{.*}} : vector<16xf32>
// CHECK: vector.store %{{.*}}, %arg0[{{.*}}] : memref<400xf32>, vector<16xf32>
// CHECK: vector.maskedstore %arg0[
// CHECK-NOT: memref.store
// CHECK: return
// CHECK-LABEL: func.func @softmax1000(
// CHECK: memref.store %[[E:.*]], %arg0[%{{.*}}] : memref<4000xf32>
// CHECK-NEXT: arith.addf %{{.*}}, %[[E]] fastmath<reassoc,contract>
// AVX2-LABEL: func.func @softmax100(
// AVX2: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%{{.*}}) -> (vector<8xf32>) {
// AVX2-COUNT-4: vector.load %arg1[{{.*}}] : memref<400xf32>, vector<8xf32>
// AVX2: vector.maskedload %arg1[
// AVX2: vector.maskedstore %arg0[
// AVX2-NOT: memref.store
// AVX2: return
module {
  func.func private @softmax100(%arg0: memref<400xf32>, %arg1: memref<400xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 100 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<400xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<400xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %12 = "uop.add"(%4, %11) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<400xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.reduce"(%14, %11) {op = "max"} : (f32, index) -> f32
    %16 = "uop.sub"(%10, %15) : (f32, f32) -> f32
    %17 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %18 = "uop.mul"(%16, %17) : (f32, f32) -> f32
    %19 = "uop.exp2"(%18) : (f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<400xf32>, index) -> !uop.ptr<f32>
    %23 = "uop.load"(%22) : (!uop.ptr<f32>) -> f32
    %24 = "uop.sub"(%23, %15) : (f32, f32) -> f32
    %25 = "uop.mul"(%24, %17) : (f32, f32) -> f32
    %26 = "uop.exp2"(%25) : (f32) -> f32
    %27 = "uop.reduce"(%26, %20) {op = "add"} : (f32, index) -> f32
    %28 = "uop.fdiv"(%19, %27) : (f32, f32) -> f32
    %29 = "uop.store"(%7, %28) : (!uop.ptr<f32>, f32) -> !uop.token
    %30 = "uop.end"(%29, %2, %5) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%30) : (!uop.token) -> ()
    return
  }
  func.func private @softmax1000(%arg0: memref<4000xf32>, %arg1: memref<4000xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 1000 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<4000xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<4000xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %12 = "uop.add"(%4, %11) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<4000xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.reduce"(%14, %11) {op = "max"} : (f32, index) -> f32
    %16 = "uop.sub"(%10, %15) : (f32, f32) -> f32
    %17 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %18 = "uop.mul"(%16, %17) : (f32, f32) -> f32
    %19 = "uop.exp2"(%18) : (f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<4000xf32>, index) -> !uop.ptr<f32>
    %23 = "uop.load"(%22) : (!uop.ptr<f32>) -> f32
    %24 = "uop.sub"(%23, %15) : (f32, f32) -> f32
    %25 = "uop.mul"(%24, %17) : (f32, f32) -> f32
    %26 = "uop.exp2"(%25) : (f32) -> f32
    %27 = "uop.reduce"(%26, %20) {op = "add"} : (f32, index) -> f32
    %28 = "uop.fdiv"(%19, %27) : (f32, f32) -> f32
    %29 = "uop.store"(%7, %28) : (!uop.ptr<f32>, f32) -> !uop.token
    %30 = "uop.end"(%29, %2, %5) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%30) : (!uop.token) -> ()
    return
  }
}
