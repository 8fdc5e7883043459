"""A SIMT interpreter of GPU kernels: the `gpu.func` uop-lower-gpu writes (the text ptxas gets, parsed by MLIR), every
thread of a block in lock step as numpy arrays over its threads, with the semantics the hardware gives what threads share:

- shared memory (workgroup attributions) starts as NaN (garbage), per block; every access is checked for a race: a
  thread reading an element another thread wrote, or writing one another thread read or wrote, since the last
  `gpu.barrier`, raises RaceError (so a missing barrier fails, whatever order real warps would have run in);
- `gpu.barrier` only where every thread of the block is active (else RaceError: a barrier in divergent code);
- `cp.async` (nvgpu.device_async_copy): the source is read at issue, the bytes land in shared memory only when a
  `cp.async.wait_group N` (nvgpu.device_async_wait) completes the thread's group (all but its N newest committed
  groups): until then the destination is in flight, and any access to it is a race; elements past `srcElements` are 0;
- `mma.sync` (nvvm.mma.sync, m16n8k16 f16/bf16 and m16n8k8 tf32, row x col, f32 accumulators): the whole warp takes
  part; each lane's registers are placed in the matrices by the fragment layouts of the PTX ISA (written out in `frag`
  from its text), the product computed in f32 (f16 and bf16 products are exact in f32; tf32 keeps 10 mantissa bits of
  each f32 operand, the bits the hardware reads), the accumulators handed back by the same layout;
- `ldmatrix` (nvgpu.ldmatrix, .x1/.x2/.x4, .trans): the whole warp takes part, lanes 8j..8j+7 giving matrix j's rows;
- loads and stores of global memory are bounds-checked (IndexError), out of the inactive threads' way.

  run(text, bufs, blocks, threads)   run the module's one kernel over blocks x threads on numpy arrays (updated in place)
  Program(spec).call_ptrs(*addrs)   a CUDA ProgramSpec's kernel on buffers at host addresses (what the fake driver runs)"""
from __future__ import annotations
import ctypes
from math import prod
import numpy as np

class RaceError(RuntimeError):
  """Threads of a block touched shared memory without the barrier or wait that orders them."""

NP = {"index": np.int64, "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "i1": np.bool_, "f16": np.float16,
      "f32": np.float32, "f64": np.float64, "bf16": np.float32}   # bf16 values are held as the f32 they are exactly
CMPI = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
        6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}   # (unsigned: index math here is never negative)
_ORDERED = (None, np.equal, np.greater, np.greater_equal, np.less, np.less_equal, lambda a, b: (a != b) & (a == a) & (b == b))
CMPF = {0: lambda a, b: np.zeros(a.shape, bool), 15: lambda a, b: np.ones(a.shape, bool), 7: lambda a, b: (a == a) & (b == b),
        14: lambda a, b: (a != a) | (b != b), 13: np.not_equal,   # (numpy's comparisons are the ordered ones; != the unordered)
        **{p: f for p, f in enumerate(_ORDERED) if f},
        **{p + 7: (lambda f: lambda a, b: f(a, b) | (a != a) | (b != b))(f) for p, f in enumerate(_ORDERED[:6]) if f}}
BINARY = {"addi": np.add, "subi": np.subtract, "muli": np.multiply, "divui": np.floor_divide, "remui": np.remainder,
          "divsi": lambda a, b: np.trunc(a / b).astype(a.dtype), "andi": np.bitwise_and, "ori": np.bitwise_or, "xori": np.bitwise_xor,
          "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide, "maximumf": np.maximum, "minimumf": np.minimum,
          "maxsi": np.maximum, "minsi": np.minimum, "maxui": np.maximum, "minui": np.minimum}

def bf16_bits(x: np.ndarray) -> np.ndarray:
  """f32 -> bf16 bits, rounded to nearest even."""
  b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
def bf16_value(bits: np.ndarray) -> np.ndarray: return (np.asarray(bits, np.uint32) << 16).view(np.float32)

def frag(shape_k: int, ptx: str):
  """The PTX ISA's fragment layouts of mma.m16n8k16 (.f16/.bf16) and mma.m16n8k8 (.tf32), per lane l (groupID = l >> 2,
  threadID_in_group = l % 4): (row, col) of A element i, (row, col) of B element i, (row, col) of C/D element i."""
  g, t = np.arange(32) >> 2, np.arange(32) % 4
  if shape_k == 16:
    a = [(g + 8 * ((i % 4) >= 2), t * 2 + (i & 1) + 8 * (i >= 4)) for i in range(8)]   # a0,a1,a4,a5: groupID; col +8 from a4
    b = [(t * 2 + (i & 1) + 8 * (i >= 2), g) for i in range(4)]
  else:
    a = [(g + 8 * (i % 2), t + 4 * (i >= 2)) for i in range(4)]                    # a0,a2: groupID; a2,a3: threadID + 4
    b = [(t + 4 * i, g) for i in range(2)]
  c = [(g + 8 * (i >= 2), t * 2 + (i & 1)) for i in range(4)]
  return a, b, c

class Op:
  __slots__ = ("name", "ins", "outs", "types", "in_types", "attrs", "regions")
  def __init__(self, op, ids):
    o = op.operation
    self.name, self.attrs = o.name, {k: str(v) for k, v in o.attributes.items()}
    if self.name == "arith.constant":   # its value, read once
      from mlir import ir
      a = o.attributes["value"]
      self.attrs["value"] = ir.FloatAttr(a).value if str(o.results[0].type) in ("f16", "bf16", "f32", "f64") else ir.IntegerAttr(a).value
    self.ins, self.outs = [ids(v) for v in o.operands], [ids(v) for v in o.results]
    self.types, self.in_types = [str(v.type) for v in o.results], [str(v.type) for v in o.operands]
    self.regions = [[([ids(a) for a in b.arguments], [Op(x, ids) for x in b.operations]) for b in r.blocks][0] for r in o.regions if len(r.blocks)]

class Shared:
  """A block's shared array and what the race checks know of each element: the epoch (barriers passed) and thread of
  its last write and reads (-2: several threads), the thread whose cp.async to it is in flight (-1: none)."""
  def __init__(self, shape, dt):
    self.a = np.full(shape, np.nan, dt).reshape(-1)
    n = self.a.size
    self.we, self.wt, self.re, self.rt, self.pend = (np.full(n, -1, np.int64) for _ in range(5))
    self.shape = shape

class Kernel:
  """One gpu.func, parsed once: run(bufs, blocks, threads)."""
  def __init__(self, text: str):
    from mlir import ir
    with ir.Context() as self.ctx:
      self.mod = mod = ir.Module.parse(text)
      funcs = [f for g in mod.body.operations if g.operation.name == "gpu.module" for f in g.regions[0].blocks[0].operations
               if f.operation.name == "gpu.func"]
      if len(funcs) != 1: raise ValueError(f"expected one gpu.func, found {len(funcs)}")
      self.ids: dict = {}
      ids = lambda v: self.ids.setdefault(v, len(self.ids))
      body = funcs[0].regions[0].blocks[0]
      self.args = [ids(a) for a in body.arguments]
      self.arg_types = [str(a.type) for a in body.arguments]
      self.ops = [Op(x, ids) for x in body.operations]

  def run(self, bufs: list[np.ndarray], blocks: int, threads: int):
    bufs, n = [b.view(np.uint16) if b.dtype.name == "bfloat16" else b for b in bufs], len(bufs)   # bf16: its bits
    for blk in range(blocks):
      env = {a: b for a, b in zip(self.args, bufs)}
      for a, t in zip(self.args[n:], self.arg_types[n:]):   # workgroup attributions
        dims, et = shape_of(t)
        env[a] = Shared(dims, NP[et])
      self.T, self.block, self.epoch, self.env = threads, blk, 0, env
      self.tid = np.arange(threads, dtype=np.int64)
      self.copies, self.ngroups = [], np.zeros(threads, np.int64)   # cp.asyncs in flight, groups each thread committed
      self.exec(self.ops, np.ones(threads, bool))

  def exec(self, ops: list[Op], mask: np.ndarray):
    for op in ops:
      if op.name in ("scf.yield", "gpu.return"): return [self.env[i] for i in op.ins]
      out = RUN[op.name](self, op, mask, [self.env[i] for i in op.ins]) if op.name in RUN else unsupported(op)
      if op.outs: self.env.update(zip(op.outs, out if isinstance(out, list) else [out]))
    return []

INTRINSICS = {"sqrt": np.sqrt, "fabs": np.abs, "exp2": np.exp2, "log2": np.log2}   # llvm.<name>.<type>
def unsupported(op: Op): raise NotImplementedError(f"the SIMT emulator does not run {op.name}")

def shape_of(t: str) -> tuple[tuple[int, ...], str]:
  """memref<2x64x40xf16, ...> -> ((2, 64, 40), 'f16')."""
  body = t[t.index("<") + 1:].split(",")[0].rstrip(">").split("x")
  return tuple(int(d) for d in body[:-1]), body[-1]

def full(k: Kernel, v, ty: str) -> np.ndarray: return np.full(k.T, v, NP[ty])

def flat(shape, idx: list[np.ndarray]) -> np.ndarray:
  out = np.zeros_like(idx[0])
  for d, i in zip(shape, idx): out = out * d + i
  return out

def check(sh: Shared, k: Kernel, x: np.ndarray, lanes: np.ndarray, write: bool):
  """The race rules (module docstring) for lanes accessing elements x of sh now; records the access."""
  e, what = k.epoch, None
  if np.any(sh.pend[x] >= 0): what = "an element whose cp.async is in flight (no wait_group before it)"
  elif np.any((sh.we[x] == e) & (sh.wt[x] != lanes)): what = "an element another thread wrote since the last barrier"
  elif write and np.any((sh.re[x] == e) & (sh.rt[x] != lanes)): what = "an element another thread read since the last barrier"
  elif write and len(np.unique(x)) < len(x): what = "one element from several threads at once"
  if what: raise RaceError(f"block {k.block}, threads {sorted(set(lanes.tolist()))[:4]}...: {'write to' if write else 'read of'} {what}")
  if write: sh.we[x], sh.wt[x] = e, lanes
  else:
    rt = np.where((sh.re[x] == e) & (sh.rt[x] != lanes), -2, lanes)
    sh.re[x], sh.rt[x] = e, rt
    u, c = np.unique(x, return_counts=True)
    sh.rt[u[c > 1]] = -2

def load(k: Kernel, op: Op, mask, ins, width: int = 1):
  m, idx = ins[0], [np.where(mask, i, 0) for i in ins[1:]]
  lanes = k.tid[mask]
  if isinstance(m, Shared):
    x = flat(m.shape, idx)
    xs = np.stack([x + j for j in range(width)], -1)
    check(m, k, xs[mask].reshape(-1), np.repeat(lanes, width), False)
    v = m.a[xs]
  else:
    x = idx[0]
    if np.any(x[mask] + width > m.size) or np.any(x[mask] < 0): raise IndexError(f"{op.name} past a buffer of {m.size} (block {k.block})")
    v = m[np.stack([x + j for j in range(width)], -1)]
    if m.dtype == np.uint16 and op.types[0].endswith("bf16>") or op.types[0] == "bf16": v = bf16_value(v)
  return v if width > 1 else v[:, 0]

def store(k: Kernel, op: Op, mask, ins):
  v, m, idx = ins[0], ins[1], [i[mask] for i in ins[2:]]
  if isinstance(m, Shared):
    x = flat(m.shape, idx)
    check(m, k, x, k.tid[mask], True)
    m.a[x] = v[mask]
  else:
    if np.any(idx[0] >= m.size) or np.any(idx[0] < 0): raise IndexError(f"a store past a buffer of {m.size} (block {k.block})")
    m[idx[0]] = bf16_bits(v[mask]) if m.dtype == np.uint16 and v.dtype == np.float32 else v[mask]

def segments(op: Op) -> list[int]: return [int(s) for s in op.attrs["operandSegmentSizes"].split(":")[1].rstrip(">").split(",")]

class Copies:
  """cp.asyncs in flight: each thread's copies of one op (destination elements, values), and the group each thread
  committed them in (-1: not committed yet)."""
  def __init__(self, dst: Shared, xs, v, lanes):
    self.dst, self.xs, self.v, self.lanes, self.gid = dst, xs, v, lanes, np.full(len(lanes), -1)

def async_copy(k: Kernel, op: Op, mask, ins):
  seg = segments(op)
  dst, didx, src, sidx = ins[0], ins[1:1 + seg[1]], ins[1 + seg[1]], ins[2 + seg[1]]
  n, lanes = int(op.attrs["dstElements"].split(":")[0]), k.tid[mask]
  valid = (ins[3 + seg[1]] if seg[4] else np.full(k.T, n))[mask]
  xs = flat(dst.shape, [i[mask] for i in didx])[:, None] + np.arange(n)
  check(dst, k, xs.reshape(-1), np.repeat(lanes, n), True)
  at, ok = sidx[mask][:, None] + np.arange(n), np.arange(n) < valid[:, None]
  if np.any(ok & ((at < 0) | (at >= src.size))): raise IndexError(f"cp.async past a buffer of {src.size} (block {k.block})")
  v = np.where(ok, src[np.where(ok, at, 0)], 0)
  dst.pend[xs] = lanes[:, None]
  k.copies.append(Copies(dst, xs, bf16_value(v) if src.dtype == np.uint16 else v, lanes))
  return np.zeros(k.T)

def async_group(k: Kernel, op: Op, mask, ins):
  for c in k.copies:
    new = mask[c.lanes] & (c.gid < 0)
    c.gid[new] = k.ngroups[c.lanes[new]]
  k.ngroups[mask] += 1
  return np.zeros(k.T)

def async_wait(k: Kernel, op: Op, mask, ins):
  """cp.async.wait_group N: each thread's groups but its N newest land."""
  keep = int(op.attrs["numGroups"].split(":")[0])
  for c in k.copies:
    done = mask[c.lanes] & (c.gid >= 0) & (c.gid < k.ngroups[c.lanes] - keep)
    xs = c.xs[done]
    c.dst.a[xs], c.dst.pend[xs], c.dst.we[xs], c.dst.wt[xs] = c.v[done], -1, k.epoch, c.lanes[done][:, None]
    c.xs, c.v, c.lanes, c.gid = c.xs[~done], c.v[~done], c.lanes[~done], c.gid[~done]
  k.copies = [c for c in k.copies if len(c.lanes)]

def barrier(k: Kernel, op: Op, mask, ins):
  if not mask.all(): raise RaceError(f"block {k.block}: a barrier reached by {int(mask.sum())} of {k.T} threads")
  k.epoch += 1

def mma(k: Kernel, op: Op, mask, ins):
  seg = segments(op)
  shape = dict(p.split(" = ") for p in op.attrs["shape"].split("<")[1].rstrip(">").split(", "))
  kk, ptx = int(shape["k"]), op.attrs.get("multiplicandAPtxType", "f16").split("<")[-1].rstrip(">")
  warp_whole(k, mask, "mma.sync")
  A, B, C = ins[:seg[0]], ins[seg[0]:seg[0] + seg[1]], ins[seg[0] + seg[1]:]
  elems = lambda regs: [x for r in regs for x in unpack(r, ptx)]   # per element: [threads] values
  fa, fb, fc = frag(kk, ptx)
  W = k.T // 32
  a, b, c = np.zeros((W, 16, kk), np.float32), np.zeros((W, kk, 8), np.float32), np.zeros((W, 16, 8), np.float32)
  w = np.arange(W)[:, None]
  for (r, col), v in zip(fa, elems(A)): a[w, r[None], col[None]] = v.reshape(W, 32)
  for (r, col), v in zip(fb, elems(B)): b[w, r[None], col[None]] = v.reshape(W, 32)
  for (r, col), v in zip(fc, C): c[w, r[None], col[None]] = v.reshape(W, 32)
  d = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32) + c
  return [[d[w, r[None], col[None]].reshape(-1) for r, col in fc]]

def unpack(r: np.ndarray, ptx: str) -> list[np.ndarray]:
  """A register's elements as f32: two halves of a vector<2xf16>, two bf16 in an i32 (element 0 in the low half), a tf32."""
  if ptx == "f16": return [r[:, 0].astype(np.float32), r[:, 1].astype(np.float32)]
  bits = r.astype(np.int64) & 0xFFFFFFFF
  if ptx == "bf16": return [bf16_value(bits & 0xFFFF), bf16_value(bits >> 16)]
  return [(bits & ~0x1FFF).astype(np.uint32).view(np.float32)]

BITS = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i16": np.int16, "i32": np.int32, "i64": np.int64}
def cast(k: Kernel, op: Op, mask, ins):
  x, to, frm, kind = ins[0], op.types[0], op.in_types[0], op.name.split(".")[1]
  if kind == "bitcast":   # bf16 values are held as f32: through their 16 bits
    if frm == "bf16": return bf16_bits(x).view(np.int16)
    if to == "bf16": return bf16_value(x.astype(np.int16).view(np.uint16))
    return x.astype(BITS[frm]).view(BITS[to])
  if to == "bf16": return bf16_value(bf16_bits(x))
  return x.astype(NP[to])

def shift(k: Kernel, op: Op, mask, ins):
  x, y, kind = ins[0], ins[1], op.name.split(".")[1]
  if kind == "shli": return np.left_shift(x, y).astype(x.dtype)
  if kind == "shrsi": return np.right_shift(x, y).astype(x.dtype)
  u = x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x
  return np.right_shift(u, y.astype(u.dtype)).view(x.dtype) if x.dtype.kind == "i" else np.right_shift(u, y)

def warp_whole(k: Kernel, mask, what: str):
  if k.T % 32 or not all(mask.reshape(-1, 32).all(1) | ~mask.reshape(-1, 32).any(1)):
    raise RaceError(f"block {k.block}: {what} with part of a warp")

def ldmatrix(k: Kernel, op: Op, mask, ins):
  """ldmatrix .m8n8 .x1/.x2/.x4 (.trans) .b16: lanes 8j .. 8j+7 give the addresses of matrix j's 8 rows (8 consecutive
  elements each); lane l gets, of each matrix, row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 (.trans: of its columns)."""
  warp_whole(k, mask, "ldmatrix")
  n, trans = int(op.attrs["numTiles"].split(":")[0]), op.attrs["transpose"] == "true"
  sh, x = ins[0], flat(ins[0].shape, ins[1:])
  rows = x.reshape(-1, 32)[:, :8 * n]                        # per warp: the rows' addresses, matrix by matrix
  at = rows[:, :, None] + np.arange(8)                        # [warps, 8n, 8]
  lanes = (np.arange(k.T).reshape(-1, 32)[:, :8 * n, None] + 0 * at)
  live = mask.reshape(-1, 32)[:, 0]
  check(sh, k, at[live].reshape(-1), lanes[live].reshape(-1), False)
  m = sh.a[at].reshape(-1, n, 8, 8)                           # [warps, matrix, row, col]
  l = np.arange(32)
  r, c = (2 * (l % 4), l // 4) if trans else (l // 4, 2 * (l % 4))
  pair = np.stack([m[:, :, r, c], m[:, :, r + trans, c + (not trans)]], -1)   # [warps, matrix, lane, 2]
  return pair.transpose(0, 2, 1, 3).reshape(k.T, n, 2)

def tf32(k: Kernel, op: Op, mask, ins):
  """cvt.rna.tf32.f32: 10 mantissa bits, rounded to nearest, ties away from zero (infinities and NaNs kept)."""
  bits = ins[0].astype(np.float32).view(np.uint32).astype(np.int64)
  special = (bits & 0x7F800000) == 0x7F800000
  return np.where(special, bits, (bits + 0x1000) & ~0x1FFF).astype(np.uint32).view(np.int32)

def llvm_bitcast(k: Kernel, op: Op, mask, ins):   # vector<2xbf16> -> i32 (element 0 low) and vector<2xf16> -> i32
  x = ins[0]
  lo, hi = (bf16_bits(x[:, j]).astype(np.int64) if x.dtype == np.float32 else x[:, j].view(np.uint16).astype(np.int64) for j in (0, 1))
  return (lo | (hi << 16)).astype(np.uint32).view(np.int32)

def const(k: Kernel, op: Op, mask, ins): return full(k, op.attrs["value"], op.types[0])

def ctlz(k: Kernel, op: Op, mask, ins):   # leading zero bits (the width for 0), as PTX's clz
  x = ins[0]
  u, n = x.view(np.dtype(f"u{x.dtype.itemsize}")).copy(), np.full(x.shape, 8 * x.dtype.itemsize, x.dtype)
  while u.any(): n -= (u != 0).astype(x.dtype); u >>= 1
  return n

def for_(k: Kernel, op: Op, mask, ins):
  """scf.for, each thread from its lower bound to its upper one (a block's threads striding over a row): an iteration
  runs the threads still in their range, the others keep their iter_args."""
  iv, hi, step, *acc = ins
  args, body = op.regions[0]
  while (act := mask & (iv < hi)).any():
    k.env.update(zip(args, [iv] + acc))
    acc = [np.where(act if x.ndim == 1 else act[:, None], x, a) for x, a in zip(k.exec(body, act), acc)]
    iv = iv + step
  return acc

def if_(k: Kernel, op: Op, mask, ins):
  outs = [k.exec(op.regions[j][1], m) for j, m in enumerate((mask & ins[0], mask & ~ins[0])[:len(op.regions)])]
  if op.outs: return [np.where(ins[0] if x.ndim == 1 else ins[0][:, None], x, y) for x, y in zip(*outs)]

def shuffle(k: Kernel, op: Op, mask, ins):
  """gpu.shuffle xor: lane l reads lane l ^ offset's x (among `width` lanes); the whole warp takes part."""
  if not op.attrs["mode"].endswith("xor>"): unsupported(op)
  x, off, width = ins[0], int(ins[1][0]), int(ins[2][0])
  if not all(mask.reshape(-1, 32).all(1) | ~mask.reshape(-1, 32).any(1)) if k.T % 32 == 0 else not mask.all():
    raise RaceError(f"block {k.block}: a shuffle with part of a warp")
  src = k.tid ^ off
  ok = (k.tid % 32 ^ off) < width
  return [np.where(ok, x[np.where(ok & (src < k.T), src, k.tid)], x), ok]

def gpu_id(kind: str):
  def f(k: Kernel, op: Op, mask, ins):
    return {"thread_id": k.tid, "block_id": full(k, k.block, "index"), "global_id": k.block * k.T + k.tid}[kind]
  return f

RUN = {
  **{f"arith.{o}": (lambda fn: lambda k, op, mask, ins: fn(ins[0], ins[1]).astype(ins[0].dtype))(fn) for o, fn in BINARY.items()},
  "arith.constant": const, "arith.cmpi": lambda k, op, m, ins: CMPI[int(op.attrs["predicate"].split(":")[0])](ins[0], ins[1]),
  "arith.cmpf": lambda k, op, m, ins: CMPF[int(op.attrs["predicate"].split(":")[0])](ins[0], ins[1]),
  "arith.select": lambda k, op, m, ins: np.where(ins[0] if ins[1].ndim == 1 else ins[0][:, None], ins[1], ins[2]),
  **{f"arith.{c}": cast for c in ("extf", "truncf", "index_cast", "index_castui", "sitofp", "uitofp", "fptosi", "fptoui", "extsi",
                                  "extui", "trunci", "bitcast")},
  "arith.negf": lambda k, op, m, ins: -ins[0], "gpu.shuffle": shuffle,
  "math.exp2": lambda k, op, m, ins: np.exp2(ins[0]), "math.log2": lambda k, op, m, ins: np.log2(ins[0]),
  "math.sqrt": lambda k, op, m, ins: np.sqrt(ins[0]), "math.absf": lambda k, op, m, ins: np.abs(ins[0]), "math.ctlz": ctlz,
  # one rounding as fma.rn.f32 (the f64 product of two f32 is exact; rounding its f64 sum again to f32 is off in ties only)
  "math.fma": lambda k, op, m, ins: (ins[0].astype(np.float64) * ins[1] + ins[2]).astype(ins[0].dtype),
  "llvm.call_intrinsic": lambda k, op, m, ins: INTRINSICS[op.attrs["intrin"].strip('"').split(".")[1]](ins[0]), 
  "arith.shli": shift, "arith.shrui": shift, "arith.shrsi": shift,
  "memref.load": load, "memref.store": store, "vector.load": lambda k, op, m, ins: load(k, op, m, ins, int(op.types[0][7:].split("x")[0])),
  "vector.from_elements": lambda k, op, m, ins: np.stack(ins, -1), "llvm.bitcast": llvm_bitcast,
  "llvm.extractvalue": lambda k, op, m, ins: ins[0][int(op.attrs["position"].split(":")[1].rstrip(">"))],
  "gpu.thread_id": gpu_id("thread_id"), "gpu.block_id": gpu_id("block_id"), "gpu.global_id": gpu_id("global_id"),
  "gpu.barrier": barrier, "nvgpu.device_async_copy": async_copy, "nvgpu.device_async_create_group": async_group,
  "nvgpu.device_async_wait": async_wait, "nvvm.mma.sync": mma, "nvgpu.ldmatrix": ldmatrix,
  "vector.extract": lambda k, op, m, ins: ins[0][:, int(op.attrs["static_position"].split(":")[1].rstrip(">"))], "nvvm.convert.float.to.tf32": tf32, "scf.for": for_, "scf.if": if_,
}

def run(text: str, bufs: list[np.ndarray], blocks: int, threads: int) -> None:
  """The module's one kernel over `blocks` blocks of `threads` threads, on bufs (its buffer arguments, in order)."""
  Kernel(text).run(bufs, blocks, threads)

class Program:
  """A CUDA ProgramSpec's kernel run by the interpreter on buffers at host addresses (the fake driver's memory)."""
  def __init__(self, spec):
    self.spec, self.kernel = spec, Kernel(spec.src)
  def call_ptrs(self, *addrs: int) -> None:
    bufs = [np.ctypeslib.as_array(ctypes.cast(a, ctypes.POINTER(ctypes.c_uint8)), (size * dt.itemsize,)).view(np_of(dt))
            for a, (size, dt) in zip(addrs, self.spec.args)]
    self.kernel.run(bufs, prod(self.spec.global_size), prod(self.spec.local_size))

def np_of(dt) -> np.dtype: return np.dtype(np.uint16) if dt.name == "bfloat16" else np.dtype(dt.np)
