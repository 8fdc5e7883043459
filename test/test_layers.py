"""Layering rules of the tree, checked on the source: MLIR type text is made and read only at the MLIR boundary."""
import ast, pathlib, re

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOUNDARY = {"morok_mlir/ir/bridge.py", "morok_mlir/ir/emit.py", "morok_mlir/ir/families.py"}   # plus dialects/: the dialect itself
TYPE_TEXT = re.compile(r"(tensor|memref|vector)<")

def sources():
  for folder in ("morok_mlir", "passes"):
    for p in sorted((ROOT / folder).rglob("*.py")):
      if (rel := p.relative_to(ROOT).as_posix()) not in BOUNDARY and "/dialects/" not in rel: yield rel, ast.parse(p.read_text())

def docstrings(tree) -> set[int]:
  return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
          and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}

def test_no_type_text_read_outside_the_boundary():
  """A plain string literal holding MLIR type text is a pattern or a parsed type: only the boundary may have one.
  Code generation prints upstream memref/vector types, always as f-strings; nothing outside the boundary makes a tensor type."""
  bad = []
  for rel, tree in sources():
    skip, fparts = docstrings(tree), {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(tree):
      if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and (m := TYPE_TEXT.search(n.value)):
        if id(n) not in fparts or m.group(1) == "tensor": bad.append(f"{rel}:{n.lineno}: {n.value!r}")
  assert not bad, "MLIR type text handled outside bridge/emit/dialects:\n" + "\n".join(bad)

def test_one_type_text_reader():
  """bridge.split_type is the one reader of MLIR type text: parse_type (UOps) and the verifier both build on it."""
  defs = [f"{p.relative_to(ROOT)}:{n.name}" for folder in ("morok_mlir", "passes", "dialects") for p in sorted((ROOT / folder).rglob("*.py"))
          for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef) and n.name in ("parse_type", "split_type")]
  assert defs == ["morok_mlir/ir/bridge.py:split_type", "morok_mlir/ir/bridge.py:parse_type"], defs

def test_uops_carry_typed_values():
  from morok_mlir import Tensor
  from morok_mlir.dialects.ops import Op, Ops
  from morok_mlir.core.dtype import dtypes
  u = (Tensor.ones(2, 3) + 1).sum(1).uop
  assert u.op is Ops.RESHAPE and u.shape == (2,) and u.dtype is dtypes.float32
  assert all(x.op.__class__ is Op for x in u.toposort)

LAYERS = ["core", "ir", "passes", "codegen", "device", "driver", "front"]   # a module imports from its layer and those before
def layer(mod: str) -> str:
  for prefix, name in (("morok_mlir.core", "core"), ("morok_mlir.dialects.ops", "core"), ("morok_mlir.lru", "core"), ("morok_mlir.host", "core"),
                       ("morok_mlir.ir", "ir"), ("morok_mlir.dialects", "ir"), ("morok_mlir.ir.registry", "ir"),
                       ("morok_mlir.ir.pipeline", "ir"), ("morok_mlir.passes", "passes"), ("morok_mlir.codegen", "codegen"),
                       ("morok_mlir.device", "device"), ("morok_mlir.realize", "driver")):
    if mod == prefix or mod.startswith(prefix + "."): return name
  return "front"

def module_of(path: pathlib.Path) -> str:
  rel = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
  return rel if rel.startswith("morok_mlir") else "morok_mlir." + rel

def imports(folders=("morok_mlir", "passes", "dialects")):
  """(path, line, importing module, imported module) for every import of a morok_mlir module in the tree."""
  for folder in folders:
    for p in sorted((ROOT / folder).rglob("*.py")):
      for n in ast.walk(ast.parse(p.read_text())):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("morok_mlir"):
          for a in n.names: yield p, n.lineno, module_of(p), f"{n.module}.{a.name}" if layer(f"{n.module}.{a.name}") != "front" else n.module
        elif isinstance(n, ast.Import):
          for a in n.names:
            if a.name.startswith("morok_mlir"): yield p, n.lineno, module_of(p), a.name

def test_imports_only_go_down():
  """core -> MLIR boundary -> passes -> codegen -> device runtimes -> realize driver -> front end: a module never
  imports from a later layer."""
  bad = [f"{p.relative_to(ROOT)}:{line}: {layer(src)} imports {tgt} ({layer(tgt)})" for p, line, src, tgt in imports()
         if LAYERS.index(layer(tgt)) > LAYERS.index(layer(src))]
  assert not bad, "imports that go up a layer:\n" + "\n".join(bad)

def test_passes_and_codegen_apart():
  """The passes and the code generators share the kernel facts (core/kernel_facts.py) and the pass table (ir/registry.py)
  and nothing else: no module under passes/ imports codegen, none under codegen/ imports passes (each registers its
  own passes; whoever runs a pipeline imports both)."""
  bad = [f"{p.relative_to(ROOT)}:{line}: {src} imports {tgt}" for p, line, src, tgt in imports(("passes", "morok_mlir/codegen"))
         if {layer(src), layer(tgt)} == {"passes", "codegen"}]
  assert not bad, "passes and codegen import each other:\n" + "\n".join(bad)

def test_pass_imported_twice_raises():
  """The source tree's passes/ imported under a second name would re-register every pass with fresh module state
  (uop-optimize's beam search unset): it raises at the import instead."""
  import subprocess, sys
  code = "import morok_mlir.realize\ntry: import passes.optimize\nexcept ImportError as e: print(e)"
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
  assert "pass uop-optimize registered by morok_mlir.passes.optimize and again by passes.optimize" in out.stdout, out.stderr

# an SSA result named by hand, a region opened or closed by hand, a line indented by hand
BY_HAND = re.compile(r"%arg(\d|\{|$)|^%(lo|hi|tid|thread)\b|^\s*%[\w.]+(:\d+)? = |\bscf\.(for|if|yield|parallel|while) |^\s*\}( else \{)?\s*$|^  +$")

# what may hold MLIR text besides the emitter: nothing of codegen/ or device/ but the CPU pool's own worker loop (LLVM
# dialect for the runtime itself, no kernel's code)
def mlir_writers():
  return [p for p in sorted((ROOT / "morok_mlir" / "codegen").glob("*.py")) + sorted((ROOT / "morok_mlir" / "device").glob("*.py"))
          if p.name not in ("emitter.py", "pool.py")]

def test_codegen_names_and_nests_only_in_the_emitter():
  """Code generation builds MLIR text through codegen/emitter.py, which alone names SSA values, opens and closes regions
  (scf.for / scf.if with their iter_args and yields) and indents: no other code generator or device runtime holds a
  string that does, nor counts names itself (`self.n += 10`, `n[0] += 1`)."""
  bad = []
  for p in mlir_writers():
    src, rel = p.read_text(), p.relative_to(ROOT)
    tree, strs = ast.parse(src), []
    skip = docstrings(tree)
    bad += [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and BY_HAND.search(n.value)]
    bad += [f"{rel}:{src.count(chr(10), 0, m.start()) + 1}: {m.group()!r}" for m in re.finditer(r"self\.n\s*\+=|\[0\]\s*\+=", src)]
  assert not bad, "MLIR names, regions or indentation made outside the emitter:\n" + "\n".join(bad)

OP_TEXT = re.compile(r"\b(arith|math|memref|vector|scf|gpu|func|llvm|cf)\.[a-z_]+[ @(]")   # an op (not a name read off an op)

def test_op_text_only_in_the_emitter_and_tables():
  """No MLIR text outside the emitter: op text is written by the emitter's typed op helpers (Emitter.arith, cast, cmpi,
  select, load, vstore, call, gpu_id, launch, ...) and the per-op tables (module- and class-level: tables.ALU,
  lower_gpu.GPU_MATH, lanes.VRULES): no function of another code generator, of a device runtime or of the GPU
  emulator holds a string with arith/math/memref/vector/scf/gpu/func/llvm op text."""
  bad = []
  def walk(n, scope: tuple, in_func: bool, rel: str, skip: set):
    if isinstance(n, (ast.FunctionDef, ast.ClassDef)):   # decorators (a pass's registration and summary) and defaults: outside
      for c in n.decorator_list + ([n.args] if isinstance(n, ast.FunctionDef) else []): walk(c, scope, in_func, rel, skip)
      for c in n.body: walk(c, scope + (n.name,), in_func or isinstance(n, ast.FunctionDef), rel, skip)
      return
    if in_func and isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and OP_TEXT.search(n.value):
      bad.append(f"{rel}:{n.lineno} ({'.'.join(scope)}): {n.value!r}")
    for c in ast.iter_child_nodes(n): walk(c, scope, in_func, rel, skip)
  for p in mlir_writers(): walk(tree := ast.parse(p.read_text()), (), False, p.relative_to(ROOT).as_posix(), docstrings(tree))
  assert not bad, "op text written outside the emitter's helpers and the op tables:\n" + "\n".join(bad)

def test_codegen_functions_are_short():
  """No function in codegen/ is longer than 60 lines (Contraction's micro-kernel was one of 153, over list counters)."""
  long = [f"{p.name}:{n.name} ({n.end_lineno - n.lineno + 1} lines)" for p in sorted((ROOT / "morok_mlir" / "codegen").glob("*.py"))
          for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 60]
  assert not long, long

def test_lowered_text_not_patched():
  """What a device asks of the lowered text (noinline on the functions it calls, private phases, the GPU emulator's
  thread loops) is said to the emitter or the lowering's policy as the text is written: no code generator, CPU or CUDA
  runtime or GPU emulator reads or patches MLIR text afterwards (regular expressions, str.replace on op text)."""
  device = [ROOT / "morok_mlir" / "device" / n for n in ("cpu.py", "cuda.py", "gpu_emulator.py")]
  files = sorted((ROOT / "morok_mlir" / "codegen").glob("*.py")) + device
  bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
         if re.search(r"\bre\.(sub|subn|match|search|findall|finditer|compile)\(|\.replace\(\"(func|gpu)\.", line)]
  assert not bad, "lowered MLIR text patched:\n" + "\n".join(bad)

def test_targets_differ_by_a_policy():
  """Which loop an op lives in is decided in one module (codegen/placement.py); the CPU and GPU lowerings (and the GPU
  emulator's) differ by the Policy object given to the same lowerer, not by subclasses of it."""
  from morok_mlir.codegen import placement, lower_cpu, lower_gpu
  from morok_mlir.device import gpu_emulator
  subs = lambda c: [c] + [s for x in c.__subclasses__() for s in subs(x)]
  assert {c.__name__ for c in subs(placement.Placement)} <= {"Placement", "Lowerer", "LaneLowerer"}   # lanes: a kernel's vector lanes
  assert all(issubclass(p, placement.Policy) for p in (lower_cpu.CPU, lower_gpu.GPU, gpu_emulator.Emulated))
  deciders = [f"{p.name}:{n.name}" for p in sorted((ROOT / "morok_mlir").rglob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
              if isinstance(n, ast.FunctionDef) and n.name in ("target", "open_loops", "close_loops", "place")]
  assert deciders == ["placement.py:target", "placement.py:place", "placement.py:open_loops", "placement.py:close_loops"], deciders
