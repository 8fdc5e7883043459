// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8},uop-lower-cpu' | FileCheck %s

module {
  // A 3x3 window sum of stride 2 over a 9x35 image (4x17 outputs: two groups of 8 lanes and a tail of 1), rows first:
  // each window row's 24 consecutive elements are one wide load (plain where the 8 lanes hold and the 24 elements lie in
  // the buffer, else masked to the 2*valid+1 elements the valid lanes read), the three rows summed as wide vectors, then
  // one shuffle per column offset (elements 2j, 2j+1, 2j+2) and the three columns summed: 3 shuffles where one per tap
  // took 9.
  // CHECK-LABEL: func.func @pool(
  // CHECK: %[[W:.*]] = scf.if %{{.*}} -> (vector<24xf32>) {
  // CHECK-NEXT: %[[R0:.*]] = vector.load %arg1[%{{.*}}] : memref<315xf32>, vector<24xf32>
  // CHECK-NEXT: %[[R1:.*]] = vector.load %arg1[%{{.*}}] : memref<315xf32>, vector<24xf32>
  // CHECK-NEXT: %[[R2:.*]] = vector.load %arg1[%{{.*}}] : memref<315xf32>, vector<24xf32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[R0]], %[[R1]]{{.*}} : vector<24xf32>
  // CHECK-NEXT: %[[T:.*]] = arith.addf %[[S]], %[[R2]]{{.*}} : vector<24xf32>
  // CHECK-NEXT: scf.yield %[[T]] : vector<24xf32>
  // CHECK-NEXT: } else {
  // CHECK: vector.maskedload %arg1[%{{.*}}], %{{.*}}, %{{.*}} : memref<315xf32>, vector<24xi1>, vector<24xf32> into vector<24xf32>
  // CHECK: scf.yield
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[C0:.*]] = vector.shuffle %[[W]], %[[W]] [0, 2, 4, 6, 8, 10, 12, 14] : vector<24xf32>, vector<24xf32>
  // CHECK-NEXT: %[[C1:.*]] = vector.shuffle %[[W]], %[[W]] [1, 3, 5, 7, 9, 11, 13, 15] : vector<24xf32>, vector<24xf32>
  // CHECK-NEXT: %[[C2:.*]] = vector.shuffle %[[W]], %[[W]] [2, 4, 6, 8, 10, 12, 14, 16] : vector<24xf32>, vector<24xf32>
  // CHECK-NEXT: %[[A:.*]] = arith.addf %[[C0]], %[[C1]]{{.*}} : vector<8xf32>
  // CHECK-NEXT: arith.addf %[[A]], %[[C2]]{{.*}} : vector<8xf32>
  // CHECK-NOT: vector.shuffle
  // CHECK: vector.maskedstore %arg0
  func.func private @pool(%arg0: memref<68xf32>, %arg1: memref<315xf32>) attributes {uop.kernel} {
    %c2 = "uop.const"() {value = 2 : index} : () -> index
    %c3 = "uop.const"() {value = 3 : index} : () -> index
    %c4 = "uop.const"() {value = 4 : index} : () -> index
    %c17 = "uop.const"() {value = 17 : index} : () -> index
    %c35 = "uop.const"() {value = 35 : index} : () -> index
    %oy = "uop.range"(%c4) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %ox = "uop.range"(%c17) {axis = 1 : i64, kind = "loop"} : (index) -> index
    %ky = "uop.range"(%c3) {axis = 2 : i64, kind = "reduce"} : (index) -> index
    %kx = "uop.range"(%c3) {axis = 3 : i64, kind = "reduce"} : (index) -> index
    %y2 = "uop.mul"(%oy, %c2) : (index, index) -> index
    %y = "uop.add"(%y2, %ky) : (index, index) -> index
    %row = "uop.mul"(%y, %c35) : (index, index) -> index
    %x2 = "uop.mul"(%ox, %c2) : (index, index) -> index
    %x = "uop.add"(%x2, %kx) : (index, index) -> index
    %at = "uop.add"(%row, %x) : (index, index) -> index
    %p = "uop.index"(%arg1, %at) : (memref<315xf32>, index) -> !uop.ptr<f32>
    %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
    %s = "uop.reduce"(%v, %ky, %kx) {op = "add"} : (f32, index, index) -> f32
    %orow = "uop.mul"(%oy, %c17) : (index, index) -> index
    %oat = "uop.add"(%orow, %ox) : (index, index) -> index
    %o = "uop.index"(%arg0, %oat) : (memref<68xf32>, index) -> !uop.ptr<f32>
    %st = "uop.store"(%o, %s) : (!uop.ptr<f32>, f32) -> !uop.token
    %e = "uop.end"(%st, %oy, %ox) : (!uop.token, index, index) -> !uop.token
    "uop.sink"(%e) : (!uop.token) -> ()
    return
  }
}
