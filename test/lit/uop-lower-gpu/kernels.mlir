// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefixes=PTX,SM90
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefixes=PTX,SM80

// Row sums of a 64x1024 matrix (few outputs, long reduction: GROUP, one block per row; a thread reads 4 neighbours
// per step, base + 0..3: one 16-byte load) and a broadcast add + sqrt
// (UPCAST: four neighbouring elements per thread, their addresses base + 0..3, so 16-byte loads and stores).
// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @kernels
// CHECK-LABEL: gpu.func @r_64_1024_k0(%arg0: memref<64xf32> {llvm.align = 16 : i64}, %arg1: memref<65536xf32> {llvm.align = 16 : i64, llvm.noalias, llvm.readonly})
// CHECK-SAME: workgroup(%arg2 : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[ROW:.*]] = arith.muli %[[BID]], %{{.*}} : index
// CHECK: %[[PART:.*]] = scf.for %[[J:.*]] = %[[TID]] to %c256 step %c256 iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32)
// CHECK: %[[J4:.*]] = arith.muli %[[J]], %c4 : index
// CHECK: %[[AT:.*]] = arith.addi %[[ROW]], %[[J4]] : index
// CHECK: memref.load %arg1[%[[AT]]]
// CHECK: %[[AT3:.*]] = arith.addi %[[AT]], %c3 : index
// CHECK: memref.load %arg1[%[[AT3]]]
// CHECK: arith.addf %[[ACC]],
// CHECK-COUNT-3: arith.addf
// CHECK: gpu.shuffle xor %[[PART]], %c16_i32, %c32_i32 : f32
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-6: arith.addf
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK: %[[T0:.*]] = arith.cmpi eq, %[[TID]], %{{.*}} : index
// CHECK-NEXT: scf.if %[[T0]] {
// CHECK-NEXT: memref.store %[[SUM]], %arg0[%[[BID]]] : memref<64xf32>
// CHECK-LABEL: gpu.func @E_64_1024_k1(
// CHECK: %[[GID:.*]] = gpu.global_id x
// CHECK: %[[D:.*]] = arith.remui %[[GID]], %c256 : index
// CHECK: %[[COL:.*]] = arith.muli %[[D]], %c4 : index
// CHECK: %[[BASE:.*]] = arith.addi %{{.*}}, %[[COL]] : index
// CHECK: memref.load %arg1[%[[BASE]]]
// CHECK: llvm.call_intrinsic "llvm.sqrt.f32"
// CHECK: %[[L1:.*]] = arith.addi %[[BASE]], %c1 : index
// CHECK: memref.load %arg1[%[[L1]]]
// CHECK-COUNT-4: memref.store
// CHECK: func.func @schedule(
// CHECK: gpu.launch_func @kernels::@r_64_1024_k0 blocks in (%c64, %c1, %c1) threads in (%c256, %c1, %c1) args(%arg2 : memref<64xf32>, %arg0 : memref<65536xf32>)
// CHECK: gpu.launch_func @kernels::@E_64_1024_k1 blocks in (%c64, %c1, %c1) threads in (%c256, %c1, %c1)

// SM90: .version 8.0
// SM90: .target sm_90
// SM80: .version 7.0
// SM80: .target sm_80
// PTX-LABEL: .visible .entry r_64_1024_k0(
// PTX: .param .u64 .ptr .align 16 r_64_1024_k0_param_0,
// PTX: .maxntid 256, 1, 1
// PTX: .shared .align {{[0-9]+}} .b8 [[WG:__wg_r_64_1024_k0_[0-9]+]]
// PTX: ld.global.nc.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: st.shared.b32
// PTX: bar.sync 0;
// PTX: st.global.b32
// PTX-LABEL: .visible .entry E_64_1024_k1(
// PTX-NOT: .shared
// PTX: mov.u32 %r{{[0-9]+}}, %ctaid.x;
// PTX: ld.global.nc.v4.b32
// PTX: sqrt.rn.f32
// PTX: st.global.v4.b32
func.func @graph(%a: tensor<64x1024xf32>, %b: tensor<1024xf32>) -> (tensor<64xf32>, tensor<64x1024xf32>) {
  %m = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 1>} : (tensor<64x1024xf32>) -> tensor<64x1xf32>
  %r = "uop.reshape"(%m) : (tensor<64x1xf32>) -> tensor<64xf32>
  %b1 = "uop.reshape"(%b) : (tensor<1024xf32>) -> tensor<1x1024xf32>
  %e = "uop.expand"(%b1) : (tensor<1x1024xf32>) -> tensor<64x1024xf32>
  %s = "uop.add"(%a, %e) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %q = "uop.sqrt"(%s) : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %r, %q : tensor<64xf32>, tensor<64x1024xf32>
}
