// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 3x3 convolution of 32 channels (stride 1, padding 1, bias and relu) on a 40x40 image, as Winograd: its transformed
// tiles (16 values per tile and channel, 20 rows of 20 tiles, 2.6 MB with each row's tiles padded to lanes) would leave
// a core's 1 MiB L2 and its transformed filters (64 KB), read again by each block, cost far less than the tiles' trip
// to L3 and back, so the phases run per block of tile rows (optimize.winograd_block: 5 rows a block, two per thread).
// The filters' transform is its own phase (kept per weights); one blocked phase then takes the thread's own B and C
// buffers (scratch 1, 2 for chunk 0; 3, 4 for chunk 1) and, for each of its blocks, transforms the block's tiles, runs
// its 16 products and the output transform on them (private functions, taking the block's rows).
// CHECK-LABEL: func.func @conv_wt(
// CHECK-LABEL: func.func private @conv_in(
// CHECK-SAME: %arg9: index, %arg10: index
// CHECK: scf.for %{{.*}} = %arg9 to %arg10
// CHECK-LABEL: func.func private @conv_mm(
// CHECK-LABEL: func.func private @conv_out(
// CHECK-LABEL: func.func @conv_blk(
// CHECK-SAME: %arg9: index, %arg10: index, %arg11: index
// CHECK: %[[ONE:.*]] = arith.cmpi eq, %arg11, %{{.*}} : index
// CHECK: %[[V:.*]] = arith.select %[[ONE]], %arg7, %arg5
// CHECK: %[[C:.*]] = arith.select %[[ONE]], %arg8, %arg6
// CHECK: scf.for %[[B:.*]] = %arg9 to %arg10
// CHECK: %[[R0:.*]] = arith.muli %[[B]]
// CHECK: %[[R1:.*]] = arith.minsi
// CHECK: func.call @conv_in(%arg0, %arg1, %arg2, %arg3, %arg4, %[[V]], %[[C]], %arg7, %arg8, %[[R0]], %[[R1]])
// CHECK: func.call @conv_mm(%arg0, %arg1, %arg2, %arg3, %arg4, %[[V]], %[[C]], %arg7, %arg8)
// CHECK: func.call @conv_out(%arg0, %arg1, %arg2, %arg3, %arg4, %[[V]], %[[C]], %arg7, %arg8, %[[R0]], %[[R1]])
// CHECK-LABEL: func.func @schedule(
// CHECK-COUNT-5: memref.alloc()
// CHECK: call @conv_wt(
// CHECK-NEXT: arith.constant
// CHECK: call @conv_blk(
// CHECK-NOT: call @conv_in(
module {
  func.func private @conv(%arg0: memref<51200xf32>, %arg1: memref<51200xf32>, %arg2: memref<9216xf32>, %arg3: memref<32xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 32 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 1600 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index
    %5 = "uop.const"() {value = 40 : index} : () -> index
    %6 = "uop.range"(%5) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.mul"(%6, %5) : (index, index) -> index
    %8 = "uop.add"(%4, %7) : (index, index) -> index
    %9 = "uop.range"(%5) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %10 = "uop.add"(%8, %9) : (index, index) -> index
    %11 = "uop.index"(%arg0, %10) : (memref<51200xf32>, index) -> !uop.ptr<f32>
    %12 = "uop.const"() {value = 0 : index} : () -> index
    %13 = "uop.const"() {value = 3 : index} : () -> index
    %14 = "uop.range"(%13) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %15 = "uop.add"(%6, %14) : (index, index) -> index
    %16 = "uop.cmplt"(%12, %15) : (index, index) -> i1
    %17 = "uop.const"() {value = 41 : index} : () -> index
    %18 = "uop.cmplt"(%15, %17) : (index, index) -> i1
    %19 = "uop.and"(%16, %18) : (i1, i1) -> i1
    %20 = "uop.range"(%13) {axis = 5 : i64, kind = "reduce"} : (index) -> index
    %21 = "uop.add"(%9, %20) : (index, index) -> index
    %22 = "uop.cmplt"(%12, %21) : (index, index) -> i1
    %23 = "uop.cmplt"(%21, %17) : (index, index) -> i1
    %24 = "uop.and"(%22, %23) : (i1, i1) -> i1
    %25 = "uop.and"(%19, %24) : (i1, i1) -> i1
    %27 = "uop.add"(%7, %9) : (index, index) -> index
    %28 = "uop.range"(%1) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %29 = "uop.mul"(%28, %3) : (index, index) -> index
    %30 = "uop.add"(%27, %29) : (index, index) -> index
    %31 = "uop.mul"(%14, %5) : (index, index) -> index
    %32 = "uop.add"(%30, %31) : (index, index) -> index
    %33 = "uop.add"(%32, %20) : (index, index) -> index
    %34 = "uop.const"() {value = -41 : index} : () -> index
    %35 = "uop.add"(%33, %34) : (index, index) -> index
    %36 = "uop.index"(%arg1, %35, %25) : (memref<51200xf32>, index, i1) -> !uop.ptr<f32>
    %37 = "uop.load"(%36) : (!uop.ptr<f32>) -> f32
    %38 = "uop.const"() {value = 0.0 : f32} : () -> f32
    %39 = "uop.where"(%25, %37, %38) : (i1, f32, f32) -> f32
    %41 = "uop.const"() {value = 288 : index} : () -> index
    %42 = "uop.mul"(%2, %41) : (index, index) -> index
    %43 = "uop.const"() {value = 9 : index} : () -> index
    %44 = "uop.mul"(%28, %43) : (index, index) -> index
    %45 = "uop.add"(%42, %44) : (index, index) -> index
    %46 = "uop.mul"(%14, %13) : (index, index) -> index
    %47 = "uop.add"(%45, %46) : (index, index) -> index
    %48 = "uop.add"(%47, %20) : (index, index) -> index
    %49 = "uop.index"(%arg2, %48) : (memref<9216xf32>, index) -> !uop.ptr<f32>
    %50 = "uop.load"(%49) : (!uop.ptr<f32>) -> f32
    %51 = "uop.mul"(%39, %50) : (f32, f32) -> f32
    %52 = "uop.reduce"(%51, %28, %14, %20) {op = "add"} : (f32, index, index, index) -> f32
    %54 = "uop.index"(%arg3, %2) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %55 = "uop.load"(%54) : (!uop.ptr<f32>) -> f32
    %56 = "uop.add"(%52, %55) : (f32, f32) -> f32
    %57 = "uop.cmplt"(%56, %38) : (f32, f32) -> i1
    %58 = "uop.cmpeq"(%56, %38) : (f32, f32) -> i1
    %59 = "uop.or"(%57, %58) : (i1, i1) -> i1
    %60 = "uop.where"(%59, %38, %56) : (i1, f32, f32) -> f32
    %61 = "uop.store"(%11, %60) : (!uop.ptr<f32>, f32) -> !uop.token
    %62 = "uop.end"(%61, %2, %6, %9) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%62) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<51200xf32>, %arg1: memref<9216xf32>, %arg2: memref<32xf32>, %arg3: memref<51200xf32>) attributes {uop.num_inputs = 3 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @conv, slots = array<i64: 3, 0, 1, 2>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
