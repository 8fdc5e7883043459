"""Kernel families (ir/families.py): kernels whose texts differ only in integer constants compile as one generic
kernel taking those constants at run time; each member keeps its own spec, entry record and disk cache entry, and
computes what it computes alone."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor
from morok_mlir import realize as rz
from morok_mlir.core.dtype import dtypes
from morok_mlir.ir import families
from morok_mlir.device.cpu import CPU, CPUDevice, ProgramSpec
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels

def copy_scale(n: int, extra: str = "", scale: int | None = None) -> str:
  """A kernel text in the emitter's form: out[i] = in[i] * (float)scale over n elements; the scale constant is the
  loop's bound constant itself where scale is None (one constant in two roles: the emitter's sharing of equal values)."""
  sc = "%1" if scale is None else "%5"
  return (f"module {{\n  func.func @kernel(%arg0: memref<{n}xf32>, %arg1: memref<{n}xf32>) attributes {{passthrough = [\"noinline\"]}} {{\n"
          f"    %0 = arith.constant 0 : index\n    %1 = arith.constant {n} : index\n    %2 = arith.constant 1 : index\n"
          + ("" if scale is None else f"    %5 = arith.constant {scale} : index\n") +
          f"    %6 = arith.index_cast {sc} : index to i32\n    %7 = arith.sitofp %6 : i32 to f32\n"
          f"    scf.for %i3 = %0 to %1 step %2 {{\n      %4 = memref.load %arg0[%i3] : memref<{n}xf32>\n{extra}"
          f"      %8 = arith.mulf %4, %7 : f32\n      memref.store %8, %arg1[%i3] : memref<{n}xf32>\n    }}\n    return\n  }}\n}}\n")

def spec(n: int, src: str) -> ProgramSpec: return ProgramSpec("kernel", src, ((n, dtypes.float32), (n, dtypes.float32)), (1,))

def test_constants_shared_by_coincidence_do_not_split_a_family():
  """n = 100 scaled by 100 (one constant, two roles) and n = 300 scaled by 7 (two constants) are one family; the
  generic takes two parameters, each member's own values."""
  a, b = copy_scale(100), copy_scale(300, scale=7)
  assert families.skeleton(a) == families.skeleton(b)
  text, consts = families.generic([families.canonical(a), families.canonical(b)])
  assert sorted(map(sorted, zip(*consts))) == [[7, 100], [100, 300]]
  assert text.count("%gp") > 2 and "arith.constant 300" not in text and "memref<300xf32>" in text

def test_a_divisor_read_at_run_time_keeps_a_family_apart():
  div = "      %9 = arith.divui %i3, %1 : index\n"
  assert families.generic([families.canonical(copy_scale(n, div, 3)) for n in (100, 300)]) is None
  num = "      %9 = arith.divui %1, %2 : index\n"   # the parameter divided, by a constant: shared
  assert families.generic([families.canonical(copy_scale(n, num, 3)) for n in (100, 300)]) is not None

def test_short_loops_keep_their_counts():
  """A loop bound under families.SHORT stays a constant (LLVM unrolls and folds it), so those kernels stay apart."""
  assert families.skeleton(copy_scale(14, scale=3)) != families.skeleton(copy_scale(28, scale=3))
  assert families.skeleton(copy_scale(140, scale=3)) == families.skeleton(copy_scale(280, scale=3))

def fresh(tmp_path) -> CPUDevice:
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir = True, str(tmp_path)
  return dev

def run(p, n: int, x: np.ndarray) -> np.ndarray:
  out = np.zeros(n, np.float32)
  p(out, x[:n])
  return out

def test_members_run_their_own_sizes_and_load_from_disk(tmp_path):
  """Three sizes JIT-compiled as one generic kernel, each member with its constants; a new device loads each from the
  disk cache (its record names the generic and the constants), compiles nothing, and computes the same."""
  x = np.random.default_rng(0).standard_normal(512).astype(np.float32)
  ns = (96, 200, 512)
  specs = [spec(n, copy_scale(n, scale=s)) for n, s in zip(ns, (3, 5, 9))]
  for attempt in range(2):
    dev = fresh(tmp_path)
    progs = [dev.build(s) for s in specs] if attempt else dev.jit(specs)
    dev.disk.flush()
    assert (dev.disk.misses, dev.disk.hits) == ((3, 0) if attempt == 0 else (0, 3))
    assert [sorted(p.consts) for p in progs] == [[3, 96], [5, 200], [9, 512]] and len({p._symbols[0] for p in progs}) == 1
    for p, n, s in zip(progs, ns, (3, 5, 9)): np.testing.assert_array_equal(run(p, n, x), x[:n] * s)

def matmul_kernel(k: int, r: np.random.Generator):
  a, w = r.standard_normal((32, k), dtype=np.float32), r.standard_normal((k, 96), dtype=np.float32)
  (f,) = [f for f in lower_to_kernels(graph_func(normalize([(Tensor(a) @ Tensor(w)).relu().uop])[0])) if "uop.kernel" in f.attrs]
  return f, a, w

@pytest.mark.parametrize("ks", [(320, 352, 384)])
def test_contractions_differing_in_k_are_one_family(tmp_path, ks):
  """Matrix products that differ only in K (a dense block's 1x1 convolutions) are one family, each computing its own."""
  r = np.random.default_rng(1)
  kernels = [matmul_kernel(k, r) for k in ks]
  dev = fresh(tmp_path)
  progs = dev.compile_many([f for f, _, _ in kernels])
  assert all(p.consts for p in progs) and len({p._symbols[-1] for p in progs}) == 1
  for p, (f, a, w) in zip(progs, kernels):
    ins = {x.size: x.reshape(-1) for x in (a, w)}
    bufs = [np.zeros(n, dt.np) if i in p.spec.outs else ins[n].copy() for i, (n, dt) in enumerate(p.spec.args)]
    p(*bufs)
    np.testing.assert_allclose(bufs[p.spec.outs[0]].reshape(32, 96), np.maximum(a.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)

def test_a_generic_text_mlir_refuses_compiles_each_member_alone(tmp_path, monkeypatch):
  """A generic text that does not parse (a form the text work does not know) costs the sharing, never the kernels."""
  real = families.generic
  monkeypatch.setattr(families, "generic", lambda srcs: (lambda g: (g[0].replace("arith.mulf", "arith.no_such_op"), g[1]))(real(srcs)))
  x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
  progs = fresh(tmp_path).jit([spec(n, copy_scale(n, scale=s)) for n, s in ((100, 3), (300, 5))])
  assert [p.consts for p in progs] == [(), ()]
  for p, n, s in zip(progs, (100, 300), (3, 5)): np.testing.assert_array_equal(run(p, n, x), x[:n] * s)

def test_a_loop_bound_is_known_by_its_own_function():
  """SSA names repeat across a module's functions: a loop bound's name in one says nothing of the same name in another
  (a Winograd kernel's offsets, -29 in one member and 50147 in another, split its family)."""
  def two(v: int) -> str:
    first = copy_scale(14, scale=3).split("\n", 1)[1].rsplit("}", 1)[0]
    return ("module {\n" + first.replace("@kernel", "@kernel_a") +
            "  func.func @kernel_b(%arg0: memref<8xf32>, %arg1: memref<8xf32>, %arg2: memref<8xf32>) {\n    %0 = arith.constant 0 : index\n"
            f"    %1 = arith.constant {v} : index\n    %2 = arith.index_cast %1 : index to i32\n"
            "    %3 = arith.sitofp %2 : i32 to f32\n    memref.store %3, %arg0[%0] : memref<8xf32>\n    return\n  }\n}\n")
  assert "%3 = arith.constant 5 : index" in families.canonical(two(5)).split("@kernel_b")[1]   # the name of kernel_a's loop start
  assert families.skeleton(two(5)) == families.skeleton(two(500))

GRAPHS = [lambda t: (t * 1.5 + 0.25).exp2().sum(1), lambda t: (t.max(1, keepdim=True) - t).relu() * 3,
          lambda t: t.T.contiguous() * t.sum(0, keepdim=True).T]
REFS = [lambda x: np.exp2(x * 1.5 + 0.25).sum(1), lambda x: np.maximum(x.max(1, keepdims=True) - x, 0) * 3,
        lambda x: x.T * x.sum(0, keepdims=True).T]
# what float32 itself may add to each output beyond the 1e-5 tolerances: a column sum of n terms in any order is within
# (n - 1) * 2^-24 * sum(|terms|) of the exact one, which a column that nearly cancels (0.01 from 141 normal draws) shows
ROUNDING = [lambda x: 0, lambda x: 0, lambda x: np.abs(x.T) * ((x.shape[0] - 1) * 2.0 ** -24 * np.abs(x).sum(0, keepdims=True).T)]

@settings(max_examples=12, deadline=None)
@given(g=st.integers(0, len(GRAPHS) - 1), shapes=st.lists(st.tuples(st.integers(1, 160), st.integers(1, 256)), min_size=2, max_size=4, unique=True))
def test_random_sizes_of_one_graph_compute_their_own(g, shapes):
  """One graph at several random sizes, realized together (one compile, kernels of one family where their texts allow):
  each result is numpy's."""
  each_own(g, shapes)

def each_own(g: int, shapes: list) -> int:
  """Realize GRAPHS[g] at shapes together, freshly compiled, each checked against numpy: how many family members."""
  members, real = [], families.units
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(rz, "_schedule_cache", {})
    mp.setattr(CPU.disk, "enabled", False)
    mp.setattr(families, "units", lambda items: (lambda r: (members.append(len(r[1])), r)[1])(real(items)))
    CPU.method_cache.clear()
    xs = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
    outs = [GRAPHS[g](Tensor(x)) for x in xs]
    Tensor.realize(*outs)
  for o, x in zip(outs, xs):
    got, want = o.numpy(), REFS[g](x64 := x.astype(np.float64))
    bad = np.abs(got - want) > 1e-5 + 1e-5 * np.abs(want) + ROUNDING[g](x64)
    assert not bad.any(), f"{bad.sum()} of {bad.size} differ, first at {np.argwhere(bad)[0]}: {got[bad][:3]} against {want[bad][:3]}"
  return sum(members)

@pytest.mark.parametrize("g", range(len(GRAPHS)))
def test_sizes_of_one_graph_are_one_family(g):
  assert each_own(g, [(64, 100), (96, 200), (130, 77)]) >= 2
