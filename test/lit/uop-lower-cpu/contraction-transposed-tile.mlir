// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s

// A 1x1 convolution of a 7x7 image to 128 channels, + bias, relu: 49 output positions pad better to MR rows than to
// NR-wide panels, so the image is A (rows: output positions) and the output steps along A's rows. The 6x16 tile goes to mm's stack transposed (each column's 6 rows
// together, for the epilogue's lanes along rows): each 8-float chunk of it is gathered from the accumulators whose
// lanes it takes (chunk 0: columns 0 and the first 2 rows of column 1, from rows 0-5's first vectors, #0 #2 ... #10)
// by a tree of vector.shuffle, pairs first, then merged (no scatter), and stored whole.
// CHECK-LABEL: func.func @r_128_7_7_256_k0_mm(
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<96xf32>
// CHECK: %[[R:.*]]:12 = scf.for {{.*}} iter_args(
// CHECK-COUNT-12: vector.fma
// CHECK-NOT: vector.scatter
// CHECK: %[[P0:.*]] = vector.shuffle %[[R]]#0, %[[R]]#2 [0, 8, 0, 0, 0, 0, 1, 9] : vector<8xf32>, vector<8xf32>
// CHECK-NEXT: %[[P1:.*]] = vector.shuffle %[[R]]#4, %[[R]]#6 [0, 0, 0, 8, 0, 0, 0, 0]
// CHECK-NEXT: %[[P2:.*]] = vector.shuffle %[[R]]#8, %[[R]]#10 [0, 0, 0, 0, 0, 8, 0, 0]
// CHECK-NEXT: %[[M:.*]] = vector.shuffle %[[P0]], %[[P1]] [0, 1, 10, 11, 12, 13, 6, 7]
// CHECK-NEXT: %[[C0:.*]] = vector.shuffle %[[P2]], %[[M]] [8, 9, 10, 11, 4, 5, 14, 15]
// CHECK: vector.store %[[C0]], %[[TILE]][%{{.*}}] : memref<96xf32>, vector<8xf32>
// CHECK-COUNT-11: vector.store %{{.*}}, %[[TILE]][
// CHECK-NOT: vector.scatter
// CHECK: func.call @r_128_7_7_256_k0_epi(
// CHECK-LABEL: func.func private @r_128_7_7_256_k0_epi(
// CHECK: vector.load %arg{{[0-9]+}}[%{{.*}}] : memref<96xf32>, vector<6xf32>
module {
  func.func private @r_128_7_7_256_k0(%arg0: memref<6272xf32>, %arg1: memref<12544xf32>, %arg2: memref<32768xf32>, %arg3: memref<128xf32>) attributes {uop.kernel} {
    %1 = "uop.const"() {value = 128 : index} : () -> index
    %2 = "uop.range"(%1) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %3 = "uop.const"() {value = 49 : index} : () -> index
    %4 = "uop.mul"(%2, %3) : (index, index) -> index loc("-":6:10)
    %5 = "uop.const"() {value = 7 : index} : () -> index
    %6 = "uop.range"(%5) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %7 = "uop.mul"(%6, %5) : (index, index) -> index loc("-":9:10)
    %8 = "uop.add"(%4, %7) : (index, index) -> index loc("-":10:10)
    %9 = "uop.range"(%5) {axis = 2 : i64, kind = "loop"} : (index) -> index
    %10 = "uop.add"(%8, %9) : (index, index) -> index loc("-":12:11)
    %11 = "uop.index"(%arg0, %10) : (memref<6272xf32>, index) -> !uop.ptr<f32> loc("-":13:11)
    %13 = "uop.add"(%7, %9) : (index, index) -> index loc("-":11:10)
    %14 = "uop.const"() {value = 256 : index} : () -> index
    %15 = "uop.range"(%14) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %16 = "uop.mul"(%15, %3) : (index, index) -> index loc("-":16:11)
    %17 = "uop.add"(%13, %16) : (index, index) -> index loc("-":18:11)
    %18 = "uop.index"(%arg1, %17) : (memref<12544xf32>, index) -> !uop.ptr<f32> loc("-":18:11)
    %19 = "uop.load"(%18) : (!uop.ptr<f32>) -> f32 loc("-":19:11)
    %21 = "uop.mul"(%2, %14) : (index, index) -> index loc("-":20:11)
    %22 = "uop.add"(%21, %15) : (index, index) -> index loc("-":21:11)
    %23 = "uop.index"(%arg2, %22) : (memref<32768xf32>, index) -> !uop.ptr<f32> loc("-":22:11)
    %24 = "uop.load"(%23) : (!uop.ptr<f32>) -> f32 loc("-":23:11)
    %25 = "uop.mul"(%19, %24) : (f32, f32) -> f32 loc("/tmp/s2/mklit.py":9:1)
    %26 = "uop.reduce"(%25, %15) {op = "add"} : (f32, index) -> f32 loc("/tmp/s2/mklit.py":9:1)
    %28 = "uop.index"(%arg3, %2) : (memref<128xf32>, index) -> !uop.ptr<f32> loc("-":26:11)
    %29 = "uop.load"(%28) : (!uop.ptr<f32>) -> f32 loc("-":27:11)
    %30 = "uop.add"(%26, %29) : (f32, f32) -> f32 loc("/tmp/s2/mklit.py":9:1)
    %31 = "uop.const"() {value = 0.0 : f32} : () -> f32
    %32 = "uop.cmplt"(%30, %31) : (f32, f32) -> i1 loc("/tmp/s2/mklit.py":9:1)
    %33 = "uop.cmpeq"(%30, %31) : (f32, f32) -> i1 loc("/tmp/s2/mklit.py":9:1)
    %34 = "uop.or"(%32, %33) : (i1, i1) -> i1 loc("/tmp/s2/mklit.py":9:1)
    %35 = "uop.where"(%34, %31, %30) : (i1, f32, f32) -> f32 loc("/tmp/s2/mklit.py":9:1)
    %36 = "uop.store"(%11, %35) : (!uop.ptr<f32>, f32) -> !uop.token loc("/tmp/s2/mklit.py":9:1)
    %37 = "uop.end"(%36, %2, %6, %9) : (!uop.token, index, index, index) -> !uop.token loc("/tmp/s2/mklit.py":9:1)
    "uop.sink"(%37) : (!uop.token) -> () loc("-":36:5)
    return
  }
}
