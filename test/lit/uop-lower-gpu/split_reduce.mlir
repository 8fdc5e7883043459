// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefix=PTX
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX

// The max of each of 4 rows of 2^18: 4 GROUP blocks would leave the chip idle, so the kernel runs as two (codegen.gpu_split).
// The first: a block per (row, chunk) of 4096 elements, 64 chunks a row, each block's max into partials[row * 64 + chunk];
// the second: a block per row over its 64 partials, thread 0 stores. The host allocates the partials on the GPU for the
// call and frees them after the launches.
// CHECK-LABEL: gpu.func @r_4_262144_k0_0(
// CHECK-SAME: %arg2: memref<256xf32>
// CHECK: gpu.block_id x
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] : memref<256xf32>
// CHECK-LABEL: gpu.func @r_4_262144_k0_1(
// CHECK-SAME: %arg2: memref<256xf32> {llvm.align = 16 : i64, llvm.noalias, llvm.readonly}
// CHECK: memref.store %{{.*}}, %arg0[%block_id_x] : memref<4xf32>
// CHECK: func.func @schedule(%arg0: memref<1048576xf32>, %arg1: memref<4xf32>)
// CHECK: %[[P:.*]] = gpu.alloc () : memref<256xf32>
// CHECK: gpu.launch_func @kernels::@r_4_262144_k0_0 blocks in (%c256, %c1, %c1) threads in (%c256, %c1, %c1) args(%arg1 : memref<4xf32>, %arg0 : memref<1048576xf32>, %[[P]] : memref<256xf32>)
// CHECK: gpu.launch_func @kernels::@r_4_262144_k0_1 blocks in (%c4, %c1, %c1) {{.*}} args(%arg1 : memref<4xf32>, %arg0 : memref<1048576xf32>, %[[P]] : memref<256xf32>)
// CHECK: gpu.dealloc %[[P]] : memref<256xf32>

// PTX-LABEL: .visible .entry r_4_262144_k0_0(
// PTX: ld.global.nc.v4.b32
// PTX: bar.sync
// PTX-LABEL: .visible .entry r_4_262144_k0_1(
// PTX: shfl.sync.bfly.b32
// PTX: max.NaN.f32
func.func @graph(%a: tensor<4x262144xf32>) -> tensor<4x1xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 1>} : (tensor<4x262144xf32>) -> tensor<4x1xf32>
  return %m : tensor<4x1xf32>
}
