// mlir-opt's IR printing and timing flags, for our passes mixed with upstream ones: the dumps go to stderr under
// mlir-opt's banners (a pass's name, then its pipeline argument), the result to stdout.
// RUN: morok-opt %s -p 'uop-rangeify,canonicalize,uop-simplify' --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=ALL
// RUN: morok-opt %s -p 'uop-rangeify,canonicalize,uop-simplify' --mlir-print-ir-before=uop-simplify --mlir-print-ir-after=canonicalize,uop-rangeify 2>&1 >/dev/null | FileCheck %s --check-prefix=SOME
// RUN: morok-opt %s -p 'uop-rangeify,func.func(cse)' --mlir-timing 2>&1 >/dev/null | FileCheck %s --check-prefix=TIME
// RUN: not morok-opt %s -p uop-rangeify --mlir-print-ir-after=uop-nothing 2>&1 | FileCheck %s --check-prefix=BAD

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
func.func @f(%a: tensor<4xf32>) -> tensor<1xf32> {
  %0 = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}
