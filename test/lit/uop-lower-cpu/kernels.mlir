// RUN: morok-opt %s -p uop-lower-cpu | FileCheck %s
// RUN: morok-opt %s -p 'uop-lower-cpu,convert-scf-to-cf,convert-math-to-llvm,expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts' | FileCheck %s --check-prefix=LLVM

// LLVM-NOT: uop.
// LLVM-NOT: scf.
// LLVM-NOT: memref.
// LLVM: llvm.func @rowsum(%arg0: !llvm.ptr, %arg1: !llvm.ptr)
// LLVM: llvm.func @schedule(
// LLVM: llvm.call @rowsum

module {
  // out[i] = sum_j a[i*5 + j] over a 3x5 input; the row offset i*5 is hoisted out of the reduce loop
  // CHECK-LABEL: func.func @rowsum(%arg0: memref<3xf32>, %arg1: memref<15xf32>)
  // CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
  // CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[I]], %{{.*}} : index
  // CHECK-NEXT: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
  // CHECK-NEXT: %[[IDX:.*]] = arith.addi %[[ROW]], %[[J]] : index
  // CHECK-NEXT: %[[V:.*]] = memref.load %arg1[%[[IDX]]] : memref<15xf32>
  // CHECK-NEXT: %[[NEW:.*]] = arith.addf %[[ACC]], %[[V]] : f32
  // CHECK-NEXT: scf.yield %[[NEW]] : f32
  // CHECK: memref.store %[[SUM]], %arg0[%[[I]]] : memref<3xf32>
  func.func private @rowsum(%arg0: memref<3xf32>, %arg1: memref<15xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 3 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 5 : index} : () -> index
    %3 = "uop.range"(%2) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %4 = "uop.mul"(%1, %2) : (index, index) -> index
    %5 = "uop.add"(%4, %3) : (index, index) -> index
    %6 = "uop.index"(%arg1, %5) : (memref<15xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.load"(%6) : (!uop.ptr<f32>) -> f32
    %8 = "uop.reduce"(%7, %3) {op = "add"} : (f32, index) -> f32
    %9 = "uop.index"(%arg0, %1) : (memref<3xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.store"(%9, %8) : (!uop.ptr<f32>, f32) -> !uop.token
    %11 = "uop.end"(%10, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%11) : (!uop.token) -> ()
    return
  }

  // out[i] = max over j of a[i*4+j] on uint8: identity 0, unsigned max, signless memrefs;
  // loops nest in axis order even though the ranges are listed the other way round
  // CHECK-LABEL: func.func @umax(%arg0: memref<6xi8>, %arg1: memref<24xi8>)
  // CHECK: %[[ID:.*]] = arith.constant 0 : i8
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[C2:.*]] step
  // CHECK: scf.for %[[K:.*]] = %{{.*}} to %[[C3:.*]] step
  // CHECK: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[ID]]) -> (i8) {
  // CHECK: %[[V:.*]] = memref.load %arg1[%{{.*}}] : memref<24xi8>
  // CHECK-NEXT: arith.maxui %[[ACC]], %[[V]] : i8
  func.func private @umax(%arg0: memref<6xui8>, %arg1: memref<24xui8>) attributes {uop.kernel} {
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %i = "uop.range"(%c2) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %j = "uop.range"(%c4) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %c12 = "uop.const"() {value = 12 : index} : () -> index
    %a = "uop.mul"(%i, %c12) : (index, index) -> index
    %b = "uop.mul"(%k, %c4) : (index, index) -> index
    %ab = "uop.add"(%a, %b) : (index, index) -> index
    %x = "uop.add"(%ab, %j) : (index, index) -> index
    %p = "uop.index"(%arg1, %x) : (memref<24xui8>, index) -> !uop.ptr<ui8>
    %v = "uop.load"(%p) : (!uop.ptr<ui8>) -> ui8
    %m = "uop.reduce"(%v, %j) {op = "max"} : (ui8, index) -> ui8
    %o1 = "uop.mul"(%i, %c3) : (index, index) -> index
    %o = "uop.add"(%o1, %k) : (index, index) -> index
    %q = "uop.index"(%arg0, %o) : (memref<6xui8>, index) -> !uop.ptr<ui8>
    %s = "uop.store"(%q, %m) : (!uop.ptr<ui8>, ui8) -> !uop.token
    %e = "uop.end"(%s, %k, %i) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }

  // out[i] = pad(a, 1 each side)[i]: the gate 1 <= i < 5 clamps the address and selects 0
  // CHECK-LABEL: func.func @pad(%arg0: memref<6xf32>, %arg1: memref<4xf32>)
  // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
  // CHECK: %[[G:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
  // CHECK: %[[A:.*]] = arith.select %[[G]], %{{.*}}, %{{.*}} : index
  // CHECK-NEXT: %[[L:.*]] = memref.load %arg1[%[[A]]] : memref<4xf32>
  // CHECK-NEXT: %{{.*}} = arith.select %[[G]], %[[L]], %{{.*}} : f32
  func.func private @pad(%arg0: memref<6xf32>, %arg1: memref<4xf32>) attributes {uop.kernel} {
    %c6 = "uop.const"() {value = 6 : index} : () -> index
    %c5 = "uop.const"() {value = 5 : index} : () -> index
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c1 = "uop.const"() {value = 1 : index} : () -> index
    %i = "uop.range"(%c6) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %lo = "uop.cmplt"(%c0, %i) : (index, index) -> i1
    %hi = "uop.cmplt"(%i, %c5) : (index, index) -> i1
    %g = "uop.and"(%lo, %hi) : (i1, i1) -> i1
    %x = "uop.sub"(%i, %c1) : (index, index) -> index
    %p = "uop.index"(%arg1, %x, %g) : (memref<4xf32>, index, i1) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %q = "uop.index"(%arg0, %i) : (memref<6xf32>, index) -> !uop.ptr<f32>
    %s = "uop.store"(%q, %v) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }

  // bool buffers are bytes: a load compares with 0, a store widens
  // CHECK-LABEL: func.func @bnot(%arg0: memref<4xi8>, %arg1: memref<4xi8>)
  // CHECK: %[[B:.*]] = memref.load %arg1[%{{.*}}] : memref<4xi8>
  // CHECK-NEXT: %[[V:.*]] = arith.cmpi ne, %[[B]], %{{.*}} : i8
  // CHECK-NEXT: %[[N:.*]] = arith.xori %[[V]], %{{.*}} : i1
  // CHECK-NEXT: %[[W:.*]] = arith.extui %[[N]] : i1 to i8
  // CHECK-NEXT: memref.store %[[W]], %arg0[%{{.*}}] : memref<4xi8>
  func.func private @bnot(%arg0: memref<4xi1>, %arg1: memref<4xi1>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %i = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %p = "uop.index"(%arg1, %i) : (memref<4xi1>, index) -> !uop.ptr<i1>
    %v = "uop.load"(%p) : (!uop.ptr<i1>) -> i1
    %n = "uop.neg"(%v) : (i1) -> i1
    %q = "uop.index"(%arg0, %i) : (memref<4xi1>, index) -> !uop.ptr<i1>
    %s = "uop.store"(%q, %n) : (!uop.ptr<i1>, i1) -> !uop.token
    %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }

  // CHECK-LABEL: func.func @schedule(%arg0: memref<15xf32>, %arg1: memref<4xf32>, %arg2: memref<3xf32>, %arg3: memref<6xf32>)
  // CHECK-NEXT: call @rowsum(%arg2, %arg0) : (memref<3xf32>, memref<15xf32>) -> ()
  // CHECK-NEXT: call @pad(%arg3, %arg1) : (memref<6xf32>, memref<4xf32>) -> ()
  // CHECK-NEXT: return
  func.func @schedule(%arg0: memref<15xf32>, %arg1: memref<4xf32>, %arg2: memref<3xf32>, %arg3: memref<6xf32>)
      attributes {uop.schedule, uop.num_inputs = 2 : i64, uop.num_outputs = 2 : i64} {
    %0 = "uop.kernel"() {callee = @rowsum, slots = array<i64: 2, 0>} : () -> !uop.token
    %1 = "uop.kernel"(%0) {callee = @pad, slots = array<i64: 3, 1>} : (!uop.token) -> !uop.token
    "uop.sink"(%1) : (!uop.token) -> ()
    return
  }
}
