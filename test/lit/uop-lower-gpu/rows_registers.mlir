// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefix=PTX
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX

// A row softmax (base 2) of 16x2048 is ONE kernel (ROW, a block of 256 threads per row) whose row a thread holds in
// registers: 2 steps of 4 neighbours each (elements 4 * tid + 0..3 and 1024 + 4 * tid + 0..3), loaded once, with no
// loop (16-byte loads). The row's max folds those registers, then its sum of exp2(x - max) computes from the same
// registers, then the outputs too: the input is read nowhere else (rows.mlir: a row too long to hold, read per pass).
// CHECK-LABEL: gpu.func @r_16_2048_2048_2048_k0(
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK-NOT: scf.for
// CHECK: %[[T4:.*]] = arith.muli %[[TID]], %c4 : index
// CHECK: %[[ROW:.*]] = arith.muli %[[BID]], %c2048 : index
// CHECK: %[[AT:.*]] = arith.addi %[[ROW]], %[[T4]] : index
// CHECK: %[[X0:.*]] = memref.load %arg1[%[[AT]]]
// CHECK: %[[X1:.*]] = memref.load %arg1
// CHECK: %[[X2:.*]] = memref.load %arg1
// CHECK: %[[X3:.*]] = memref.load %arg1
// CHECK: %[[AT4:.*]] = arith.addi %[[AT]], %c1024 : index
// CHECK: %[[X4:.*]] = memref.load %arg1[%[[AT4]]]
// CHECK: %[[X5:.*]] = memref.load %arg1
// CHECK: %[[X6:.*]] = memref.load %arg1
// CHECK: %[[X7:.*]] = memref.load %arg1
// CHECK-NEXT: arith.maximumf %[[X0]], %[[X1]] : f32
// CHECK-NEXT: arith.maximumf %[[X2]], %[[X3]] : f32
// CHECK-NEXT: arith.maximumf %[[X4]], %[[X5]] : f32
// CHECK-NEXT: arith.maximumf %[[X6]], %[[X7]] : f32
// CHECK-COUNT-2: arith.maximumf
// CHECK-NEXT: %[[PMAX:.*]] = arith.maximumf
// CHECK-NEXT: gpu.shuffle xor %[[PMAX]], %c16_i32, %c32_i32 : f32
// CHECK: gpu.barrier
// CHECK-COUNT-6: arith.maximumf
// CHECK: %[[MAX:.*]] = arith.maximumf
// CHECK-NOT: memref.load %arg1
// CHECK: arith.subf %[[X0]], %[[MAX]] : f32
// CHECK-NOT: memref.load %arg1
// CHECK: arith.subf %[[X7]], %[[MAX]] : f32
// CHECK-NOT: memref.load %arg1
// CHECK: gpu.barrier
// CHECK-COUNT-6: arith.addf
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK-NOT: memref.load %arg1
// CHECK: arith.subf %[[X0]], %[[MAX]] : f32
// CHECK-NOT: memref.load %arg1
// CHECK: arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NOT: memref.load %arg1
// CHECK: memref.store %{{.*}}, %arg0[%[[AT]]]
// CHECK-COUNT-3: memref.store %{{.*}}, %arg0
// CHECK-NOT: memref.load %arg1
// CHECK: arith.subf %[[X4]], %[[MAX]] : f32
// CHECK-NOT: memref.load %arg1
// CHECK: memref.store %{{.*}}, %arg0[%[[AT4]]]
// CHECK-COUNT-3: memref.store %{{.*}}, %arg0
// CHECK-NOT: scf.for
// CHECK-NOT: memref.load %arg1
// CHECK: gpu.return
// CHECK: gpu.launch_func @kernels::@r_16_2048_2048_2048_k0 blocks in (%c16, %c1, %c1) threads in (%c256, %c1, %c1)

// PTX-LABEL: .visible .entry r_16_2048_2048_2048_k0(
// PTX: ld.global.nc.v4.b32 {{.*}}, [%[[P:rd[0-9]+]]];
// PTX-NEXT: ld.global.nc.v4.b32 {{.*}}, [%[[P]]+4096];
// PTX-NOT: ld.global
// PTX: max.NaN.f32
// PTX: bar.sync 0;
// PTX-NOT: ld.global
// PTX: ex2.approx
// PTX-NOT: ld.global
// PTX: bar.sync 0;
// PTX-NOT: ld.global
// PTX: div.rn.f32
// PTX-NOT: ld.global
// PTX: st.global.v4.b32
// PTX-NOT: ld.global
// PTX: st.global.v4.b32
// PTX-NOT: ld.global
// PTX: ret;
func.func @graph(%a: tensor<16x2048xf32>) -> tensor<16x2048xf32> {
  %m = "uop.reduce_axis"(%a) {op = "max", axes = array<i64: 1>} : (tensor<16x2048xf32>) -> tensor<16x1xf32>
  %me = "uop.expand"(%m) : (tensor<16x1xf32>) -> tensor<16x2048xf32>
  %d = "uop.sub"(%a, %me) : (tensor<16x2048xf32>, tensor<16x2048xf32>) -> tensor<16x2048xf32>
  %e = "uop.exp2"(%d) : (tensor<16x2048xf32>) -> tensor<16x2048xf32>
  %s = "uop.reduce_axis"(%e) {op = "add", axes = array<i64: 1>} : (tensor<16x2048xf32>) -> tensor<16x1xf32>
  %se = "uop.expand"(%s) : (tensor<16x1xf32>) -> tensor<16x2048xf32>
  %r = "uop.fdiv"(%e, %se) : (tensor<16x2048xf32>, tensor<16x2048xf32>) -> tensor<16x2048xf32>
  return %r : tensor<16x2048xf32>
}
