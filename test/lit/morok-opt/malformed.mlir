// Malformed input: each chunk is a diagnostic at its source location and exit code 1, never an abort.
// RUN: not morok-opt %s --split-input-file 2>&1 | FileCheck %s

// A truncated file: the function never closes.
// CHECK: malformed.mlir:[[@LINE+2]]:{{[0-9]+}}: error: expected operation name in quotes
func.func @truncated(%a: tensor<4xf32>) {
  %0 = "uop.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
// -----

// CHECK: malformed.mlir:[[@LINE+1]]:1: error: invalid SSA name
%% garbage )) ]] }

// -----

// CHECK: malformed.mlir:[[@LINE+1]]:28: error: expected attribute value
%0 = "uop.buffer"() {slot = } : () -> f32

// -----

// CHECK: malformed.mlir:[[@LINE+1]]:51: error: expected dynamic type
%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.nosuch

// -----

// CHECK: malformed.mlir:[[@LINE+1]]:{{[0-9]+}}: error: integer constant out of range
%0 = "uop.buffer"() {slot = 99999999999999999999999 : i64} : () -> f32

// -----

// CHECK: malformed.mlir:[[@LINE+1]]:51: error: expected 1 type arguments, but had 2
%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.ptr<f32, f32>
