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

// Constructs that crash MLIR's parser (a signal or an abort) or take it quadratic time, and aliases that print
// exponentially: each is refused with its position (cli.check_input; the limits are measured in cli.py).
// RUN: %python -c "print('%%0 = \x22uop.const\x22() {value = 0x' + 'f' * 10**6 + ' : i64} : () -> i64')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=HEX
// RUN: %python -c "print('#m = affine_map<(d0) -> (' + '-' * 50000 + 'd0)>')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=AFFINE
// RUN: %python -c "print('func.func @f(%%m: memref<4xf32>, %%i: index) {\n  %%0 = affine.load %%m[%%i' + ' floordiv 2' * 300000 + '] : memref<4xf32>\n  return\n}')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=AFFOP
// RUN: %python -c "print('!t = tensor<' + '1x' * 100000 + 'f32>')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: %python -c "print('%%0 = \x22uop.const\x22() {value = 1 : i64, x = dense<[' + '1, ' * 999 + '1]> : tensor<1000xi16777215>} : () -> i64')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: %python -c "print('#a0 = 1 : i64\n' + ''.join(f'#a{i + 1} = [#a{i}, #a{i}]\n' for i in range(30)) + '%%0 = \x22uop.const\x22() {value = 1 : i64, x = #a30} : () -> i64')" | not morok-opt 2>&1 | FileCheck %s --check-prefix=ALIAS
// RUN: not morok-opt /dev/zero 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not morok-opt -p 2>&1 | FileCheck %s --check-prefix=ARGS
// HEX: <stdin>:1:29: error: hexadecimal literal of 1000000 digits (at most 4096)
// AFFINE: <stdin>:1:6: error: affine map longer than 1024 tokens
// AFFOP: <stdin>:2:8: error: affine expression longer than 1024 tokens
// RANK: <stdin>:1:13: error: shape with more than 256 dimensions
// WIDE: <stdin>:1:3064: error: integer type i16777215 is wider than 256 bits
// ALIAS: <stdin>:23:1: error: alias #a22 prints as at least {{[0-9]+}} characters (at most 64 MiB)
// SIZE: /dev/zero: error: input larger than 64 MiB
// ARGS: morok-opt: error: argument -p/--pass-pipeline: expected one argument
