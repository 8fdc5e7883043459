// mlir-opt's IR printing and timing flags, for our passes mixed with upstream ones: the dumps go to stderr under
// mlir-opt's banners (a pass's name, then its pipeline argument), the result to stdout.
// RUN: morok-opt %s -p 'uop-rangeify,canonicalize,uop-simplify' --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=ALL
// RUN: morok-opt %s -p 'uop-rangeify,canonicalize,uop-simplify' --mlir-print-ir-before=uop-simplify --mlir-print-ir-after=canonicalize,uop-rangeify 2>&1 >/dev/null | FileCheck %s --check-prefix=SOME
// RUN: morok-opt %s -p 'uop-rangeify,func.func(cse)' --mlir-timing 2>&1 >/dev/null | FileCheck %s --check-prefix=TIME
// RUN: not morok-opt %s -p uop-rangeify --mlir-print-ir-after=uop-nothing 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not morok-opt %s -p 'uop-rangeify,uop-lower-cpu' --mlir-print-ir-after-failure 2>&1 | FileCheck %s --check-prefix=FAIL
// RUN: morok-opt %s -p 'uop-rangeify,func.func(cse)' --mlir-print-ir-after=cse --mlir-print-ir-module-scope 2>&1 >/dev/null | FileCheck %s --check-prefix=SCOPE

// ALL: // -----// IR Dump After UopRangeify (uop-rangeify) //----- //
// ALL-NEXT: module {
// ALL: "uop.range"
// ALL: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// ALL: // -----// IR Dump After UopSimplify (uop-simplify) //----- //
// ALL-NOT: IR Dump

// SOME-NOT: IR Dump Before UopRangeify
// SOME: // -----// IR Dump After UopRangeify (uop-rangeify) //----- //
// SOME: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// SOME: // -----// IR Dump Before UopSimplify (uop-simplify) //----- //
// SOME-NOT: IR Dump

// TIME: ===-------------------------------------------------------------------------===
// TIME-NEXT: ... Execution time report ...
// TIME: Total Execution Time: {{.*}} seconds
// TIME: ----Wall Time----  ----Name----
// TIME: UopRangeify
// TIME: 'func.func' Pipeline
// TIME: CSE
// TIME: Total

// BAD: morok-opt: error: --mlir-print-ir-after: no pass named 'uop-nothing'

// the IR a pass failed on, then its error (uop-lower-cpu takes kernels, not a graph)
// FAIL-NOT: IR Dump After UopRangeify
// FAIL: // -----// IR Dump After UopLowerCpu Failed (uop-lower-cpu) //----- //
// FAIL-NEXT: module {
// FAIL: error: uop-lower-cpu:

// module scope: the whole module after a pass nested in func.func (MLIR needs the context single-threaded for it)
// SCOPE: // -----// IR Dump After CSE (cse) ('func.func' operation: @f) //----- //
// SCOPE-NEXT: module {
func.func @f(%a: tensor<4xf32>) -> tensor<1xf32> {
  %0 = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}
