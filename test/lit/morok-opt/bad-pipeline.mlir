// RUN: not morok-opt %s -p uop-nosuch 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not morok-opt %s -p 'nosuch-upstream' 2>&1 | FileCheck %s --check-prefix=UPSTREAM
// RUN: not morok-opt %s -p 'uop-dce{x=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not morok-opt %s -p 'canonicalize{' 2>&1 | FileCheck %s --check-prefix=BRACE
// UNKNOWN: error: unknown pass 'uop-nosuch'
// UPSTREAM: error: upstream pass 'nosuch-upstream': {{.*}}does not refer to a registered pass
// OPTION: error: pass 'uop-dce' has no option 'x'
// BRACE: error: unbalanced brackets
func.func @f() { return }
// RUN: not morok-opt %s -p 'func.func(canonicalize{max-iterations=abc})' 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not morok-opt %s -p 'func.func(uop-cse)' 2>&1 | FileCheck %s --check-prefix=NESTED
// VALUE: error: upstream pass 'func.func(canonicalize{max-iterations=abc})': failed to add `canonicalize` with options `max-iterations=abc`
// NESTED: error: upstream pass 'func.func(uop-cse)': {{.*}}'uop-cse' does not refer to a registered pass
