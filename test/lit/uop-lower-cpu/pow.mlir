// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

// f32 pow lowers to polynomials LLVM vectorizes, not a scalar powf call: log2|x|, its product with y and exp2 in f64
// (2^n by its exponent bits), rounded to f32 once, then C's edge values by selects
module {
  // CHECK-LABEL: func.func @pow
  // CHECK-NOT: math.powf
  // CHECK: %[[AX:.*]] = math.absf %{{.*}} : f32
  // CHECK: arith.extf %{{.*}} : f32 to f64
  // CHECK: %[[T:.*]] = arith.mulf %{{.*}}, %{{.*}} : f64
  // CHECK: math.roundeven %{{.*}} : f64
  // CHECK: arith.truncf %{{.*}} : f64 to f32
  // CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
  // CHECK: arith.cmpf uno, %{{.*}}, %{{.*}} : f32
  // CHECK-NOT: math.powf
  // CHECK: memref.store
  func.func private @pow(%arg0: memref<64xf32>, %arg1: memref<64xf32>, %arg2: memref<64xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 64 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg1, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.load"(%2) : (!uop.ptr<f32>) -> f32
    %4 = "uop.index"(%arg2, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %5 = "uop.load"(%4) : (!uop.ptr<f32>) -> f32
    %6 = "uop.pow"(%3, %5) : (f32, f32) -> f32
    %7 = "uop.index"(%arg0, %1) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %8 = "uop.store"(%7, %6) : (!uop.ptr<f32>, f32) -> !uop.token
    %9 = "uop.end"(%8, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%9) : (!uop.token) -> ()
    return
  }
}
