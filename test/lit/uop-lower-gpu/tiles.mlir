// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu{chip=sm_80}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu{chip=sm_80 tf32=1}' | FileCheck %s --check-prefix=TF32
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu{chip=sm_75}' | FileCheck %s --check-prefix=SM75
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu{chip=sm_80}' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefixes=PTX,PTX-FFMA
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu{chip=sm_80 tf32=1}' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefixes=PTX,PTX-TF32

// A 130x200 @ 200x72 matmul of f16 (f32 accumulation, f16 result) on sm_80: a tiled contraction (codegen.gpu_tiles).
// The block's slices of A (k-contiguous: [rows][k]) and B (n-contiguous: [k][n]) are staged in workgroup memory, two
// stages (each flat: row * padded row + column), by 16-byte cp.asyncs (zero-filled past 130 rows, 72 columns and 200 of k); each k loop step first sends the
// next stage's copies, waits for this one (wait_group 1; 0 at the last step), then a barrier, the warps' mma.syncs on
// fragments read from shared memory by ldmatrix (B's transposed), and a barrier before the stage is refilled. The epilogue stores each accumulator
// as f16 where it lies inside the 130x72 output.
// CHECK-LABEL: gpu.func @r_130_72_200_k0(
// CHECK-SAME: workgroup(%[[SA:arg[0-9]+]] : memref<2x768xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SB:arg[0-9]+]] : memref<2x640xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK: nvgpu.device_async_copy %arg1[%{{.*}}], %[[SA]][%c0, %{{.*}}], 8, %{{.*}} : memref<26000xf16> to memref<2x768xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %arg2[%{{.*}}], %[[SB]][%c0, %{{.*}}], 8, %{{.*}} : memref<14400xf16> to memref<2x640xf16, #gpu.address_space<workgroup>>
// CHECK: %[[G0:.*]] = nvgpu.device_async_create_group
// CHECK: scf.for %{{.*}} = %c0_i32 to %c13_i32 step %c1_i32 iter_args
// CHECK: nvgpu.device_async_copy
// CHECK: %[[G:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[G]] {numGroups = 1 : i32}
// CHECK-NEXT: } else {
// CHECK-NEXT: nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix %[[SA]][{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<2x768xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: nvgpu.ldmatrix %[[SB]][{{.*}}] {numTiles = 2 : i32, transpose = true} : memref<2x640xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK: arith.cmpi ult, %{{.*}}, %c130 : index
// CHECK: arith.cmpi ult, %{{.*}}, %c72 : index
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %{{.*}}, %arg0[%{{.*}}] : memref<9360xf16>
// f32 operands take tensor cores only where tf32 is allowed; without, the same tiles multiply by fma.rn.f32
// CHECK-LABEL: gpu.func @r_64_64_64_k1(
// CHECK-SAME: workgroup(
// CHECK-NOT: nvvm.mma.sync
// CHECK: math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.launch_func @kernels::@r_130_72_200_k0 blocks in (%c15, %c1, %c1) threads in (%c32, %c1, %c1)

// TF32-LABEL: gpu.func @r_64_64_64_k1(
// TF32: workgroup(
// TF32: nvgpu.device_async_copy %{{.*}}, 4, %{{.*}} : memref<4096xf32> to memref<2x
// TF32: nvvm.convert.float.to.tf32 %{{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// TF32: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>} : (i32, i32, f32)

// SM75-NOT: nvvm.mma.sync
// SM75-NOT: nvgpu.device_async_copy

// PTX-LABEL: .visible .entry r_130_72_200_k0(
// PTX: .shared .align 16 .b8
// PTX-DAG: cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX-DAG: cp.async.commit_group;
// PTX-DAG: cp.async.wait_group 1;
// PTX-DAG: bar.sync 0;
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX-FFMA-LABEL: .visible .entry r_64_64_64_k1(
// PTX-FFMA: fma.rn.f32
// PTX-TF32-LABEL: .visible .entry r_64_64_64_k1(
// PTX-TF32: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
func.func @graph(%a: tensor<130x200xf16>, %b: tensor<200x72xf16>, %x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<130x72xf16>, tensor<64x64xf32>) {
  %0 = "uop.reshape"(%a) : (tensor<130x200xf16>) -> tensor<130x1x200xf16>
  %1 = "uop.cast"(%0) : (tensor<130x1x200xf16>) -> tensor<130x1x200xf32>
  %2 = "uop.expand"(%1) : (tensor<130x1x200xf32>) -> tensor<130x72x200xf32>
  %3 = "uop.reshape"(%b) : (tensor<200x72xf16>) -> tensor<1x200x72xf16>
  %4 = "uop.permute"(%3) {order = array<i64: 0, 2, 1>} : (tensor<1x200x72xf16>) -> tensor<1x72x200xf16>
  %5 = "uop.cast"(%4) : (tensor<1x72x200xf16>) -> tensor<1x72x200xf32>
  %6 = "uop.expand"(%5) : (tensor<1x72x200xf32>) -> tensor<130x72x200xf32>
  %7 = "uop.mul"(%2, %6) : (tensor<130x72x200xf32>, tensor<130x72x200xf32>) -> tensor<130x72x200xf32>
  %8 = "uop.reduce_axis"(%7) {axes = array<i64: 2>, op = "add"} : (tensor<130x72x200xf32>) -> tensor<130x72x1xf32>
  %9 = "uop.reshape"(%8) : (tensor<130x72x1xf32>) -> tensor<130x72xf32>
  %10 = "uop.cast"(%9) : (tensor<130x72xf32>) -> tensor<130x72xf16>
  %x1 = "uop.reshape"(%x) : (tensor<64x64xf32>) -> tensor<64x1x64xf32>
  %x2 = "uop.expand"(%x1) : (tensor<64x1x64xf32>) -> tensor<64x64x64xf32>
  %y1 = "uop.permute"(%y) {order = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %y2 = "uop.reshape"(%y1) : (tensor<64x64xf32>) -> tensor<1x64x64xf32>
  %y3 = "uop.expand"(%y2) : (tensor<1x64x64xf32>) -> tensor<64x64x64xf32>
  %p = "uop.mul"(%x2, %y3) : (tensor<64x64x64xf32>, tensor<64x64x64xf32>) -> tensor<64x64x64xf32>
  %s = "uop.reduce_axis"(%p) {axes = array<i64: 2>, op = "add"} : (tensor<64x64x64xf32>) -> tensor<64x64x1xf32>
  %r = "uop.reshape"(%s) : (tensor<64x64x1xf32>) -> tensor<64x64xf32>
  return %10, %r : tensor<130x72xf16>, tensor<64x64xf32>
}
