// Inputs that crash or stall MLIR's parser are rejected before it sees them; binary data is not parsed at all.
// RUN: %python -c "print('(' * 1000)" | not morok-opt 2>&1 | FileCheck %s --check-prefix=NEST
// RUN: %python -c "print('!uop.ptr<' * 300)" | not morok-opt 2>&1 | FileCheck %s --check-prefix=NEST
// RUN: %python -c "print('%%0 = \x22uop.const\x22() {value = ' + '9' * 5000 + ' : i64} : () -> i64')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=DIGITS
// RUN: %python -c "import sys; sys.stdout.buffer.write(bytes([0xff, 0xfe, 0x41]))" | not morok-opt 2>&1 | FileCheck %s --check-prefix=UTF8
// RUN: %python -c "import sys; sys.stdout.buffer.write(bytes([0x41, 0]))" | not morok-opt 2>&1 | FileCheck %s --check-prefix=NUL
// RUN: not morok-opt %S/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: morok-opt < /dev/null | FileCheck %s --check-prefix=EMPTY
// NEST: <stdin>:1:{{[0-9]+}}: error: nesting deeper than 256 levels
// DIGITS: <stdin>:1:29: error: number literal of 5000 characters (at most 4096)
// UTF8: <stdin>: error: input is not UTF-8 text (byte 0)
// NUL: <stdin>: error: input contains NUL bytes
// MISSING: morok-opt: error: cannot read {{.*}}does-not-exist.mlir
// EMPTY: module {
// EMPTY-NEXT: }
