// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

module {
  // bf16 is a storage type (lower_cpu.COMPUTE): loads and stores stay bf16, the add runs in f32 between a widening
  // (the bits shifted into an f32's top half) and a narrowing that rounds to nearest even in integer ops, a NaN
  // becoming a quiet NaN; the max reduce accumulates in f32 and narrows once, after its loop.
  // CHECK-LABEL: func.func @add
  // CHECK: %[[A:.*]] = memref.load %arg1[%{{.*}}] : memref<4xbf16>
  // CHECK: %[[AI:.*]] = arith.bitcast %[[A]] : bf16 to i16
  // CHECK: %[[AW:.*]] = arith.extui %[[AI]] : i16 to i32
  // CHECK: %[[AS:.*]] = arith.shli %[[AW]], %c16_i32 : i32
  // CHECK: %[[AF:.*]] = arith.bitcast %[[AS]] : i32 to f32
  // CHECK: %[[S:.*]] = arith.addf %[[AF]], %{{.*}} : f32
  // CHECK: %[[SB:.*]] = arith.bitcast %[[S]] : f32 to i32
  // CHECK: arith.addi %{{.*}}, %c32767_i32 : i32
  // CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[S]], %[[S]] : f32
  // CHECK: %[[R:.*]] = arith.select %[[NAN]], %{{.*}}, %{{.*}} : i32
  // CHECK: %[[T:.*]] = arith.trunci %[[R]] : i32 to i16
  // CHECK: %[[O:.*]] = arith.bitcast %[[T]] : i16 to bf16
  // CHECK: memref.store %[[O]], %arg0[%{{.*}}] : memref<4xbf16>
  func.func private @add(%arg0: memref<4xbf16>, %arg1: memref<4xbf16>, %arg2: memref<4xbf16>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %r = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %pa = "uop.index"(%arg1, %r) : (memref<4xbf16>, index) -> !uop.ptr<bf16>
    %a = "uop.load"(%pa) : (!uop.ptr<bf16>) -> bf16
    %pb = "uop.index"(%arg2, %r) : (memref<4xbf16>, index) -> !uop.ptr<bf16>
    %b = "uop.load"(%pb) : (!uop.ptr<bf16>) -> bf16
    %s = "uop.add"(%a, %b) : (bf16, bf16) -> bf16
    %p0 = "uop.index"(%arg0, %r) : (memref<4xbf16>, index) -> !uop.ptr<bf16>
    %s0 = "uop.store"(%p0, %s) : (!uop.ptr<bf16>, bf16) -> !uop.token
    %e0 = "uop.end"(%s0, %r) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e0) : (!uop.token) -> ()
    return
  }

  // CHECK-LABEL: func.func @rmax
  // CHECK: %[[INIT:.*]] = arith.constant 0xFF800000 : f32
  // CHECK: %[[ACC:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[INIT]]) -> (f32)
  // CHECK: arith.maximumf %{{.*}} : f32
  // CHECK: scf.yield %{{.*}} : f32
  // CHECK: arith.bitcast %[[ACC]] : f32 to i32
  // CHECK: arith.bitcast %{{.*}} : i16 to bf16
  // CHECK: memref.store %{{.*}} : memref<1xbf16>
  func.func private @rmax(%arg0: memref<1xbf16>, %arg1: memref<8xbf16>) attributes {uop.kernel} {
    %c8 = "uop.const"() {value = 8 : index} : () -> index
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %r = "uop.range"(%c8) {axis = 0 : i64, kind = "reduce"} : (index) -> index
    %pa = "uop.index"(%arg1, %r) : (memref<8xbf16>, index) -> !uop.ptr<bf16>
    %a = "uop.load"(%pa) : (!uop.ptr<bf16>) -> bf16
    %m = "uop.reduce"(%a, %r) {op = "max"} : (bf16, index) -> bf16
    %p0 = "uop.index"(%arg0, %c0) : (memref<1xbf16>, index) -> !uop.ptr<bf16>
    %s0 = "uop.store"(%p0, %m) : (!uop.ptr<bf16>, bf16) -> !uop.token
    "uop.sink"(%s0) : (!uop.token) -> ()
    return
  }
}
