// RUN: morok-opt %s --split-input-file -p uop-elide-copies | FileCheck %s

// x (16 channels, an input), c1 = cat(x, conv1(x)), c2 = cat(c1, conv2(c1)), out = conv3(c2): uop-kernel-split stored
// c2 (%arg5) part by part: x padded over all of it (E_48: a copy of an input, kept), conv1's output (%arg6, a buffer
// of its own: conv2 reads it too) copied into channels 16..31 (E_16), conv2's output computed into channels 32..47.
// The copy is dropped: %arg6 becomes a view of %arg5 at element 256 (uop.views), so conv1 writes c2 itself; E_48's
// zero fill of that run comes before conv1's write, as it came before the copy. conv2 waits for what the copy did.
// CHECK-LABEL: module {
// CHECK-NOT: func.func private @E_16_4_4_k2
// CHECK: func.func @schedule(
// CHECK-SAME: uop.views = array<i64: 6, 5, 256>
// CHECK: %[[X:.*]] = "uop.kernel"() {callee = @E_48_4_4_k0, slots = array<i64: 5, 0>}
// CHECK-NEXT: %[[C1:.*]] = "uop.kernel"() {callee = @r_16_4_4_16_k1, slots = array<i64: 6, 0, 1>}
// CHECK-NEXT: "uop.kernel"(%[[X]], %[[C1]]) {callee = @r_16_4_4_32_k3, slots = array<i64: 5, 6, 0, 2>}
module {
  func.func private @E_48_4_4_k0(%arg0: memref<768xf32>, %arg1: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 48 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 16 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.cmplt"(%1, %2) : (index, index) -> i1
    %12 = "uop.mul"(%1, %2) : (index, index) -> index
    %13 = "uop.mul"(%5, %4) : (index, index) -> index
    %14 = "uop.add"(%13, %7) : (index, index) -> index
    %15 = "uop.add"(%12, %14) : (index, index) -> index
    %16 = "uop.index"(%arg1, %15, %11) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %17 = "uop.load"(%16) : (!uop.ptr<f32>) -> f32
    %18 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %19 = "uop.where"(%11, %17, %18) : (i1, f32, f32) -> f32
    %20 = "uop.store"(%10, %19) : (!uop.ptr<f32>, f32) -> !uop.token
    %21 = "uop.end"(%20, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%21) : (!uop.token) -> ()
    return
  }
  func.func private @r_16_4_4_16_k1(%arg0: memref<256xf32>, %arg1: memref<256xf32>, %arg2: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.mul"(%1, %0) : (index, index) -> index
    %3 = "uop.const"() {value = 4 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %5 = "uop.mul"(%4, %3) : (index, index) -> index
    %6 = "uop.range"(%3) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.add"(%5, %6) : (index, index) -> index
    %8 = "uop.add"(%2, %7) : (index, index) -> index
    %9 = "uop.index"(%arg0, %8) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.range"(%0) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %11 = "uop.mul"(%10, %0) : (index, index) -> index
    %12 = "uop.mul"(%4, %3) : (index, index) -> index
    %13 = "uop.add"(%12, %6) : (index, index) -> index
    %14 = "uop.add"(%11, %13) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %0) : (index, index) -> index
    %18 = "uop.add"(%17, %10) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.mul"(%16, %20) : (f32, f32) -> f32
    %22 = "uop.reduce"(%21, %10) {op = "add"} : (f32, index) -> f32
    %23 = "uop.store"(%9, %22) : (!uop.ptr<f32>, f32) -> !uop.token
    %24 = "uop.end"(%23, %1, %4, %6) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%24) : (!uop.token) -> ()
    return
  }
  func.func private @E_16_4_4_k2(%arg0: memref<768xf32>, %arg1: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.add"(%1, %0) : (index, index) -> index
    %3 = "uop.mul"(%2, %0) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.mul"(%1, %0) : (index, index) -> index
    %12 = "uop.add"(%11, %8) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.store"(%10, %14) : (!uop.ptr<f32>, f32) -> !uop.token
    %16 = "uop.end"(%15, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%16) : (!uop.token) -> ()
    return
  }
  func.func private @r_16_4_4_32_k3(%arg0: memref<768xf32>, %arg1: memref<256xf32>, %arg2: memref<256xf32>, %arg3: memref<512xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 32 : index} : () -> index
    %3 = "uop.add"(%1, %2) : (index, index) -> index
    %4 = "uop.mul"(%3, %0) : (index, index) -> index
    %5 = "uop.const"() {value = 4 : index} : () -> index
    %6 = "uop.range"(%5) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.mul"(%6, %5) : (index, index) -> index
    %8 = "uop.range"(%5) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %9 = "uop.add"(%7, %8) : (index, index) -> index
    %10 = "uop.add"(%4, %9) : (index, index) -> index
    %11 = "uop.index"(%arg0, %10) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %12 = "uop.const"() {value = 15 : index} : () -> index
    %13 = "uop.range"(%2) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %14 = "uop.cmplt"(%12, %13) : (index, index) -> i1
    %15 = "uop.const"() {value = -16 : index} : () -> index
    %16 = "uop.add"(%13, %15) : (index, index) -> index
    %17 = "uop.mul"(%16, %0) : (index, index) -> index
    %18 = "uop.add"(%17, %9) : (index, index) -> index
    %19 = "uop.index"(%arg1, %18, %14) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %22 = "uop.where"(%14, %20, %21) : (i1, f32, f32) -> f32
    %23 = "uop.cmplt"(%13, %0) : (index, index) -> i1
    %24 = "uop.mul"(%13, %0) : (index, index) -> index
    %25 = "uop.add"(%24, %9) : (index, index) -> index
    %26 = "uop.index"(%arg2, %25, %23) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %27 = "uop.load"(%26) : (!uop.ptr<f32>) -> f32
    %28 = "uop.where"(%23, %27, %21) : (i1, f32, f32) -> f32
    %29 = "uop.where"(%14, %22, %28) : (i1, f32, f32) -> f32
    %30 = "uop.mul"(%1, %2) : (index, index) -> index
    %31 = "uop.add"(%30, %13) : (index, index) -> index
    %32 = "uop.index"(%arg3, %31) : (memref<512xf32>, index) -> !uop.ptr<f32>
    %33 = "uop.load"(%32) : (!uop.ptr<f32>) -> f32
    %34 = "uop.mul"(%29, %33) : (f32, f32) -> f32
    %35 = "uop.reduce"(%34, %13) {op = "add"} : (f32, index) -> f32
    %36 = "uop.store"(%11, %35) : (!uop.ptr<f32>, f32) -> !uop.token
    %37 = "uop.end"(%36, %1, %6, %8) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%37) : (!uop.token) -> ()
    return
  }
  func.func private @r_8_4_4_48_k4(%arg0: memref<128xf32>, %arg1: memref<768xf32>, %arg2: memref<384xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 8 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 16 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<128xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 48 : index} : () -> index
    %12 = "uop.range"(%11) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.mul"(%12, %2) : (index, index) -> index
    %14 = "uop.add"(%13, %8) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %11) : (index, index) -> index
    %18 = "uop.add"(%17, %12) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<384xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.mul"(%16, %20) : (f32, f32) -> f32
    %22 = "uop.reduce"(%21, %12) {op = "add"} : (f32, index) -> f32
    %23 = "uop.store"(%10, %22) : (!uop.ptr<f32>, f32) -> !uop.token
    %24 = "uop.end"(%23, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%24) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<256xf32>, %arg1: memref<256xf32>, %arg2: memref<512xf32>, %arg3: memref<384xf32>, %arg4: memref<128xf32>, %arg5: memref<768xf32>, %arg6: memref<256xf32>) attributes {uop.num_inputs = 4 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @E_48_4_4_k0, slots = array<i64: 5, 0>} : () -> !uop.token
    %1 = "uop.kernel"() {callee = @r_16_4_4_16_k1, slots = array<i64: 6, 0, 1>} : () -> !uop.token
    %2 = "uop.kernel"(%0, %1) {callee = @E_16_4_4_k2, slots = array<i64: 5, 6>} : (!uop.token, !uop.token) -> !uop.token
    %3 = "uop.kernel"(%2, %1) {callee = @r_16_4_4_32_k3, slots = array<i64: 5, 6, 0, 2>} : (!uop.token, !uop.token) -> !uop.token
    %4 = "uop.kernel"(%3) {callee = @r_8_4_4_48_k4, slots = array<i64: 4, 5, 3>} : (!uop.token) -> !uop.token
    "uop.sink"(%0, %1, %2, %3, %4) : (!uop.token, !uop.token, !uop.token, !uop.token, !uop.token) -> ()
    return
  }
}


// -----

// The same, but the kernel after the copy also writes channels 16..31 of c2 (its store moved onto the copied run):
// conv1's output there is overwritten later, so it cannot be computed there: the copy stays.
// CHECK-LABEL: module {
// CHECK: func.func private @E_16_4_4_k2
// CHECK: func.func @schedule(
// CHECK-NOT: uop.views
// CHECK: callee = @E_16_4_4_k2
module {
  func.func private @E_48_4_4_k0(%arg0: memref<768xf32>, %arg1: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 48 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 16 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.cmplt"(%1, %2) : (index, index) -> i1
    %12 = "uop.mul"(%1, %2) : (index, index) -> index
    %13 = "uop.mul"(%5, %4) : (index, index) -> index
    %14 = "uop.add"(%13, %7) : (index, index) -> index
    %15 = "uop.add"(%12, %14) : (index, index) -> index
    %16 = "uop.index"(%arg1, %15, %11) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %17 = "uop.load"(%16) : (!uop.ptr<f32>) -> f32
    %18 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %19 = "uop.where"(%11, %17, %18) : (i1, f32, f32) -> f32
    %20 = "uop.store"(%10, %19) : (!uop.ptr<f32>, f32) -> !uop.token
    %21 = "uop.end"(%20, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%21) : (!uop.token) -> ()
    return
  }
  func.func private @r_16_4_4_16_k1(%arg0: memref<256xf32>, %arg1: memref<256xf32>, %arg2: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.mul"(%1, %0) : (index, index) -> index
    %3 = "uop.const"() {value = 4 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %5 = "uop.mul"(%4, %3) : (index, index) -> index
    %6 = "uop.range"(%3) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.add"(%5, %6) : (index, index) -> index
    %8 = "uop.add"(%2, %7) : (index, index) -> index
    %9 = "uop.index"(%arg0, %8) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %10 = "uop.range"(%0) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %11 = "uop.mul"(%10, %0) : (index, index) -> index
    %12 = "uop.mul"(%4, %3) : (index, index) -> index
    %13 = "uop.add"(%12, %6) : (index, index) -> index
    %14 = "uop.add"(%11, %13) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %0) : (index, index) -> index
    %18 = "uop.add"(%17, %10) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.mul"(%16, %20) : (f32, f32) -> f32
    %22 = "uop.reduce"(%21, %10) {op = "add"} : (f32, index) -> f32
    %23 = "uop.store"(%9, %22) : (!uop.ptr<f32>, f32) -> !uop.token
    %24 = "uop.end"(%23, %1, %4, %6) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%24) : (!uop.token) -> ()
    return
  }
  func.func private @E_16_4_4_k2(%arg0: memref<768xf32>, %arg1: memref<256xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.add"(%1, %0) : (index, index) -> index
    %3 = "uop.mul"(%2, %0) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.mul"(%1, %0) : (index, index) -> index
    %12 = "uop.add"(%11, %8) : (index, index) -> index
    %13 = "uop.index"(%arg1, %12) : (memref<256xf32>, index) -> !uop.ptr<f32>
    %14 = "uop.load"(%13) : (!uop.ptr<f32>) -> f32
    %15 = "uop.store"(%10, %14) : (!uop.ptr<f32>, f32) -> !uop.token
    %16 = "uop.end"(%15, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%16) : (!uop.token) -> ()
    return
  }
  func.func private @r_16_4_4_32_k3(%arg0: memref<768xf32>, %arg1: memref<256xf32>, %arg2: memref<256xf32>, %arg3: memref<512xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 32 : index} : () -> index
    %3 = "uop.add"(%1, %0) : (index, index) -> index
    %4 = "uop.mul"(%3, %0) : (index, index) -> index
    %5 = "uop.const"() {value = 4 : index} : () -> index
    %6 = "uop.range"(%5) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.mul"(%6, %5) : (index, index) -> index
    %8 = "uop.range"(%5) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %9 = "uop.add"(%7, %8) : (index, index) -> index
    %10 = "uop.add"(%4, %9) : (index, index) -> index
    %11 = "uop.index"(%arg0, %10) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %12 = "uop.const"() {value = 15 : index} : () -> index
    %13 = "uop.range"(%2) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %14 = "uop.cmplt"(%12, %13) : (index, index) -> i1
    %15 = "uop.const"() {value = -16 : index} : () -> index
    %16 = "uop.add"(%13, %15) : (index, index) -> index
    %17 = "uop.mul"(%16, %0) : (index, index) -> index
    %18 = "uop.add"(%17, %9) : (index, index) -> index
    %19 = "uop.index"(%arg1, %18, %14) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.const"() {value = 0.000000e+00 : f32} : () -> f32
    %22 = "uop.where"(%14, %20, %21) : (i1, f32, f32) -> f32
    %23 = "uop.cmplt"(%13, %0) : (index, index) -> i1
    %24 = "uop.mul"(%13, %0) : (index, index) -> index
    %25 = "uop.add"(%24, %9) : (index, index) -> index
    %26 = "uop.index"(%arg2, %25, %23) : (memref<256xf32>, index, i1) -> !uop.ptr<f32>
    %27 = "uop.load"(%26) : (!uop.ptr<f32>) -> f32
    %28 = "uop.where"(%23, %27, %21) : (i1, f32, f32) -> f32
    %29 = "uop.where"(%14, %22, %28) : (i1, f32, f32) -> f32
    %30 = "uop.mul"(%1, %2) : (index, index) -> index
    %31 = "uop.add"(%30, %13) : (index, index) -> index
    %32 = "uop.index"(%arg3, %31) : (memref<512xf32>, index) -> !uop.ptr<f32>
    %33 = "uop.load"(%32) : (!uop.ptr<f32>) -> f32
    %34 = "uop.mul"(%29, %33) : (f32, f32) -> f32
    %35 = "uop.reduce"(%34, %13) {op = "add"} : (f32, index) -> f32
    %36 = "uop.store"(%11, %35) : (!uop.ptr<f32>, f32) -> !uop.token
    %37 = "uop.end"(%36, %1, %6, %8) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%37) : (!uop.token) -> ()
    return
  }
  func.func private @r_8_4_4_48_k4(%arg0: memref<128xf32>, %arg1: memref<768xf32>, %arg2: memref<384xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 8 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 16 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 4 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<128xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 48 : index} : () -> index
    %12 = "uop.range"(%11) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.mul"(%12, %2) : (index, index) -> index
    %14 = "uop.add"(%13, %8) : (index, index) -> index
    %15 = "uop.index"(%arg1, %14) : (memref<768xf32>, index) -> !uop.ptr<f32>
    %16 = "uop.load"(%15) : (!uop.ptr<f32>) -> f32
    %17 = "uop.mul"(%1, %11) : (index, index) -> index
    %18 = "uop.add"(%17, %12) : (index, index) -> index
    %19 = "uop.index"(%arg2, %18) : (memref<384xf32>, index) -> !uop.ptr<f32>
    %20 = "uop.load"(%19) : (!uop.ptr<f32>) -> f32
    %21 = "uop.mul"(%16, %20) : (f32, f32) -> f32
    %22 = "uop.reduce"(%21, %12) {op = "add"} : (f32, index) -> f32
    %23 = "uop.store"(%10, %22) : (!uop.ptr<f32>, f32) -> !uop.token
    %24 = "uop.end"(%23, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%24) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<256xf32>, %arg1: memref<256xf32>, %arg2: memref<512xf32>, %arg3: memref<384xf32>, %arg4: memref<128xf32>, %arg5: memref<768xf32>, %arg6: memref<256xf32>) attributes {uop.num_inputs = 4 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @E_48_4_4_k0, slots = array<i64: 5, 0>} : () -> !uop.token
    %1 = "uop.kernel"() {callee = @r_16_4_4_16_k1, slots = array<i64: 6, 0, 1>} : () -> !uop.token
    %2 = "uop.kernel"(%0, %1) {callee = @E_16_4_4_k2, slots = array<i64: 5, 6>} : (!uop.token, !uop.token) -> !uop.token
    %3 = "uop.kernel"(%2, %1) {callee = @r_16_4_4_32_k3, slots = array<i64: 5, 6, 0, 2>} : (!uop.token, !uop.token) -> !uop.token
    %4 = "uop.kernel"(%3) {callee = @r_8_4_4_48_k4, slots = array<i64: 4, 5, 3>} : (!uop.token) -> !uop.token
    "uop.sink"(%0, %1, %2, %3, %4) : (!uop.token, !uop.token, !uop.token, !uop.token, !uop.token) -> ()
    return
  }
}

