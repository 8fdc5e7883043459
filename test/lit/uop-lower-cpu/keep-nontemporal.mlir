// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

// uop.keep with uop.nontemporal (set by hand): the output goes out in 8-lane nontemporal vector stores, so the kept
// exps wait in a scratch row, stored one by one in the sum's loop (plain stores: the lanes are the output's only)
// CHECK-LABEL: func.func @softmax_nt(
// CHECK: %[[K:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
// CHECK: math.roundeven
// CHECK: memref.store %{{.*}}, %[[K]][%{{.*}}] : memref<16xf32>
// CHECK-NOT: math.roundeven
// CHECK: memref.load %[[K]]
// CHECK: vector.store %{{.*}}, %arg0[%{{.*}}] {alignment = 32 : i64, nontemporal = true} : memref<64xf32>, vector<8xf32>
// CHECK-NOT: math.roundeven
// CHECK: return
module {
  func.func private @softmax_nt(%arg0: memref<64xf32>, %arg1: memref<64xf32>) attributes {uop.kernel, uop.fastmath, uop.keep = array<i64: 3>, uop.nontemporal = 8 : i64} {
    %1 = "uop.const"() {value = 4 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 16 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.add"(%4, %5) : (index, index) -> index
    %7 = "uop.index"(%arg0, %6) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %9 = "uop.index"(%arg1, %6) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.load"(%9) : (!uop.ptr<f32>) -> f32
    %11 = "uop.range"(%3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %12 = "uop.add"(%4, %11) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.reduce"(%14, %11) {op = "max"} : (f32, index) -> f32
    %16 = "uop.sub"(%10, %15) : (f32, f32) -> f32
    %17 = "uop.const"() {value = 1.4426950216293335 : f32} : () -> f32
    %18 = "uop.mul"(%16, %17) : (f32, f32) -> f32
    %19 = "uop.exp2"(%18) : (f32) -> f32
    %20 = "uop.range"(%3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%4, %20) : (index, index) -> index
    %22 = "uop.index"(%arg1, %21) : (memref<64xf32>, index) -> !uop.ptr<f32>
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
