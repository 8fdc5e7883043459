// RUN: not morok-opt %s -p uop-nosuch 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not morok-opt %s -p 'nosuch-upstream' 2>&1 | FileCheck %s --check-prefix=UPSTREAM
// RUN: not morok-opt %s -p 'uop-dce{x=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not morok-opt %s -p 'canonicalize{' 2>&1 | FileCheck %s --check-prefix=BRACE
// UNKNOWN: error: unknown pass 'uop-nosuch'
// UPSTREAM: error: upstream pass 'nosuch-upstream': {{.*}}does not refer to a registered pass
// OPTION: error: pass 'uop-dce' has no option 'x'
// BRACE: error: unbalanced brackets
func.func @f() { return }
