// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576 l3=33554432}' | FileCheck %s

// A padded 3-tap convolution per channel of a scaled image: out[c][i] = sum_t where(g, x[c][i+t-1] * s[c], 0) * w[c][t]
// + b[c][...], g = 0 <= i+t-1 < 8. Padding gates every load under the where, s[c] too; s[c]'s address is in its
// buffer for any i, t, and its value is only used where g holds, so its gate goes (it then lowers outside the tap
// loop). x's address leaves the buffer where g fails: it keeps its gate. b[c] is gated by g as well but also added
// outside the where, used where g fails: it keeps its gate.
// CHECK-LABEL: func.func private @padded
// CHECK-DAG: "uop.index"(%arg1, %{{[0-9]+}}, %[[G:[0-9]+]]) : (memref<32xf32>, index, i1)
// CHECK-DAG: "uop.index"(%arg2, %{{[0-9]+}}) : (memref<4xf32>, index)
// CHECK-DAG: "uop.index"(%arg4, %{{[0-9]+}}, %[[G]]) : (memref<4xf32>, index, i1)
module {
  func.func private @padded(%arg0: memref<32xf32>, %arg1: memref<32xf32>, %arg2: memref<4xf32>, %arg3: memref<12xf32>, %arg4: memref<4xf32>) attributes {uop.kernel} {
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c8 = "uop.const"() {value = 8 : index} : () -> index
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c0 = "uop.const"() {value = 0 : index} : () -> index
    %c9 = "uop.const"() {value = 9 : index} : () -> index
    %m1 = "uop.const"() {value = -1 : index} : () -> index
    %z = "uop.const"() {value = 0.0 : f32} : () -> f32
    %c = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %i = "uop.range"(%c8) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %t = "uop.range"(%c3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %it = "uop.add"(%i, %t) : (index, index) -> index
    %lo = "uop.cmplt"(%c0, %it) : (index, index) -> i1
    %hi = "uop.cmplt"(%it, %c9) : (index, index) -> i1
    %g = "uop.and"(%lo, %hi) : (i1, i1) -> i1
    %row = "uop.mul"(%c, %c8) : (index, index) -> index
    %xi0 = "uop.add"(%row, %it) : (index, index) -> index
    %xi = "uop.add"(%xi0, %m1) : (index, index) -> index
    %xp = "uop.index"(%arg1, %xi, %g) : (memref<32xf32>, index, i1) -> !uop.ptr<f32>
    %x = "uop.load"(%xp) : (!uop.ptr<f32>) -> f32
    %sp = "uop.index"(%arg2, %c, %g) : (memref<4xf32>, index, i1) -> !uop.ptr<f32>
    %s = "uop.load"(%sp) : (!uop.ptr<f32>) -> f32
    %xs = "uop.mul"(%x, %s) : (f32, f32) -> f32
    %pad = "uop.where"(%g, %xs, %z) : (i1, f32, f32) -> f32
    %bp = "uop.index"(%arg4, %c, %g) : (memref<4xf32>, index, i1) -> !uop.ptr<f32>
    %b = "uop.load"(%bp) : (!uop.ptr<f32>) -> f32
    %pb = "uop.add"(%pad, %b) : (f32, f32) -> f32
    %wr = "uop.mul"(%c, %c3) : (index, index) -> index
    %wi = "uop.add"(%wr, %t) : (index, index) -> index
    %wp = "uop.index"(%arg3, %wi) : (memref<12xf32>, index) -> !uop.ptr<f32>
    %w = "uop.load"(%wp) : (!uop.ptr<f32>) -> f32
    %term = "uop.mul"(%pb, %w) : (f32, f32) -> f32
    %sum = "uop.reduce"(%term, %t) {op = "add"} : (f32, index) -> f32
    %oi = "uop.add"(%row, %i) : (index, index) -> index
    %op = "uop.index"(%arg0, %oi) : (memref<32xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%op, %sum) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%st, %c, %i) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
