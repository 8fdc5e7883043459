// RUN: morok-opt %s -p 'uop-optimize{threads=2 vec=16 l2=1048576 l3=33554432}' | FileCheck %s

// A linear layer y = x @ w.T, x 256 x 2048 row-major: K is longer than a KC block (1 MiB of L2 holds 1024 at 16 lanes),
// so an im2col of x would be packed whole, where a strided convolution's image is read in place instead. But x is no
// window: row m reads k at 2048*m + k, consecutive rows consecutive runs of k (kernel_facts.matrix_rows), which its pack
// copies in sequence (read in place, each tile row would be a stream of its own, 8 KiB from the next).
// CHECK-LABEL: func.func private @linear
// CHECK-SAME: uop.contraction
// CHECK-NOT: uop.direct_conv
// CHECK-SAME: {
module {
  func.func private @linear(%arg0: memref<16384xf32>, %arg1: memref<524288xf32>, %arg2: memref<131072xf32>) attributes {uop.kernel} {
    %c64 = "uop.const"() {value = 64 : index} : () -> index
    %c256 = "uop.const"() {value = 256 : index} : () -> index
    %c2048 = "uop.const"() {value = 2048 : index} : () -> index
    %m = "uop.range"(%c256) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %n = "uop.range"(%c64) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %k = "uop.range"(%c2048) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %xm = "uop.mul"(%m, %c2048) : (index, index) -> index
    %xi = "uop.add"(%xm, %k) : (index, index) -> index
    %xp = "uop.index"(%arg1, %xi) : (memref<524288xf32>, index) -> !uop.ptr<f32>
    %x = "uop.load"(%xp) : (!uop.ptr<f32>) -> f32
    %wn = "uop.mul"(%n, %c2048) : (index, index) -> index
    %wi = "uop.add"(%wn, %k) : (index, index) -> index
    %wp = "uop.index"(%arg2, %wi) : (memref<131072xf32>, index) -> !uop.ptr<f32>
    %w = "uop.load"(%wp) : (!uop.ptr<f32>) -> f32
    %p = "uop.mul"(%x, %w) : (f32, f32) -> f32
    %s = "uop.reduce"(%p, %k) {op = "add"} : (f32, index) -> f32
    %ym = "uop.mul"(%m, %c64) : (index, index) -> index
    %yi = "uop.add"(%ym, %n) : (index, index) -> index
    %yp = "uop.index"(%arg0, %yi) : (memref<16384xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%yp, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%st, %m, %n) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
