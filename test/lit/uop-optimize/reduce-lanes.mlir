// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432}' | FileCheck %s
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=16 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s --check-prefix=CPU16
// RUN: morok-opt %s -p 'uop-optimize{threads=1 vec=8 l2=1048576 l3=33554432},uop-lower-cpu' | FileCheck %s --check-prefix=CPU8

// A Q4_1 matrix-vector product read in place: out[o] = sum_k x[k] * (q(o, k) * d + m), weight k of row o in block
// b = (o*64 + k) // 32 (20 bytes: fp16 d, fp16 m, 16 bytes of nibbles), byte (o*64 + k) % 16, nibble (k % 32) // 16.
// split_ranges runs the divisions as ranges of their own, k = 32*b + 16*h + j: no division is left, and the nibbles'
// byte is 20*(2o + b) + 4 + j, contiguous in j. The reduce's innermost range j then runs as vector lanes
// (uop.reduce_lanes): 16 bytes per load at 16 lanes, 8 at 8 (j split once more), the nibble halves h unrolled into
// one vector accumulator, its lanes summed as a tree (reassoc) once per row. Each 8-bit load prefetches the byte 4 KiB
// ahead (lanes.STREAM_AHEAD: the weights stream from memory once a call; a prefetch never faults past the buffer).
// CHECK-LABEL: func.func private @q4_1
// CHECK-SAME: uop.reduce_lanes = 16
// CHECK-NOT: uop.idiv
// CHECK-NOT: uop.mod
// CHECK-DAG: %[[B:[0-9]+]] = "uop.range"(%{{[0-9]+}}) {axis = 1 : i64, kind = "reduce"}
// CHECK-DAG: %[[H:[0-9]+]] = "uop.range"(%{{[0-9]+}}) {axis = 2 : i64, kind = "reduce"}
// CHECK-DAG: %[[J:[0-9]+]] = "uop.range"(%{{[0-9]+}}) {axis = 3 : i64, kind = "reduce"}
// CHECK: "uop.reduce"(%{{[0-9]+}}, %[[B]], %[[H]], %[[J]]) {op = "add"}
// CPU16-LABEL: func.func @q4_1
// CPU16: %[[ACC:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CPU16: scf.for {{.*}} iter_args({{.*}} = %[[ACC]]) -> (vector<16xf32>)
// CPU16: %[[AT:.*]] = arith.addi %[[I:.*]], %c4096{{.*}} : index
// CPU16-NEXT: memref.prefetch %arg2[%[[AT]]], read, locality<3>, data : memref<160xi8>
// CPU16-NEXT: vector.load %arg2[%[[I]]] : memref<160xi8>, vector<16xi8>
// CPU16: vector.load %arg1[%{{.*}}] : memref<64xf32>, vector<16xf32>
// CPU16: arith.uitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CPU16: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// CPU16: memref.store
// A costly epilogue (exp here, SiLU in a feed-forward) would run scalar between the vector reduces: two phases, the
// reduces into a scratch buffer (after the kernel's buffers), then the epilogue over it as vector lanes (4 rows: masked).
// CPU16-LABEL: func.func @q4_1_exp_red
// CPU16: vector.reduction <add>
// CPU16: memref.store %{{.*}}, %arg3[%{{.*}}] : memref<4xf32>
// CPU16-LABEL: func.func @q4_1_exp_epi
// CPU16: vector.maskedload %arg3
// CPU16: vector.maskedstore %arg0
// CPU8-LABEL: func.func @q4_1
// CPU8: vector.load %arg2[%{{.*}}] : memref<160xi8>, vector<8xi8>
// CPU8: arith.uitofp %{{.*}} : vector<8xi8> to vector<8xf32>
// CPU8: vector.reduction <add>, %{{.*}} : vector<8xf32> into f32
// A shift by an amount per lane (Q5_0's fifth bits: the block's 32-bit word shifted by each weight's own index): one
// vector shift by a vector of amounts (vpsrlvd), the amounts outside [0, 32) guarded to numpy's 0 as in scalar code.
// CHECK-LABEL: func.func private @bits
// CHECK-SAME: uop.reduce_lanes = 16
// CPU16-LABEL: func.func @bits
// CPU16: %[[S:.*]] = vector.load %arg3[%{{.*}}] : memref<64xi32>, vector<16xi32>
// CPU16: %[[OK:.*]] = arith.cmpi ult, %[[S]], %{{.*}} : vector<16xi32>
// CPU16-NEXT: %[[SH:.*]] = arith.shrui %{{.*}}, %[[S]] : vector<16xi32>
// CPU16: arith.select %[[OK]], %[[SH]], %{{.*}} : vector<16xi1>, vector<16xi32>
// CPU8-LABEL: func.func @bits
// CPU8: arith.shrui %{{.*}}, %{{.*}} : vector<8xi32>
module {
  func.func private @q4_1(%arg0: memref<4xf32>, %arg1: memref<64xf32>, %arg2: memref<160xui8>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 4 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.index"(%arg1, %4) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %6 = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %7 = "uop.const"() {value = 0 : index} : () -> index
    %8 = "uop.mul"(%1, %3) : (index, index) -> index
    %9 = "uop.add"(%8, %4) : (index, index) -> index
    %10 = "uop.const"() {value = 32 : index} : () -> index
    %11 = "uop.mod"(%9, %10) : (index, index) -> index
    %12 = "uop.const"() {value = 16 : index} : () -> index
    %13 = "uop.idiv"(%11, %12) : (index, index) -> index
    %14 = "uop.cmplt"(%7, %13) : (index, index) -> i1
    %15 = "uop.mod"(%9, %12) : (index, index) -> index
    %16 = "uop.idiv"(%9, %10) : (index, index) -> index
    %17 = "uop.const"() {value = 20 : index} : () -> index
    %18 = "uop.mul"(%16, %17) : (index, index) -> index
    %19 = "uop.add"(%15, %18) : (index, index) -> index
    %20 = "uop.add"(%19, %0) : (index, index) -> index
    %21 = "uop.index"(%arg2, %20, %14) : (memref<160xui8>, index, i1) -> !uop.ptr<ui8>
    %22 = "uop.load"(%21) : (!uop.ptr<ui8>) -> ui8
    %23 = "uop.const"() {value = 4 : i8} : () -> ui8
    %24 = "uop.shr"(%22, %23) : (ui8, ui8) -> ui8
    %25 = "uop.const"() {value = 0 : i8} : () -> ui8
    %26 = "uop.where"(%14, %24, %25) : (i1, ui8, ui8) -> ui8
    %27 = "uop.const"() {value = 1 : index} : () -> index
    %28 = "uop.cmplt"(%13, %27) : (index, index) -> i1
    %29 = "uop.index"(%arg2, %20, %28) : (memref<160xui8>, index, i1) -> !uop.ptr<ui8>
    %30 = "uop.load"(%29) : (!uop.ptr<ui8>) -> ui8
    %31 = "uop.const"() {value = 15 : i8} : () -> ui8
    %32 = "uop.and"(%30, %31) : (ui8, ui8) -> ui8
    %33 = "uop.where"(%28, %32, %25) : (i1, ui8, ui8) -> ui8
    %34 = "uop.where"(%14, %26, %33) : (i1, ui8, ui8) -> ui8
    %35 = "uop.cast"(%34) : (ui8) -> f32
    %36 = "uop.index"(%arg2, %18) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %37 = "uop.load"(%36) : (!uop.ptr<ui8>) -> ui8
    %38 = "uop.cast"(%37) : (ui8) -> ui16
    %39 = "uop.add"(%18, %27) : (index, index) -> index
    %40 = "uop.index"(%arg2, %39) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %41 = "uop.load"(%40) : (!uop.ptr<ui8>) -> ui8
    %42 = "uop.cast"(%41) : (ui8) -> ui16
    %43 = "uop.const"() {value = 8 : i16} : () -> ui16
    %44 = "uop.shl"(%42, %43) : (ui16, ui16) -> ui16
    %45 = "uop.or"(%38, %44) : (ui16, ui16) -> ui16
    %46 = "uop.bitcast"(%45) : (ui16) -> f16
    %47 = "uop.cast"(%46) : (f16) -> f32
    %48 = "uop.mul"(%35, %47) : (f32, f32) -> f32
    %49 = "uop.const"() {value = 2 : index} : () -> index
    %50 = "uop.add"(%18, %49) : (index, index) -> index
    %51 = "uop.index"(%arg2, %50) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %52 = "uop.load"(%51) : (!uop.ptr<ui8>) -> ui8
    %53 = "uop.cast"(%52) : (ui8) -> ui16
    %54 = "uop.const"() {value = 3 : index} : () -> index
    %55 = "uop.add"(%18, %54) : (index, index) -> index
    %56 = "uop.index"(%arg2, %55) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %57 = "uop.load"(%56) : (!uop.ptr<ui8>) -> ui8
    %58 = "uop.cast"(%57) : (ui8) -> ui16
    %59 = "uop.shl"(%58, %43) : (ui16, ui16) -> ui16
    %60 = "uop.or"(%53, %59) : (ui16, ui16) -> ui16
    %61 = "uop.bitcast"(%60) : (ui16) -> f16
    %62 = "uop.cast"(%61) : (f16) -> f32
    %63 = "uop.add"(%48, %62) : (f32, f32) -> f32
    %64 = "uop.mul"(%6, %63) : (f32, f32) -> f32
    %65 = "uop.reduce"(%64, %4) {op = "add"} : (f32, index) -> f32
    %66 = "uop.store"(%2, %65) : (!uop.ptr<f32>, f32) -> !uop.token
    %67 = "uop.end"(%66, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%67) : (!uop.token) -> ()
    return
  }
  func.func private @q4_1_exp(%arg0: memref<4xf32>, %arg1: memref<64xf32>, %arg2: memref<160xui8>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 4 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<4xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.index"(%arg1, %4) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %6 = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %7 = "uop.const"() {value = 0 : index} : () -> index
    %8 = "uop.mul"(%1, %3) : (index, index) -> index
    %9 = "uop.add"(%8, %4) : (index, index) -> index
    %10 = "uop.const"() {value = 32 : index} : () -> index
    %11 = "uop.mod"(%9, %10) : (index, index) -> index
    %12 = "uop.const"() {value = 16 : index} : () -> index
    %13 = "uop.idiv"(%11, %12) : (index, index) -> index
    %14 = "uop.cmplt"(%7, %13) : (index, index) -> i1
    %15 = "uop.mod"(%9, %12) : (index, index) -> index
    %16 = "uop.idiv"(%9, %10) : (index, index) -> index
    %17 = "uop.const"() {value = 20 : index} : () -> index
    %18 = "uop.mul"(%16, %17) : (index, index) -> index
    %19 = "uop.add"(%15, %18) : (index, index) -> index
    %20 = "uop.add"(%19, %0) : (index, index) -> index
    %21 = "uop.index"(%arg2, %20, %14) : (memref<160xui8>, index, i1) -> !uop.ptr<ui8>
    %22 = "uop.load"(%21) : (!uop.ptr<ui8>) -> ui8
    %23 = "uop.const"() {value = 4 : i8} : () -> ui8
    %24 = "uop.shr"(%22, %23) : (ui8, ui8) -> ui8
    %25 = "uop.const"() {value = 0 : i8} : () -> ui8
    %26 = "uop.where"(%14, %24, %25) : (i1, ui8, ui8) -> ui8
    %27 = "uop.const"() {value = 1 : index} : () -> index
    %28 = "uop.cmplt"(%13, %27) : (index, index) -> i1
    %29 = "uop.index"(%arg2, %20, %28) : (memref<160xui8>, index, i1) -> !uop.ptr<ui8>
    %30 = "uop.load"(%29) : (!uop.ptr<ui8>) -> ui8
    %31 = "uop.const"() {value = 15 : i8} : () -> ui8
    %32 = "uop.and"(%30, %31) : (ui8, ui8) -> ui8
    %33 = "uop.where"(%28, %32, %25) : (i1, ui8, ui8) -> ui8
    %34 = "uop.where"(%14, %26, %33) : (i1, ui8, ui8) -> ui8
    %35 = "uop.cast"(%34) : (ui8) -> f32
    %36 = "uop.index"(%arg2, %18) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %37 = "uop.load"(%36) : (!uop.ptr<ui8>) -> ui8
    %38 = "uop.cast"(%37) : (ui8) -> ui16
    %39 = "uop.add"(%18, %27) : (index, index) -> index
    %40 = "uop.index"(%arg2, %39) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %41 = "uop.load"(%40) : (!uop.ptr<ui8>) -> ui8
    %42 = "uop.cast"(%41) : (ui8) -> ui16
    %43 = "uop.const"() {value = 8 : i16} : () -> ui16
    %44 = "uop.shl"(%42, %43) : (ui16, ui16) -> ui16
    %45 = "uop.or"(%38, %44) : (ui16, ui16) -> ui16
    %46 = "uop.bitcast"(%45) : (ui16) -> f16
    %47 = "uop.cast"(%46) : (f16) -> f32
    %48 = "uop.mul"(%35, %47) : (f32, f32) -> f32
    %49 = "uop.const"() {value = 2 : index} : () -> index
    %50 = "uop.add"(%18, %49) : (index, index) -> index
    %51 = "uop.index"(%arg2, %50) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %52 = "uop.load"(%51) : (!uop.ptr<ui8>) -> ui8
    %53 = "uop.cast"(%52) : (ui8) -> ui16
    %54 = "uop.const"() {value = 3 : index} : () -> index
    %55 = "uop.add"(%18, %54) : (index, index) -> index
    %56 = "uop.index"(%arg2, %55) : (memref<160xui8>, index) -> !uop.ptr<ui8>
    %57 = "uop.load"(%56) : (!uop.ptr<ui8>) -> ui8
    %58 = "uop.cast"(%57) : (ui8) -> ui16
    %59 = "uop.shl"(%58, %43) : (ui16, ui16) -> ui16
    %60 = "uop.or"(%53, %59) : (ui16, ui16) -> ui16
    %61 = "uop.bitcast"(%60) : (ui16) -> f16
    %62 = "uop.cast"(%61) : (f16) -> f32
    %63 = "uop.add"(%48, %62) : (f32, f32) -> f32
    %64 = "uop.mul"(%6, %63) : (f32, f32) -> f32
    %65 = "uop.reduce"(%64, %4) {op = "add"} : (f32, index) -> f32
    %66 = "uop.const"() {value = 1.44269502 : f32} : () -> f32
    %67 = "uop.mul"(%65, %66) : (f32, f32) -> f32
    %68 = "uop.exp2"(%67) : (f32) -> f32
    %69 = "uop.store"(%2, %68) : (!uop.ptr<f32>, f32) -> !uop.token
    %70 = "uop.end"(%69, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%70) : (!uop.token) -> ()
    return
  }
  func.func private @bits(%arg0: memref<3xf32>, %arg1: memref<64xf32>, %arg2: memref<3xui32>, %arg3: memref<64xui32>) attributes {uop.kernel} {
    %0 = "uop.const"() {value = 3 : index} : () -> index
    %1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index
    %2 = "uop.index"(%arg0, %1) : (memref<3xf32>, index) -> !uop.ptr<f32>
    %3 = "uop.const"() {value = 64 : index} : () -> index
    %4 = "uop.range"(%3) {axis = 1 : i64, kind = "reduce"} : (index) -> index
    %5 = "uop.index"(%arg1, %4) : (memref<64xf32>, index) -> !uop.ptr<f32>
    %6 = "uop.load"(%5) : (!uop.ptr<f32>) -> f32
    %7 = "uop.index"(%arg2, %1) : (memref<3xui32>, index) -> !uop.ptr<ui32>
    %8 = "uop.load"(%7) : (!uop.ptr<ui32>) -> ui32
    %9 = "uop.index"(%arg3, %4) : (memref<64xui32>, index) -> !uop.ptr<ui32>
    %10 = "uop.load"(%9) : (!uop.ptr<ui32>) -> ui32
    %11 = "uop.shr"(%8, %10) : (ui32, ui32) -> ui32
    %12 = "uop.const"() {value = 1 : i32} : () -> ui32
    %13 = "uop.and"(%11, %12) : (ui32, ui32) -> ui32
    %14 = "uop.cast"(%13) : (ui32) -> f32
    %15 = "uop.mul"(%6, %14) : (f32, f32) -> f32
    %16 = "uop.reduce"(%15, %4) {op = "add"} : (f32, index) -> f32
    %17 = "uop.store"(%2, %16) : (!uop.ptr<f32>, f32) -> !uop.token
    %18 = "uop.end"(%17, %1) : (!uop.token, index) -> !uop.token
    "uop.sink"(%18) : (!uop.token) -> ()
    return
  }
}
