// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s

module {
  // shifts are numpy's for every amount: an amount outside [0, 32) (a negative one compares as unsigned) shifts every
  // bit out, so shl selects 0 and a signed shr shifts by 31 (the sign fill); LLVM's shift by >= 32 is poison, which
  // the select never chooses. A constant amount in range needs no guard.
  // CHECK-LABEL: func.func @shifts
  // CHECK: %[[W:.*]] = arith.constant 32 : i32
  // CHECK: %[[OK:.*]] = arith.cmpi ult, %[[B:.*]], %[[W]] : i32
  // CHECK-NEXT: %[[SH:.*]] = arith.shli %{{.*}}, %[[B]] : i32
  // CHECK-NEXT: arith.select %[[OK]], %[[SH]], %{{.*}} : i32
  // CHECK: %[[OK2:.*]] = arith.cmpi ult, %[[B2:.*]], %[[W]] : i32
  // CHECK-NEXT: %[[AMT:.*]] = arith.select %[[OK2]], %[[B2]], %c31_i32 : i32
  // CHECK-NEXT: arith.shrsi %{{.*}}, %[[AMT]] : i32
  // CHECK: scf.for
  // CHECK-NOT: arith.select
  // CHECK: arith.shli %{{.*}}, %c3_i32 : i32
  func.func private @shifts(%arg0: memref<4xi32>, %arg1: memref<4xi32>, %arg2: memref<4xi32>, %arg3: memref<4xi32>, %arg4: memref<4xi32>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %r = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %pa = "uop.index"(%arg3, %r) : (memref<4xi32>, index) -> !uop.ptr<i32>
    %a = "uop.load"(%pa) : (!uop.ptr<i32>) -> i32
    %pb = "uop.index"(%arg4, %r) : (memref<4xi32>, index) -> !uop.ptr<i32>
    %b = "uop.load"(%pb) : (!uop.ptr<i32>) -> i32
    %shl = "uop.shl"(%a, %b) : (i32, i32) -> i32
    %shr = "uop.shr"(%a, %b) : (i32, i32) -> i32
    %c3 = "uop.const"() {value = 3 : i32} : () -> i32
    %shc = "uop.shl"(%a, %c3) : (i32, i32) -> i32
    %p0 = "uop.index"(%arg0, %r) : (memref<4xi32>, index) -> !uop.ptr<i32>
    %s0 = "uop.store"(%p0, %shl) : (!uop.ptr<i32>, i32) -> !uop.token
    %p1 = "uop.index"(%arg1, %r) : (memref<4xi32>, index) -> !uop.ptr<i32>
    %s1 = "uop.store"(%p1, %shr) : (!uop.ptr<i32>, i32) -> !uop.token
    %p2 = "uop.index"(%arg2, %r) : (memref<4xi32>, index) -> !uop.ptr<i32>
    %s2 = "uop.store"(%p2, %shc) : (!uop.ptr<i32>, i32) -> !uop.token
    %e0 = "uop.end"(%s0, %r) : (!uop.token, index) -> !uop.token
    %e1 = "uop.end"(%s1, %r) : (!uop.token, index) -> !uop.token
    %e2 = "uop.end"(%s2, %r) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e0, %e1, %e2) : (!uop.token, !uop.token, !uop.token) -> ()
    return
  }

  // unsigned shr: 0 when every bit is shifted out
  // CHECK-LABEL: func.func @ushr
  // CHECK: %[[OK:.*]] = arith.cmpi ult, %[[B:.*]], %c8_i8 : i8
  // CHECK-NEXT: %[[SH:.*]] = arith.shrui %{{.*}}, %[[B]] : i8
  // CHECK-NEXT: arith.select %[[OK]], %[[SH]], %c0_i8 : i8
  func.func private @ushr(%arg0: memref<4xui8>, %arg1: memref<4xui8>, %arg2: memref<4xui8>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %r = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %pa = "uop.index"(%arg1, %r) : (memref<4xui8>, index) -> !uop.ptr<ui8>
    %a = "uop.load"(%pa) : (!uop.ptr<ui8>) -> ui8
    %pb = "uop.index"(%arg2, %r) : (memref<4xui8>, index) -> !uop.ptr<ui8>
    %b = "uop.load"(%pb) : (!uop.ptr<ui8>) -> ui8
    %shr = "uop.shr"(%a, %b) : (ui8, ui8) -> ui8
    %p0 = "uop.index"(%arg0, %r) : (memref<4xui8>, index) -> !uop.ptr<ui8>
    %s0 = "uop.store"(%p0, %shr) : (!uop.ptr<ui8>, ui8) -> !uop.token
    %e0 = "uop.end"(%s0, %r) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e0) : (!uop.token) -> ()
    return
  }
}
