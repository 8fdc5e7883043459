// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefix=PTX
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX

// A row softmax (base 2) of 8x16384 is ONE kernel (ROW): a block per row computes the row's max once (4 neighbours
// per step: 16-byte loads; combined by shuffles in each warp, then the 8 warps' values through shared memory after a
// barrier), then the row's sum of exp2(x - max) the same way (4 neighbours a step too), then its threads stride over
// the row writing it, 4 neighbours a step (16-byte loads and stores; the row's max and sum are computed once, ahead of
// that loop). A thread's share of a row this long (64 values) exceeds its registers (ROW_REGS): each pass reads the
// row again (rows_registers.mlir: a shorter row, read once).
// CHECK-LABEL: gpu.func @r_8_16384_16384_16384_k0(
// CHECK-SAME: %arg1: memref<131072xf32> {llvm.align = 16 : i64, llvm.noalias, llvm.readonly}
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[ROW:.*]] = arith.muli %[[BID]], %c16384 : index
// CHECK: %[[PMAX:.*]] = scf.for %{{.*}} = %[[TID]] to %c4096 step %c256 iter_args
// CHECK-COUNT-4: memref.load %arg1
// CHECK-COUNT-4: arith.maximumf
// CHECK: gpu.shuffle xor %[[PMAX]], %c16_i32, %c32_i32 : f32
// CHECK-COUNT-4: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-6: arith.maximumf
// CHECK: %[[MAX:.*]] = arith.maximumf
// CHECK: %[[PSUM:.*]] = scf.for %{{.*}} = %[[TID]] to %c4096 step %c256 iter_args
// CHECK-COUNT-4: arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK-COUNT-4: arith.addf
// CHECK-NEXT: scf.yield
// CHECK: gpu.shuffle xor %[[PSUM]], %c16_i32, %c32_i32 : f32
// CHECK: memref.store %{{.*}}, %arg3[%{{.*}}] : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-6: arith.addf
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK: scf.for %[[J:.*]] = %[[TID]] to %c4096 step %c256 {
// CHECK: %[[J4:.*]] = arith.muli %[[J]], %c4 : index
// CHECK: %[[AT:.*]] = arith.addi %[[ROW]], %[[J4]] : index
// CHECK: arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK-COUNT-4: arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK: memref.store %{{.*}}, %arg0[%[[AT]]]
// CHECK-COUNT-3: memref.store
// CHECK-NOT: scf.for
// CHECK: gpu.return
// CHECK: gpu.launch_func @kernels::@r_8_16384_16384_16384_k0 blocks in (%c8, %c1, %c1) threads in (%c256, %c1, %c1)

// PTX-LABEL: .visible .entry r_8_16384_16384_16384_k0(
// PTX: .shared
// PTX: ld.global.nc.v4.b32
// PTX: max.NaN.f32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: ex2.approx
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: ld.global.nc.v4.b32
// PTX: div.rn.f32
// PTX: st.global.v4.b32
func.func @graph(%a: tensor<8x16384xf32>) -> tensor<8x16384xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 1>} : (tensor<8x16384xf32>) -> tensor<8x1xf32>
  %me = "uop.expand"(%m) : (tensor<8x1xf32>) -> tensor<8x16384xf32>
  %d = "uop.sub"(%a, %me) : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<8x16384xf32>
  %e = "uop.exp2"(%d) : (tensor<8x16384xf32>) -> tensor<8x16384xf32>
  %s = "uop.reduce_axis"(%e) {op = "add", axes = array<i64: 1>} : (tensor<8x16384xf32>) -> tensor<8x1xf32>
  %se = "uop.expand"(%s) : (tensor<8x1xf32>) -> tensor<8x16384xf32>
  %r = "uop.fdiv"(%e, %se) : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<8x16384xf32>
  return %r : tensor<8x16384xf32>
}
