// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

// cos(x) reaches the lowering as sin(f32(pi/2) - x): that f32 subtraction (and pi/2's rounding) would lose all
// precision near cos's zeros, so it lowers to libm's cos of x itself. sin(x + 1): the shift and the sine in f64.
// CHECK-LABEL: func.func @cos
// CHECK-NOT: math.sin
// CHECK: math.cos %{{.*}} : f32
// CHECK-NOT: math.sin
// CHECK-LABEL: func.func @shifted
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[A:.*]] = arith.addf %{{.*}}, %[[X]] : f64
// CHECK: %[[S:.*]] = math.sin %[[A]] : f64
// CHECK: arith.truncf %[[S]] : f64 to f32
module {
  func.func private @cos(%arg0: memref<64xf32>, %arg1: memref<64xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 64 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %c = "uop.const"() {value = 1.5707963705062866 : f32} : () -> f32
    %4 = "uop.sub"(%c, %3) : (f32, f32) -> f32
    %5 = "uop.sin"(%4) : (f32) -> f32
    %6 = "uop.index"(%arg0, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    %8 = "uop.end"(%7, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%8) : (!uop.token) -> ()
    return
  }
  func.func private @shifted(%arg0: memref<64xf32>, %arg1: memref<64xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 64 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %c = "uop.const"() {value = 1.0 : f32} : () -> f32
    %4 = "uop.add"(%3, %c) : (f32, f32) -> f32
    %5 = "uop.sin"(%4) : (f32) -> f32
    %6 = "uop.index"(%arg0, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.store"(%6, %5) : (!uop.ptr<f32>, f32) -> !uop.token
    %8 = "uop.end"(%7, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%8) : (!uop.token) -> ()
    return
  }
}
