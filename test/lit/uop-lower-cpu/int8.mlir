// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 int8=vnni512}' | FileCheck %s --check-prefix=OPT
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 int8=none}' | FileCheck %s --check-prefix=NONE
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 int8=vnni512},uop-lower-cpu' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 int8=pmaddwd256},uop-lower-cpu' | FileCheck %s --check-prefix=AVX2

// (uint8 A @ int8 B) in int32, then * 0.5 in float: a contraction of 8-bit values (uop.int8 = MR, NR, VW lanes, KW values
// per lane). With VNNI: B packed once into NR-wide panels of 4-byte words, A (row-major, K a multiple of 4) read in place
// as words broadcast to every lane, an MR x NR/VW tile of vpdpbusd accumulators (u8 operand first); the epilogue reads
// the tile's int32 sums (kept as f32 bits) and scales them, called by the micro-kernel (one thread runs both). Without VNNI (the AVX2 kind): both operands packed as i16
// pairs, vpmaddwd then an add.
module {
  // OPT-LABEL: func.func private @r_16_256_128_k0
  // OPT-SAME: uop.int8 = array<i64: 8, 32, 16, 4>
  // NONE-LABEL: func.func private @r_16_256_128_k0
  // NONE-NOT: uop.int8
  // CHECK-NOT: _pack_a
  // CHECK-LABEL: func.func @r_16_256_128_k0_pack_b(
  // CHECK: arith.shli
  // CHECK: arith.bitcast %{{.*}} : i32 to f32
  // CHECK-LABEL: func.func @r_16_256_128_k0_mm(
  // CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xi32>,
  // CHECK: vector.load %arg4[%{{.*}}] : memref<8192xf32>, vector<16xf32>
  // CHECK: vector.bitcast %{{.*}} : vector<16xf32> to vector<64xi8>
  // CHECK: %[[W:.*]] = vector.load %arg1[%{{.*}}] : memref<2048xi8>, vector<4xi8>
  // CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
  // CHECK: vector.store %{{.*}}, %arg5[%{{.*}}] : memref<4096xf32>, vector<16xf32>
  // CHECK: call @r_16_256_128_k0_epi(
  // CHECK-LABEL: func.func private @r_16_256_128_k0_epi(
  // CHECK: arith.bitcast %{{.*}} : f32 to i32
  // CHECK: arith.sitofp
  // AVX2-LABEL: func.func @r_16_256_128_k0_pack_a(
  // AVX2-LABEL: func.func @r_16_256_128_k0_mm(
  // AVX2: %[[P:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%{{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
  // AVX2: arith.addi %{{.*}}, %[[P]] : vector<8xi32>
  func.func private @r_16_256_128_k0(%arg0: memref<4096xf32>, %arg1: memref<2048xui8>, %arg2: memref<32768xi8>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 16 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.const"() {value = 256 : index} : () -> index
    %3 = "uop.mul"(%1, %2) : (index, index) -> index
    %4 = "uop.range"(%2) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %5 = "uop.add"(%3, %4) : (index, index) -> index
    %6 = "uop.index"(%arg0, %5) : (memref<4096xf32>, index) -> !uop.ptr<f32>
    %7 = "uop.const"() {value = 128 : index} : () -> index
    %8 = "uop.mul"(%1, %7) : (index, index) -> index
    %9 = "uop.range"(%7) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %10 = "uop.add"(%8, %9) : (index, index) -> index
    %11 = "uop.index"(%arg1, %10) : (memref<2048xui8>, index) -> !uop.ptr<ui8>
    %12 = "uop.load"(%11) : (!uop.ptr<ui8>) -> ui8
    %13 = "uop.cast"(%12) : (ui8) -> i32
    %14 = "uop.mul"(%9, %2) : (index, index) -> index
    %15 = "uop.add"(%14, %4) : (index, index) -> index
    %16 = "uop.index"(%arg2, %15) : (memref<32768xi8>, index) -> !uop.ptr<i8>
    %17 = "uop.load"(%16) : (!uop.ptr<i8>) -> i8
    %18 = "uop.cast"(%17) : (i8) -> i32
    %19 = "uop.mul"(%13, %18) : (i32, i32) -> i32
    %20 = "uop.reduce"(%19, %9) {op = "add"} : (i32, index) -> i32
    %21 = "uop.cast"(%20) : (i32) -> f32
    %22 = "uop.const"() {value = 5.000000e-01 : f32} : () -> f32
    %23 = "uop.mul"(%21, %22) : (f32, f32) -> f32
    %24 = "uop.store"(%6, %23) : (!uop.ptr<f32>, f32) -> !uop.token
    %25 = "uop.end"(%24, %1, %4) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%25) : (!uop.token) -> ()
    return
  }
}
