// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_80 | FileCheck %s --check-prefix=PTX
// RUN: morok-opt %s -p 'uop-rangeify,uop-kernel-split,uop-lower-gpu' | %python -m morok_mlir.device.ptx --ptxas --chip sm_90 | FileCheck %s --check-prefix=PTX

// A relu over 16384x8192 elements: 2^25 groups of 4 would be 131072 blocks of 256, past GRID_MAX (65536), so the
// launch is 65536 blocks whose threads loop from their global id to 2^25 by the launch's 2^24 threads (grid stride),
// each step one 16-byte load and store.
// CHECK-LABEL: gpu.func @E_16384_8192_k0(
// CHECK: %[[GID:.*]] = gpu.global_id x
// CHECK-NOT: arith.cmpi ult
// CHECK: scf.for %[[I:.*]] = %[[GID]] to %c33554432 step %c16777216 {
// CHECK: %[[COL:.*]] = arith.remui %[[I]], %c2048 : index
// CHECK: arith.muli %[[COL]], %c4 : index
// CHECK-COUNT-4: arith.maximumf
// CHECK: gpu.launch_func @kernels::@E_16384_8192_k0 blocks in (%c65536, %c1, %c1) threads in (%c256, %c1, %c1)

// PTX-LABEL: .visible .entry E_16384_8192_k0(
// PTX: ld.global.nc.v4.b32
// PTX: st.global.v4.b32
// PTX: add.s64 %rd{{[0-9]+}}, %rd{{[0-9]+}}, 16777216;
// PTX: @%p{{[0-9]+}} bra
func.func @graph(%c: tensor<16384x8192xf32>) -> tensor<16384x8192xf32> {
  %z = "uop.const"() {value = 0.0 : f32} : () -> tensor<16384x8192xf32>
  %m = "uop.max"(%c, %z) : (tensor<16384x8192xf32>, tensor<16384x8192xf32>) -> tensor<16384x8192xf32>
  return %m : tensor<16384x8192xf32>
}
