// RUN: morok-opt --list-passes | FileCheck %s
// CHECK: uop-dce
// CHECK: uop-cse
// CHECK: upstream MLIR pass
