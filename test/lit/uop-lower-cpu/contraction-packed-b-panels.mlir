// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=8 l2=1048576 l3=33554432 direct=0},uop-lower-cpu' | FileCheck %s

// A 3->24 channel 3x3 stride-2 convolution of a 99x99 image (K = 27 taps, 49x49 outputs), as an im2col (direct=0: not
// kernel_facts.direct_conv, which few output channels would take; contraction-direct-conv.mlir): its image pack would write
// 27 x 2401 floats from 3 x 99 x 99, so mm packs each B panel where its tiles use it. Each thread packs one panel (the
// chunk's %lo .. %lo+1) into its own buffer (%arg6 or %arg7: 27 x 16 floats, picked by the chunk index, mm's last
// argument) and its tiles read that buffer from its start; there is no pack_b phase.
// CHECK-LABEL: func.func @r_24_49_49_3_3_3_k0_pack_b(
// CHECK-SAME: %arg6: memref<432xf32>, %arg7: memref<432xf32>, %arg8: index, %arg9: index)
// CHECK: scf.for %{{.*}} = %arg8 to %arg9
// CHECK: vector.load %arg1[
// CHECK: vector.store %{{.*}}, %arg6[%{{.*}}] : memref<432xf32>, vector<8xf32>
// CHECK-LABEL: func.func @r_24_49_49_3_3_3_k0_mm(
// CHECK-SAME: %arg8: index, %arg9: index, %arg10: index)
// CHECK: %[[IS1:.*]] = arith.cmpi eq, %arg10, %{{.*}} : index
// CHECK: %[[MINE:.*]] = arith.select %[[IS1]], %arg7, %arg6 : memref<432xf32>
// CHECK: scf.for %[[JB:.*]] = %arg8 to %arg9
// CHECK: %[[NEXT:.*]] = arith.addi %[[JB]], %{{.*}} : index
// CHECK: func.call @r_24_49_49_3_3_3_k0_pack_b(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %[[MINE]], %arg7, %[[JB]], %[[NEXT]])
// CHECK: vector.load %[[MINE]][
// CHECK-NOT: memref.prefetch %[[MINE]]
// CHECK-COUNT-2: vector.fma
// CHECK-LABEL: func.func @schedule(
// CHECK-NOT: call @r_24_49_49_3_3_3_k0_pack_b(
// CHECK: call @r_24_49_49_3_3_3_k0_mm(
module {
  func.func private @r_24_49_49_3_3_3_k0(%arg0: memref<57624xf32>, %arg1: memref<29403xf32>, %arg2: memref<648xf32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 24 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 2401 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.const"() {value = 49 : index} : () -> index
    %5 = "uop.range"(%4) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %6 = "uop.mul"(%5, %4) : (index, index) -> index
    %7 = "uop.range"(%4) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %8 = "uop.add"(%6, %7) : (index, index) -> index
    %9 = "uop.add"(%3, %8) : (index, index) -> index
    %10 = "uop.index"(%arg0, %9) : (memref<57624xf32>, index) -> !uop.ptr<f32>
    %11 = "uop.const"() {value = 3 : index} : () -> index
    %12 = "uop.range"(%11) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %13 = "uop.const"() {value = 9801 : index} : () -> index
    %14 = "uop.mul"(%12, %13) : (index, index) -> index
    %15 = "uop.range"(%11) {axis = 4 : i64, kind = "reduce"} : (index) -> index
    %16 = "uop.const"() {value = 100 : index} : () -> index
    %17 = "uop.mul"(%15, %16) : (index, index) -> index
    %18 = "uop.const"() {value = 2 : index} : () -> index
    %19 = "uop.mul"(%5, %18) : (index, index) -> index
    %20 = "uop.add"(%17, %19) : (index, index) -> index
    %21 = "uop.const"() {value = 99 : index} : () -> index
    %22 = "uop.mod"(%20, %21) : (index, index) -> index
    %23 = "uop.mul"(%22, %21) : (index, index) -> index
    %24 = "uop.range"(%11) {axis = 5 : i64, kind = "reduce"} : (index) -> index
    %25 = "uop.mul"(%24, %16) : (index, index) -> index
    %26 = "uop.mul"(%7, %18) : (index, index) -> index
    %27 = "uop.add"(%25, %26) : (index, index) -> index
    %28 = "uop.mod"(%27, %21) : (index, index) -> index
    %29 = "uop.add"(%23, %28) : (index, index) -> index
    %30 = "uop.add"(%14, %29) : (index, index) -> index
    %31 = "uop.index"(%arg1, %30) : (memref<29403xf32>, index) -> !uop.ptr<f32>
    %32 = "uop.load"(%31) : (!uop.ptr<f32>) -> f32
    %33 = "uop.const"() {value = 27 : index} : () -> index
    %34 = "uop.mul"(%1, %33) : (index, index) -> index
    %35 = "uop.const"() {value = 9 : index} : () -> index
    %36 = "uop.mul"(%12, %35) : (index, index) -> index
    %37 = "uop.mul"(%15, %11) : (index, index) -> index
    %38 = "uop.add"(%37, %24) : (index, index) -> index
    %39 = "uop.add"(%36, %38) : (index, index) -> index
    %40 = "uop.add"(%34, %39) : (index, index) -> index
    %41 = "uop.index"(%arg2, %40) : (memref<648xf32>, index) -> !uop.ptr<f32>
    %42 = "uop.load"(%41) : (!uop.ptr<f32>) -> f32
    %43 = "uop.mul"(%32, %42) : (f32, f32) -> f32
    %44 = "uop.reduce"(%43, %12, %15, %24) {op = "add"} : (f32, index, index, index) -> f32
    %45 = "uop.store"(%10, %44) : (!uop.ptr<f32>, f32) -> !uop.token
    %46 = "uop.end"(%45, %1, %5, %7) : (!uop.token, index, index, index) -> !uop.token
    "uop.sink"(%46) : (!uop.token) -> ()
    return
  }
  func.func @schedule(%arg0: memref<29403xf32>, %arg1: memref<648xf32>, %arg2: memref<57624xf32>) attributes {uop.num_inputs = 2 : i64, uop.num_outputs = 1 : i64, uop.schedule} {
    %0 = "uop.kernel"() {callee = @r_24_49_49_3_3_3_k0, slots = array<i64: 2, 0, 1>} : () -> !uop.token
    "uop.sink"(%0) : (!uop.token) -> ()
    return
  }
}
