// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefix=PTX

// Symbolic sizes: n in [1, 64] and k in [1, 32] are read from the int64 buffer of the values (k first, then n: sorted by
// name), clamped to [min, max]. Each launch is sized for the largest values; a thread (a block, in GROUP kernels) whose
// position is past the values read at run time does nothing, and reduce loops run to the values.
// exp2 of n x 64 rows: 4 columns per thread, 64 * 64 / 4 = 1024 threads launched, those below n * 16 at work.
// CHECK-LABEL: gpu.func @E_n_64_k0(
// CHECK-SAME: %[[VALS:[a-z0-9]+]]: memref<2xi64>
// CHECK: %[[GID:.*]] = gpu.global_id x
// CHECK: %[[V:.*]] = memref.load %[[VALS]][%c1] : memref<2xi64>
// CHECK: %[[I:.*]] = arith.index_cast %[[V]] : i64 to index
// CHECK: %[[LO:.*]] = arith.maxsi %[[I]], %c1 : index
// CHECK: %[[N:.*]] = arith.minsi %[[LO]], %c64 : index
// CHECK: %[[COUNT:.*]] = arith.muli %[[N]], %c16 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[GID]], %[[COUNT]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: math.exp2
// CHECK-COUNT-4: memref.store

// Row sums of the n x n corner: GROUP, one block per row for 64 rows; blocks past n skip, a block's threads stride to n.
// CHECK-LABEL: gpu.func @r_n_n_k1(
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[N1:.*]] = arith.minsi %{{.*}}, %c64 : index
// CHECK: %[[ROW:.*]] = arith.cmpi ult, %[[BID]], %[[N1]] : index
// CHECK: scf.if %[[ROW]] {
// CHECK: scf.for %{{.*}} = %[[TID]] to %[[N1]] step %c64 iter_args
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier

// A 32x32 product over a depth k: one thread per 4 outputs, its k loop to the value of k (slot 0 of the values).
// CHECK-LABEL: gpu.func @r_32_32_n_k2(
// CHECK: %[[KV:.*]] = memref.load %{{.*}}[%c0] : memref<2xi64>
// CHECK: %[[KI:.*]] = arith.index_cast %[[KV]] : i64 to index
// CHECK: %[[KLO:.*]] = arith.maxsi %[[KI]], %c1 : index
// CHECK: %[[K:.*]] = arith.minsi %[[KLO]], %c32 : index
// CHECK: scf.for %{{.*}} = %c0 to %[[K]] step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32)

// The launches, for the largest values: the values' buffer is an argument like any other.
// CHECK-LABEL: func.func @schedule(
// CHECK-SAME: %[[VB:arg[0-9]+]]: memref<2xi64>
// CHECK: gpu.launch_func @kernels::@E_n_64_k0 blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1) args({{.*}}%[[VB]] : memref<2xi64>
// CHECK: gpu.launch_func @kernels::@r_n_n_k1 blocks in (%c64, %c1, %c1) threads in (%c64, %c1, %c1)
// CHECK: gpu.launch_func @kernels::@r_32_32_n_k2 blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)

// The PTX reads the value with an 8-byte global load, clamps it, and guards with a compare and a branch past the body.
// PTX-LABEL: .visible .entry E_n_64_k0(
// PTX: ld.global.nc.b64 %rd[[V:[0-9]+]], [%rd{{[0-9]+}}+8];
// PTX: max.s64 %rd[[L:[0-9]+]], %rd[[V]], 1;
// PTX: min.s64 %rd{{[0-9]+}}, %rd[[L]], 64;
// PTX: setp.ge.u64 %p[[P:[0-9]+]],
// PTX: @%p[[P]] bra
// PTX: ld.global.nc.v4.b32
// PTX: st.global.v4.b32
// PTX-LABEL: .visible .entry r_n_n_k1(
// PTX: ld.global.nc.b64
// PTX: bar.sync
// PTX-LABEL: .visible .entry r_32_32_n_k2(
// PTX: ld.global.b64
func.func @graph(%a: tensor<64x64xf32>, %b: tensor<32x32xf32>, %c: tensor<32x32xf32>) -> (tensor<?x64xf32>, tensor<?xf32>, tensor<32x32xf32>) {
  %n = "uop.define_var"() {name = "n", min = 1 : i64, max = 64 : i64} : () -> index
  %k = "uop.define_var"() {name = "k", min = 1 : i64, max = 32 : i64} : () -> index
  %rows = "uop.shrink"(%a, %n) {bounds = array<i64: 0, -9223372036854775808, 0, 64>} : (tensor<64x64xf32>, index) -> tensor<?x64xf32>
  %e = "uop.exp2"(%rows) : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %sq = "uop.shrink"(%a, %n, %n) {bounds = array<i64: 0, -9223372036854775808, 0, -9223372036854775808>} : (tensor<64x64xf32>, index, index) -> tensor<?x?xf32>
  %s = "uop.reduce_axis"(%sq) {op = "add", axes = array<i64: 1>} : (tensor<?x?xf32>) -> tensor<?x1xf32>
  %s1 = "uop.reshape"(%s, %n) : (tensor<?x1xf32>, index) -> tensor<?xf32>
  %bk = "uop.shrink"(%b, %k) {bounds = array<i64: 0, 32, 0, -9223372036854775808>} : (tensor<32x32xf32>, index) -> tensor<32x?xf32>
  %b1 = "uop.reshape"(%bk, %k) : (tensor<32x?xf32>, index) -> tensor<32x1x?xf32>
  %b2 = "uop.expand"(%b1, %k) : (tensor<32x1x?xf32>, index) -> tensor<32x32x?xf32>
  %ck = "uop.shrink"(%c, %k) {bounds = array<i64: 0, -9223372036854775808, 0, 32>} : (tensor<32x32xf32>, index) -> tensor<?x32xf32>
  %ct = "uop.permute"(%ck) {order = array<i64: 1, 0>} : (tensor<?x32xf32>) -> tensor<32x?xf32>
  %c1 = "uop.reshape"(%ct, %k) : (tensor<32x?xf32>, index) -> tensor<1x32x?xf32>
  %c2 = "uop.expand"(%c1, %k) : (tensor<1x32x?xf32>, index) -> tensor<32x32x?xf32>
  %p = "uop.mul"(%b2, %c2) : (tensor<32x32x?xf32>, tensor<32x32x?xf32>) -> tensor<32x32x?xf32>
  %r = "uop.reduce_axis"(%p) {op = "add", axes = array<i64: 2>} : (tensor<32x32x?xf32>) -> tensor<32x32x1xf32>
  %m = "uop.reshape"(%r) : (tensor<32x32x1xf32>) -> tensor<32x32xf32>
  return %e, %s1, %m : tensor<?x64xf32>, tensor<?xf32>, tensor<32x32xf32>
}
