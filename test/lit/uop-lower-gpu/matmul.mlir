// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX

// A 100x300 @ 300x70 matmul: 7000 outputs (<= 16384) with k = 300 (>= 64) is a GROUP kernel, one block per output;
// 300 divides by 4, so a thread reads 4 neighbours of k per step (75 steps: 128 threads).
// A 7x1000 relu: 4 elements per thread (UPCAST), 1750 threads in blocks of 256 leave a partial last block, so it is
// guarded by `gid < 1750`.
// Products and sums stay separate (no contraction into fma), as on the CPU.
// CHECK-LABEL: gpu.func @r_100_70_300_k0(
// CHECK: scf.for %{{.*}} = %thread_id_x to %c75 step %c128 iter_args
// CHECK-COUNT-4: arith.mulf
// CHECK-COUNT-4: arith.addf
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-LABEL: gpu.func @E_7_1000_k1(
// CHECK: %[[GID:.*]] = gpu.global_id x
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[GID]], %c1750 : index
// CHECK: scf.if %[[IN]] {
// CHECK: arith.maximumf
// CHECK: gpu.launch_func @kernels::@r_100_70_300_k0 blocks in (%c7000, %c1, %c1) threads in (%c128, %c1, %c1)
// CHECK: gpu.launch_func @kernels::@E_7_1000_k1 blocks in (%c7, %c1, %c1) threads in (%c256, %c1, %c1)

// PTX-LABEL: .visible .entry r_100_70_300_k0(
// PTX: ld.global.nc.v4.b32
// PTX: mul.rn.f32
// PTX: bar.sync
// PTX-LABEL: .visible .entry E_7_1000_k1(
// PTX: setp.gt.u64 %p{{[0-9]+}}, %rd{{[0-9]+}}, 1749;
// PTX: max.NaN.f32
func.func @graph(%a: tensor<100x300xf32>, %b: tensor<300x70xf32>, %c: tensor<7x1000xf32>) -> (tensor<100x70xf32>, tensor<7x1000xf32>) {
  %a1 = "uop.reshape"(%a) : (tensor<100x300xf32>) -> tensor<100x1x300xf32>
  %a2 = "uop.expand"(%a1) : (tensor<100x1x300xf32>) -> tensor<100x70x300xf32>
  %bt = "uop.permute"(%b) {order = array<i64: 1, 0>} : (tensor<300x70xf32>) -> tensor<70x300xf32>
  %b1 = "uop.reshape"(%bt) : (tensor<70x300xf32>) -> tensor<1x70x300xf32>
  %b2 = "uop.expand"(%b1) : (tensor<1x70x300xf32>) -> tensor<100x70x300xf32>
  %p = "uop.mul"(%a2, %b2) : (tensor<100x70x300xf32>, tensor<100x70x300xf32>) -> tensor<100x70x300xf32>
  %s = "uop.reduce_axis"(%p) {op = "add", axes = array<i64: 2>} : (tensor<100x70x300xf32>) -> tensor<100x70x1xf32>
  %r = "uop.reshape"(%s) : (tensor<100x70x1xf32>) -> tensor<100x70xf32>
  %z = "uop.const"() {value = 0.0 : f32} : () -> tensor<7x1000xf32>
  %m = "uop.max"(%c, %z) : (tensor<7x1000xf32>, tensor<7x1000xf32>) -> tensor<7x1000xf32>
  return %r, %m : tensor<100x70xf32>, tensor<7x1000xf32>
}
