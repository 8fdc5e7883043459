"""Joining, splitting and layout ops (cat, stack, split, chunk, repeat, repeat_interleave, roll, pad_to, unfold, meshgrid,
diag, diagonal, tril, triu, pad modes), differential against numpy; every one a composition of movement ops."""
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops
from morok_mlir.realize import GlobalCounters

DTS = [dtypes.int32, dtypes.float32]
def data(shape, dt, seed=0):
  r = np.random.default_rng(seed)
  if dt.is_bool: return r.random(shape) < 0.5
  return r.integers(-50, 50, shape).astype(dt.np) if dt.is_int else r.standard_normal(shape).astype(dt.np)
def check(t, ref):
  out, ref = t.numpy(), np.asarray(ref)
  assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype, ref.dtype)
  np.testing.assert_array_equal(out, ref)   # movement only: bit-exact
def raises_here(exc, fn, match=None):
  """fn is a one-line lambda: the error must name this test file and the lambda's line."""
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)
def views(a):
  """a as given and as a non-contiguous view (the transpose of a's transpose)."""
  return [(Tensor(a), a), (Tensor(np.ascontiguousarray(a.T)).T, a)] if a.ndim == 2 else [(Tensor(a), a)]

# ---------------------------------------------------------------- cat, stack
@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat(dt, dim):
  shapes = [(3, 4), (3, 4), (3, 4)]
  shapes = [tuple(n if i != dim % 2 else k for i, n in enumerate(s)) for s, k in zip(shapes, (2, 0, 1))]
  arrs = [data(s, dt, i) for i, s in enumerate(shapes)]
  (x, a), = views(arrs[0])[1:]   # a transposed view first
  check(x.cat(*[Tensor(b) for b in arrs[1:]], dim=dim), np.concatenate(arrs, dim))
  check(Tensor.cat([Tensor(b) for b in arrs], dim=dim), np.concatenate(arrs, dim))

def test_cat_edge_cases():
  check(Tensor(np.float32([-0.0, np.nan])).cat(Tensor(np.float32([np.inf, -0.0]))), np.float32([-0.0, np.nan, np.inf, -0.0]))
  check(Tensor(np.int32([1, 2])).cat(Tensor(np.float32([0.5]))), np.float32([1, 2, 0.5]))   # promoted as torch.cat
  check(Tensor(np.zeros((0, 3), np.int32)).cat(Tensor(np.zeros((0, 3), np.int32))), np.zeros((0, 3), np.int32))
  check(Tensor(np.int32([[1], [2]])).cat(dim=1), np.int32([[1], [2]]))

def test_cat_is_one_kernel():
  arrs = [data((4, 3 + i), dtypes.float32, i) for i in range(5)]
  ts = [Tensor(a) for a in arrs]
  GlobalCounters.reset()
  out = ts[0].cat(*ts[1:], dim=1).numpy()
  assert GlobalCounters.kernel_count == 1
  np.testing.assert_array_equal(out, np.concatenate(arrs, 1))

@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dt, dim):
  arrs = [data((2, 3), dt, i) for i in range(3)]
  check(Tensor.stack(*[Tensor(a) for a in arrs], dim=dim), np.stack(arrs, dim))
  check(Tensor(arrs[0]).stack(dim=dim), np.stack(arrs[:1], dim))

def test_stack_0d():
  check(Tensor.stack([Tensor(np.int32(1)), Tensor(np.int32(2))]), np.int32([1, 2]))

# ---------------------------------------------------------------- split, chunk
def torch_split(a, sizes, dim):
  """PyTorch's split as numpy's split at the running offsets."""
  n = a.shape[dim]
  sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if isinstance(sizes, int) else sizes
  return np.split(a, np.cumsum(sizes)[:-1], dim) if n else [a]

@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("sizes,dim", [(2, 0), (3, 1), (4, -1), (7, 1), (1, 0), ([1, 0, 3], 0), ([4], -2), ([2, 2], 1)])
def test_split(dt, sizes, dim):
  a = data((4, 7) if sizes != [2, 2] else (4, 4), dt)
  for x, ref in views(a):
    outs = x.split(sizes, dim)
    assert isinstance(outs, tuple) and len(outs) == len(refs := torch_split(ref, sizes, dim))
    for o, r in zip(outs, refs): check(o, r)

@pytest.mark.parametrize("n,chunks", [(6, 3), (7, 3), (5, 4), (3, 5), (0, 2), (1, 1)])
def test_chunk(n, chunks):
  a = data((n, 2), dtypes.int32)
  outs = Tensor(a).chunk(chunks, 0)
  step = -(-n // chunks) if n else 0
  refs = [a[i:i + step] for i in range(0, n, step)] if n else [a] * chunks   # PyTorch: ceil-sized pieces, maybe fewer
  assert [o.shape for o in outs] == [r.shape for r in refs]
  for o, r in zip(outs, refs): check(o, r)

# ---------------------------------------------------------------- repeat, repeat_interleave, roll
@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 2)), ((2, 3), (1, 3, 1)), ((3,), (2, 1, 2)), ((), (3,)), ((2, 3), (0, 2)), ((0, 2), (2, 2))])
def test_repeat(dt, shape, reps):
  for x, a in views(data(shape, dt)): check(x.repeat(*reps), np.tile(a, reps))
  check(Tensor(data(shape, dt)).repeat(reps), np.tile(data(shape, dt), reps))

@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("reps,dim", [(2, 0), (3, 1), (2, -1), (1, None), (3, None), (0, 1)])
def test_repeat_interleave(dt, reps, dim):
  for x, a in views(data((2, 3), dt)): check(x.repeat_interleave(reps, dim), np.repeat(a, reps, dim))

@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), (7, -1), ((1, 2), (0, 1)), ((1, 1), (1, 1)), (3, None), (-13, None), (0, 0), (4, 1)])
def test_roll(dt, shifts, dims):
  for x, a in views(data((3, 4), dt)): check(x.roll(shifts, dims), np.roll(a, shifts, dims))

def test_roll_edge_cases():
  check(Tensor(np.zeros((0, 3), np.float32)).roll(2, 0), np.zeros((0, 3), np.float32))
  check(Tensor(np.int32(5)).roll(3), np.int32(5))

# ---------------------------------------------------------------- pad modes, pad_to
NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("mode", list(NP_MODE))
@pytest.mark.parametrize("pads", [((1, 2), (2, 0)), ((0, 0), (3, 3)), ((2, 2), (0, 1))])
def test_pad_modes(dt, mode, pads):
  for x, a in views(data((3, 4), dt)): check(x.pad(pads, mode=mode), np.pad(a, pads, mode=NP_MODE[mode]))
  flat = (pads[1][0], pads[1][1], pads[0][0], pads[0][1])   # PyTorch's flat form: last dim first
  check(Tensor(data((3, 4), dt)).pad(flat, mode), np.pad(data((3, 4), dt), pads, mode=NP_MODE[mode]))

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_edge_cases(mode):
  a = data((1, 3, 4), dtypes.float32)
  check(Tensor(a).pad((1, 1), mode), np.pad(a, ((0, 0), (0, 0), (1, 1)), NP_MODE[mode]))        # pads only the last dim
  check(Tensor(a).pad(((0, 0), (-1, 1), (1, 0)), mode), np.pad(a[:, 1:], ((0, 0), (0, 1), (1, 0)), NP_MODE[mode]))  # negative cuts first
  if mode != "reflect": check(Tensor(a[0, 0]).pad((4, 0), mode), np.pad(a[0, 0], (4, 0), NP_MODE[mode]))   # pad == size
  check(Tensor(np.zeros((0, 2), np.float32)).pad((1, 1), mode), np.zeros((0, 4), np.float32))   # empty, padded where it has data
  check(Tensor(a).pad((0, 0), mode), a)

def test_pad_mode_errors():
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  raises_here(ValueError, lambda: x.pad((0, 0, 3, 0), "reflect"), "less than the corresponding input dimension")
  raises_here(ValueError, lambda: x.pad((4, 0), "reflect"))
  raises_here(ValueError, lambda: x.pad((5, 0), "circular"), "more than once")
  raises_here(ValueError, lambda: Tensor(np.zeros((0, 2), np.float32)).pad((0, 0, 1, 0), "replicate"), "empty")
  raises_here(NotImplementedError, lambda: x.pad((1, 1), "symmetric"), "not supported")

@pytest.mark.parametrize("dt", DTS, ids=str)
def test_pad_to(dt):
  a = data((2, 3), dt)
  ref = np.zeros((4, 5), dt.np); ref[:2, :3] = a
  for x, _ in views(a):
    check(x.pad_to(4, 5), ref)
    check(x.pad_to((None, 5)), ref[:2])

# ---------------------------------------------------------------- unfold, meshgrid
def windows(a, dim, size, step):
  """PyTorch's unfold: numpy's sliding windows (window as the last axis), every step-th kept."""
  dim = dim % a.ndim
  return np.lib.stride_tricks.sliding_window_view(a, size, dim).take(range(0, a.shape[dim] - size + 1, step), dim)

@pytest.mark.parametrize("dt", DTS, ids=str)
@pytest.mark.parametrize("dim,size,step", [(0, 2, 1), (1, 3, 2), (-1, 5, 1), (1, 1, 3), (0, 3, 5), (1, 2, 4)])
def test_unfold(dt, dim, size, step):
  for x, a in views(data((3, 5), dt)): check(x.unfold(dim, size, step), windows(a, dim, size, step))

def test_unfold_edge_cases():
  check(Tensor(np.arange(5, dtype=np.int32)).unfold(0, 0, 2), np.zeros((3, 0), np.int32))
  check(Tensor(np.int32(7)).unfold(0, 1, 1), np.int32([7]))
  a = data((2, 4, 3), dtypes.float32)
  check(Tensor(a).unfold(1, 2, 2), windows(a, 1, 2, 2))

@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(dt, indexing):
  arrs = [data((n,), dt, n) for n in (2, 3, 4)]
  for k in (1, 2, 3):
    outs = Tensor(arrs[0]).meshgrid(*[Tensor(a) for a in arrs[1:k]], indexing=indexing)
    refs = np.meshgrid(*arrs[:k], indexing=indexing)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs): check(o, r)
  outs = Tensor.meshgrid([Tensor(np.int32(3)), Tensor(arrs[1])], indexing=indexing)   # 0-d inputs count as size 1
  for o, r in zip(outs, np.meshgrid(np.int32([3]), arrs[1], indexing=indexing)): check(o, r)

# ---------------------------------------------------------------- diag, diagonal, tril, triu
@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
def test_diag_diagonal(dt):
  for n in (0, 1, 4):
    v = data((n,), dt)
    check(Tensor(v).diag(), np.diag(v))
    check(Tensor(v[::-1].copy()).flip(0).diag(), np.diag(v))
  for shape in ((3, 3), (2, 5), (5, 2), (0, 3), (1, 1)):
    for x, a in views(data(shape, dt)):
      check(x.diagonal(), np.diagonal(a))
      check(x.diag(), np.diag(a))

@pytest.mark.parametrize("dt", DTS + [dtypes.bool], ids=str)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 4), (0, 3), (1, 1)])
def test_tril_triu(dt, shape):
  a = data(shape, dt)
  for k in (-6, -1, 0, 1, 2, 6):
    check(Tensor(a).tril(k), np.tril(a, k))
    check(Tensor(a).triu(k), np.triu(a, k))
  if len(shape) == 2: check(Tensor(np.ascontiguousarray(a.T)).T.tril(), np.tril(a))

# ---------------------------------------------------------------- flip and permute edge cases
def test_flip_permute_edge_cases():
  a = data((2, 3, 4), dtypes.int32)
  check(Tensor(a).flip(-1, 0), np.flip(a, (-1, 0)))
  check(Tensor(a).permute(-1, 0, -2), a.transpose(2, 0, 1))
  check(Tensor(np.int32(3)).flip(0), np.int32(3))
  check(Tensor(np.int32(3)).permute(()), np.int32(3))
  check(Tensor(np.zeros((0, 3), np.float32)).flip(0, 1).permute(1, 0), np.zeros((3, 0), np.float32))
  check(Tensor(a).T.flip(1), np.flip(a.T, 1))
  raises_here(ValueError, lambda: Tensor(a).flip(0, -3), "multiple times")
  raises_here(IndexError, lambda: Tensor(np.int32(3)).flip(1), "out of range")
  raises_here(ValueError, lambda: Tensor(a).permute(0, 1, -2), "permutation")

# ---------------------------------------------------------------- errors name the user's line
def test_errors_name_the_line():
  a, b = Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros((3, 3), np.float32))
  raises_here(ValueError, lambda: a.cat(b, dim=1), "must match except in dimension 1")
  raises_here(ValueError, lambda: a.cat(Tensor(np.zeros(3, np.float32))), "same number of dimensions")
  raises_here(IndexError, lambda: a.cat(b, dim=2), "out of range")
  raises_here(TypeError, lambda: Tensor.cat([]), "non-empty")
  raises_here(IndexError, lambda: Tensor(1.0).cat(Tensor(2.0)), "0-d")   # dim 0 is out of range for a 0-d tensor
  raises_here(ValueError, lambda: a.stack(b), "equal size")
  raises_here(ValueError, lambda: a.split([1, 1], 1), "sum exactly to 3")
  raises_here(ValueError, lambda: a.split(0, 1), "positive")
  raises_here(ValueError, lambda: a.chunk(0), "positive")
  raises_here(ValueError, lambda: a.repeat(2), "can not be smaller")
  raises_here(ValueError, lambda: a.repeat(1, -1), "negative")
  raises_here(ValueError, lambda: a.repeat_interleave(-1), "negative")
  raises_here(ValueError, lambda: a.roll((1, 2), 0), "align")
  raises_here(ValueError, lambda: a.pad_to(1, 3), "smaller")
  raises_here(ValueError, lambda: a.unfold(1, 4, 1), "maximum size")
  raises_here(ValueError, lambda: a.unfold(1, 2, 0), "step")
  raises_here(ValueError, lambda: a.meshgrid(b), "0-d or 1-d")
  raises_here(ValueError, lambda: a.meshgrid(indexing="yx"), "indexing")
  raises_here(ValueError, lambda: Tensor(np.zeros((2, 2, 2))).diag(), "1-d or 2-d")
  raises_here(ValueError, lambda: Tensor(np.zeros(2)).diagonal(), "2-d")
  raises_here(ValueError, lambda: Tensor(np.zeros(2)).tril(), "at least 2 dims")
  raises_here(TypeError, lambda: a.triu(0.5), "diagonal must be an int")

def test_symbolic_sizes_are_refused_where_needed():
  from morok_mlir.core.uop import Variable
  n = Variable("n", 1, 8).bind(3)
  x = Tensor(np.zeros((3, 4), np.float32)).reshape(n, 4)
  assert x.cat(x, dim=1).shape == (n, 8) and x.repeat(1, 2).shape == (n, 8)   # static along the joined dim: fine
  assert x.cat(x, dim=0).numpy().shape == (6, 4)   # along a symbolic dim: padding by a bound size (test_symbolic_shapes.py)
  raises_here(TypeError, lambda: x.split(1, 0), "symbolic")
  np.testing.assert_array_equal(x.tril().numpy(), np.zeros((3, 4), np.float32))   # a mask of aranges (test_symbolic_shapes.py)
  raises_here(TypeError, lambda: x.uop.tril(), "static sizes")

# ---------------------------------------------------------------- the same graph built on UOps
def test_uop_builds_the_same_graph():
  x, y = Tensor(data((3, 4), dtypes.float32)), Tensor(data((2, 4), dtypes.float32))
  calls = [lambda x, y: x.cat(y, x, dim=0), lambda x, y: x.stack(x, dim=1), lambda x, y: x.tril(1), lambda x, y: x.pad((2, 1), "reflect"),
           lambda x, y: x.roll(1, 1), lambda x, y: x.unfold(1, 2, 1), lambda x, y: x.diagonal(), lambda x, y: x.repeat(2, 1)]
  for f in calls:
    t, u = f(x, y), f(x.uop, y.uop)
    assert isinstance(u, UOp) and u is t.uop

def _split_dims(shape, rng):
  """A shape with the same elements in row-major order: dims merged, split into factors, 1s added or dropped."""
  out = []
  for d in shape:
    if d > 1 and rng.random() < 0.4 and (fs := [f for f in range(2, d) if d % f == 0]): f = int(rng.choice(fs)); out += [f, d // f]
    elif d != 1 or rng.random() < 0.5: out.append(d)
    if rng.random() < 0.2: out.append(1)
  if len(out) > 1 and rng.random() < 0.4: k = int(rng.integers(0, len(out) - 1)); out[k:k + 2] = [out[k] * out[k + 1]]
  return tuple(out)

@pytest.mark.parametrize("seed", range(40))
def test_reshape_of_padded_and_concatenated(seed):
  """Reshapes over a pad (an index defined under a gate) and a cat, dims merged, split, 1s added and dropped, then
  reduced and permuted: against numpy."""
  rng = np.random.default_rng(seed)
  shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 5)))
  a = rng.standard_normal(shape).astype(np.float32)
  pads = tuple((int(rng.integers(-1 if d > 2 else 0, 3)), int(rng.integers(0, 3))) for d in shape)
  t, n = Tensor(a).pad(pads), np.pad(a[tuple(slice(max(-lo, 0), None) for lo, _ in pads)], [(max(lo, 0), hi) for lo, hi in pads])
  if rng.random() < 0.5:
    ax = int(rng.integers(0, len(shape)))
    t, n = Tensor.cat(t, t * 2, dim=ax), np.concatenate([n, n * 2], ax)
  for _ in range(2):
    new = _split_dims(n.shape, rng)
    t, n = t.reshape(new), n.reshape(new)
  np.testing.assert_array_equal(t.numpy(), n)
  if n.ndim > 1: np.testing.assert_allclose(t.sum(0).permute(*reversed(range(n.ndim - 1))).numpy(), n.sum(0).T, rtol=1e-5, atol=1e-5)

def _divs(t: Tensor) -> int:
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.passes.pipeline import lower_to_kernels
  return sum(u.op in (Ops.IDIV, Ops.MOD) for f in lower_to_kernels(graph_func(normalize([t.lazydata])[0])) for r in f.roots for u in r.toposort)

@pytest.mark.parametrize("shape,new,pad", [((16, 25), (1, 16, 5, 5), ((0, 0), (0, 0), (1, 1), (1, 1))),
                                           ((16, 5, 5), (1, 16, 1, 5, 5), ((0, 0), (2, 0), (0, 0), (1, 1), (1, 1))),
                                           ((2, 3, 4), (2, 12), ((0, 0), (1, 1))),   # a merge: values only
                                           ((0, 3), (3, 0, 1), ((1, 0), (0, 0), (0, 0)))])
def test_reshape_keeps_index_math_affine(shape, new, pad):
  """A reshape of a computed value (a reduce: stored, then read through the reshape) passes the index of each dim it
  keeps through and merges split dims without a flat index: under a pad (its index i - lo, defined under a gate) it
  needs no division or modulo, which would hide the offset from the affine folding and cost a division per element."""
  a = np.arange(int(np.prod(shape)) * 3, dtype=np.float32).reshape(*shape, 3) / 7
  t = Tensor(a).sum(-1).reshape(new).pad(pad) * 2
  assert _divs(t) == 0 or shape == (2, 3, 4)   # before realizing: t is a buffer after
  np.testing.assert_allclose(t.numpy(), np.pad(a.sum(-1).reshape(new), pad) * 2, rtol=1e-6)

def test_conv_of_padded_conv_has_affine_index_math():
  """The input of a padded 3x3 conv is a 1x1 conv's output (squeezenet's fire module): read without division or modulo."""
  x, w1, w3 = np.arange(48 * 25, dtype=np.float32) / 100, np.ones((16, 48, 1, 1), np.float32) / 48, np.ones((4, 16, 3, 3), np.float32)
  t = Tensor(x).reshape(1, 48, 5, 5).conv2d(Tensor(w1)).relu().pad(((0, 0), (0, 0), (1, 1), (1, 1))).conv2d(Tensor(w3))
  h = np.pad(np.maximum(np.einsum("nchw,oc->nohw", x.reshape(1, 48, 5, 5).astype(np.float64), w1[:, :, 0, 0]), 0), ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = np.stack([h[0, :, i:i + 3, j:j + 3].sum() * np.ones(4) for i in range(5) for j in range(5)]).T.reshape(1, 4, 5, 5)
  assert _divs(t) == 0
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5)
