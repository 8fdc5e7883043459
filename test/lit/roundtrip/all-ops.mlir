// Every uop op, printed and re-parsed: generic print -> parse -> print is stable (ops defined through IRDL
// print only in the generic form). One function per op, from the op table's doc examples.
// RUN: morok-opt %s | morok-opt | FileCheck %s
// RUN: morok-opt %s -o %t.1 && morok-opt %t.1 -o %t.2 && diff %t.1 %t.2

// CHECK-LABEL: func.func @buffer_example
// CHECK-NEXT: %0 = "uop.buffer"() {slot = 0 : i64} : () -> tensor<4xf32>
func.func @buffer_example(%arg0: tensor<4xf32>) {
  %0 = "uop.buffer"() {slot = 0 : i64} : () -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @const_example
// CHECK-NEXT: %0 = "uop.const"() {value = 1.000000e+00 : f32} : () -> tensor<4xf32>
func.func @const_example() {
  %0 = "uop.const"() {value = 1.0 : f32} : () -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @add_example
// CHECK-NEXT: %0 = "uop.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @add_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @mul_example
// CHECK-NEXT: %0 = "uop.mul"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @mul_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.mul"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @sub_example
// CHECK-NEXT: %0 = "uop.sub"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @sub_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.sub"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @idiv_example
// CHECK-NEXT: %0 = "uop.idiv"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @idiv_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.idiv"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @fdiv_example
// CHECK-NEXT: %0 = "uop.fdiv"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @fdiv_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.fdiv"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @mod_example
// CHECK-NEXT: %0 = "uop.mod"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @mod_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.mod"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @pow_example
// CHECK-NEXT: %0 = "uop.pow"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @pow_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.pow"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @max_example
// CHECK-NEXT: %0 = "uop.max"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @max_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.max"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @min_example
// CHECK-NEXT: %0 = "uop.min"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @min_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.min"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @and_example
// CHECK-NEXT: %0 = "uop.and"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @and_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.and"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @or_example
// CHECK-NEXT: %0 = "uop.or"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @or_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.or"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @xor_example
// CHECK-NEXT: %0 = "uop.xor"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @xor_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.xor"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @shl_example
// CHECK-NEXT: %0 = "uop.shl"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @shl_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.shl"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @shr_example
// CHECK-NEXT: %0 = "uop.shr"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @shr_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.shr"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @cmplt_example
// CHECK-NEXT: %0 = "uop.cmplt"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
func.func @cmplt_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.cmplt"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @cmpne_example
// CHECK-NEXT: %0 = "uop.cmpne"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
func.func @cmpne_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.cmpne"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @cmpeq_example
// CHECK-NEXT: %0 = "uop.cmpeq"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
func.func @cmpeq_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.cmpeq"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @neg_example
// CHECK-NEXT: %0 = "uop.neg"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @neg_example(%arg0: tensor<4xf32>) {
  %1 = "uop.neg"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @exp2_example
// CHECK-NEXT: %0 = "uop.exp2"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @exp2_example(%arg0: tensor<4xf32>) {
  %1 = "uop.exp2"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @log2_example
// CHECK-NEXT: %0 = "uop.log2"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @log2_example(%arg0: tensor<4xf32>) {
  %1 = "uop.log2"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @sin_example
// CHECK-NEXT: %0 = "uop.sin"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @sin_example(%arg0: tensor<4xf32>) {
  %1 = "uop.sin"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @sqrt_example
// CHECK-NEXT: %0 = "uop.sqrt"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @sqrt_example(%arg0: tensor<4xf32>) {
  %1 = "uop.sqrt"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @recip_example
// CHECK-NEXT: %0 = "uop.recip"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @recip_example(%arg0: tensor<4xf32>) {
  %1 = "uop.recip"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @trunc_example
// CHECK-NEXT: %0 = "uop.trunc"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @trunc_example(%arg0: tensor<4xf32>) {
  %1 = "uop.trunc"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @where_example
// CHECK-NEXT: %0 = "uop.where"(%arg0, %arg1, %arg2) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @where_example(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) {
  %3 = "uop.where"(%arg0, %arg1, %arg2) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @mulacc_example
// CHECK-NEXT: %0 = "uop.mulacc"(%arg0, %arg1, %arg2) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @mulacc_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) {
  %3 = "uop.mulacc"(%arg0, %arg1, %arg2) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @cast_example
// CHECK-NEXT: %0 = "uop.cast"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
func.func @cast_example(%arg0: tensor<4xf32>) {
  %1 = "uop.cast"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
  return
}

// CHECK-LABEL: func.func @bitcast_example
// CHECK-NEXT: %0 = "uop.bitcast"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
func.func @bitcast_example(%arg0: tensor<4xf32>) {
  %1 = "uop.bitcast"(%arg0) : (tensor<4xf32>) -> tensor<4xi32>
  return
}

// CHECK-LABEL: func.func @reshape_example
// CHECK-NEXT: %0 = "uop.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
func.func @reshape_example(%arg0: tensor<2x3xf32>) {
  %1 = "uop.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
  return
}

// CHECK-LABEL: func.func @permute_example
// CHECK-NEXT: %0 = "uop.permute"(%arg0) {order = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
func.func @permute_example(%arg0: tensor<2x3xf32>) {
  %1 = "uop.permute"(%arg0) {order = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// CHECK-LABEL: func.func @expand_example
// CHECK-NEXT: %0 = "uop.expand"(%arg0) : (tensor<1x3xf32>) -> tensor<4x3xf32>
func.func @expand_example(%arg0: tensor<1x3xf32>) {
  %1 = "uop.expand"(%arg0) : (tensor<1x3xf32>) -> tensor<4x3xf32>
  return
}

// CHECK-LABEL: func.func @pad_example
// CHECK-NEXT: %0 = "uop.pad"(%arg0) {padding = array<i64: 1, 2>} : (tensor<4xf32>) -> tensor<7xf32>
func.func @pad_example(%arg0: tensor<4xf32>) {
  %1 = "uop.pad"(%arg0) {padding = array<i64: 1, 2>} : (tensor<4xf32>) -> tensor<7xf32>
  return
}

// CHECK-LABEL: func.func @shrink_example
// CHECK-NEXT: %0 = "uop.shrink"(%arg0) {bounds = array<i64: 1, 3>} : (tensor<4xf32>) -> tensor<2xf32>
func.func @shrink_example(%arg0: tensor<4xf32>) {
  %1 = "uop.shrink"(%arg0) {bounds = array<i64: 1, 3>} : (tensor<4xf32>) -> tensor<2xf32>
  return
}

// CHECK-LABEL: func.func @flip_example
// CHECK-NEXT: %0 = "uop.flip"(%arg0) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
func.func @flip_example(%arg0: tensor<4xf32>) {
  %1 = "uop.flip"(%arg0) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @gather_example
// CHECK-NEXT: %0 = "uop.gather"(%arg0, %arg1) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
func.func @gather_example(%arg0: tensor<5x3xf32>, %arg1: tensor<2x3xi32>) {
  %2 = "uop.gather"(%arg0, %arg1) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @scatter_example
// CHECK-NEXT: %0 = "uop.scatter"(%arg0, %arg1, %arg2) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
func.func @scatter_example(%arg0: tensor<5x3xf32>, %arg1: tensor<2x3xi32>, %arg2: tensor<2x3xf32>) {
  %3 = "uop.scatter"(%arg0, %arg1, %arg2) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return
}

// CHECK-LABEL: func.func @reduce_axis_example
// CHECK-NEXT: %0 = "uop.reduce_axis"(%arg0) {axes = array<i64: 1>, op = "add"} : (tensor<2x3xf32>) -> tensor<2x1xf32>
func.func @reduce_axis_example(%arg0: tensor<2x3xf32>) {
  %1 = "uop.reduce_axis"(%arg0) {op = "add", axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// CHECK-LABEL: func.func @contiguous_example
// CHECK-NEXT: %0 = "uop.contiguous"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @contiguous_example(%arg0: tensor<4xf32>) {
  %1 = "uop.contiguous"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @copy_example
// CHECK-NEXT: %0 = "uop.copy"(%arg0) {device = "CPU"} : (tensor<4xf32>) -> tensor<4xf32>
func.func @copy_example(%arg0: tensor<4xf32>) {
  %1 = "uop.copy"(%arg0) {device = "CPU"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @multi_example
// CHECK-NEXT: %0 = "uop.multi"(%arg0, %arg1) {axis = 0 : i64, devices = "CPU,CPU:1"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
func.func @multi_example(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) {
  %2 = "uop.multi"(%arg0, %arg1) {axis = 0 : i64, devices = "CPU,CPU:1"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// CHECK-LABEL: func.func @allreduce_example
// CHECK-NEXT: %0 = "uop.allreduce"(%arg0, %arg1) {device = "CPU:1", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @allreduce_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.allreduce"(%arg0, %arg1) {device = "CPU:1", devices = "CPU,CPU:1", op = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @assign_example
// CHECK-NEXT: %0 = "uop.assign"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @assign_example(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {
  %2 = "uop.assign"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @detach_example
// CHECK-NEXT: %0 = "uop.detach"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @detach_example(%arg0: tensor<4xf32>) {
  %1 = "uop.detach"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @define_var_example
// CHECK-NEXT: %0 = "uop.define_var"() {max = 64 : i64, min = 1 : i64, name = "n"} : () -> index
func.func @define_var_example() {
  %0 = "uop.define_var"() {name = "n", min = 1 : i64, max = 64 : i64} : () -> index
  return
}

// CHECK-LABEL: func.func @bind_example
// CHECK-NEXT: %0 = "uop.bind"(%arg0, %arg1) : (index, index) -> index
func.func @bind_example(%arg0: index, %arg1: index) {
  %2 = "uop.bind"(%arg0, %arg1) : (index, index) -> index
  return
}

// CHECK-LABEL: func.func @threefry_example
// CHECK-NEXT: %0 = "uop.threefry"(%arg0, %arg1) : (tensor<4xui64>, tensor<4xui64>) -> tensor<4xui64>
func.func @threefry_example(%arg0: tensor<4xui64>, %arg1: tensor<4xui64>) {
  %2 = "uop.threefry"(%arg0, %arg1) : (tensor<4xui64>, tensor<4xui64>) -> tensor<4xui64>
  return
}

// CHECK-LABEL: func.func @sink_example
// CHECK-NEXT: "uop.sink"(%arg0, %arg1) : (!uop.token, !uop.token) -> ()
func.func @sink_example(%arg0: !uop.token, %arg1: !uop.token) {
  "uop.sink"(%arg0, %arg1) : (!uop.token, !uop.token) -> ()
  return
}

// CHECK-LABEL: func.func @range_example
// CHECK-NEXT: %0 = "uop.range"(%arg0) {axis = 0 : i64, kind = "loop"} : (index) -> index
func.func @range_example(%arg0: index) {
  %1 = "uop.range"(%arg0) {axis = 0 : i64, kind = "loop"} : (index) -> index
  return
}

// CHECK-LABEL: func.func @index_example
// CHECK-NEXT: %0 = "uop.index"(%arg0, %arg1) : (memref<16xf32>, index) -> !uop.ptr<f32>
func.func @index_example(%arg0: memref<16xf32>, %arg1: index) {
  %2 = "uop.index"(%arg0, %arg1) : (memref<16xf32>, index) -> !uop.ptr<f32>
  return
}

// CHECK-LABEL: func.func @load_example
// CHECK-NEXT: %0 = "uop.load"(%arg0) : (!uop.ptr<f32>) -> f32
func.func @load_example(%arg0: !uop.ptr<f32>) {
  %1 = "uop.load"(%arg0) : (!uop.ptr<f32>) -> f32
  return
}

// CHECK-LABEL: func.func @store_example
// CHECK-NEXT: %0 = "uop.store"(%arg0, %arg1) : (!uop.ptr<f32>, f32) -> !uop.token
func.func @store_example(%arg0: !uop.ptr<f32>, %arg1: f32) {
  %2 = "uop.store"(%arg0, %arg1) : (!uop.ptr<f32>, f32) -> !uop.token
  return
}

// CHECK-LABEL: func.func @reduce_example
// CHECK-NEXT: %0 = "uop.reduce"(%arg0, %arg1) {op = "add"} : (f32, index) -> f32
func.func @reduce_example(%arg0: f32, %arg1: index) {
  %2 = "uop.reduce"(%arg0, %arg1) {op = "add"} : (f32, index) -> f32
  return
}

// CHECK-LABEL: func.func @group_example
// CHECK-NEXT: %0 = "uop.group"(%arg0, %arg1) : (!uop.token, !uop.token) -> !uop.token
func.func @group_example(%arg0: !uop.token, %arg1: !uop.token) {
  %2 = "uop.group"(%arg0, %arg1) : (!uop.token, !uop.token) -> !uop.token
  return
}

// CHECK-LABEL: func.func @end_example
// CHECK-NEXT: %0 = "uop.end"(%arg0, %arg1) : (!uop.token, index) -> !uop.token
func.func @end_example(%arg0: !uop.token, %arg1: index) {
  %2 = "uop.end"(%arg0, %arg1) : (!uop.token, index) -> !uop.token
  return
}

// CHECK-LABEL: func.func @bufferize_example
// CHECK-NEXT: %0 = "uop.bufferize"(%arg0, %arg1) : (f32, index) -> memref<16xf32>
func.func @bufferize_example(%arg0: f32, %arg1: index) {
  %2 = "uop.bufferize"(%arg0, %arg1) : (f32, index) -> memref<16xf32>
  return
}

// CHECK-LABEL: func.func @after_example
// CHECK-NEXT: %0 = "uop.after"(%arg0, %arg1) : (memref<16xf32>, !uop.token) -> memref<16xf32>
func.func @after_example(%arg0: memref<16xf32>, %arg1: !uop.token) {
  %2 = "uop.after"(%arg0, %arg1) : (memref<16xf32>, !uop.token) -> memref<16xf32>
  return
}

// CHECK-LABEL: func.func @kernel_example
// CHECK-NEXT: %0 = "uop.kernel"(%arg0) {callee = @k1, slots = array<i64: 2, 0>} : (!uop.token) -> !uop.token
func.func @kernel_example(%arg0: !uop.token) {
  %1 = "uop.kernel"(%arg0) {callee = @k1, slots = array<i64: 2, 0>} : (!uop.token) -> !uop.token
  return
}

// CHECK-LABEL: func.func @special_example
// CHECK-NEXT: %0 = "uop.special"() {dim = "gidx0", size = 256 : i64} : () -> index
func.func @special_example() {
  %0 = "uop.special"() {dim = "gidx0", size = 256 : i64} : () -> index
  return
}

// CHECK-LABEL: func.func @vectorize_example
// CHECK-NEXT: %0 = "uop.vectorize"(%arg0, %arg1) : (f32, f32) -> vector<2xf32>
func.func @vectorize_example(%arg0: f32, %arg1: f32) {
  %2 = "uop.vectorize"(%arg0, %arg1) : (f32, f32) -> vector<2xf32>
  return
}

// CHECK-LABEL: func.func @gep_example
// CHECK-NEXT: %0 = "uop.gep"(%arg0) {idx = array<i64: 1>} : (vector<2xf32>) -> f32
func.func @gep_example(%arg0: vector<2xf32>) {
  %1 = "uop.gep"(%arg0) {idx = array<i64: 1>} : (vector<2xf32>) -> f32
  return
}

// CHECK-LABEL: func.func @wmma_example
// CHECK-NEXT: %0 = "uop.wmma"(%arg0, %arg1, %arg2) {dims = array<i64: 16, 8, 16>} : (vector<8xf16>, vector<4xf16>, vector<4xf32>) -> vector<4xf32>
func.func @wmma_example(%arg0: vector<8xf16>, %arg1: vector<4xf16>, %arg2: vector<4xf32>) {
  %3 = "uop.wmma"(%arg0, %arg1, %arg2) {dims = array<i64: 16, 8, 16>} : (vector<8xf16>, vector<4xf16>, vector<4xf32>) -> vector<4xf32>
  return
}

// CHECK-LABEL: func.func @if_example
// CHECK-NEXT: %0 = "uop.if"(%arg0) : (i1) -> !uop.token
func.func @if_example(%arg0: i1) {
  %1 = "uop.if"(%arg0) : (i1) -> !uop.token
  return
}

// CHECK-LABEL: func.func @endif_example
// CHECK-NEXT: %0 = "uop.endif"(%arg0) : (!uop.token) -> !uop.token
func.func @endif_example(%arg0: !uop.token) {
  %1 = "uop.endif"(%arg0) : (!uop.token) -> !uop.token
  return
}

// CHECK-LABEL: func.func @barrier_example
// CHECK-NEXT: %0 = "uop.barrier"(%arg0) : (!uop.token) -> !uop.token
func.func @barrier_example(%arg0: !uop.token) {
  %1 = "uop.barrier"(%arg0) : (!uop.token) -> !uop.token
  return
}
