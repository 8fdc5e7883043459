"""The MLIR boundary. Every MLIR module the project uses is imported by `load()`, once, before any other module of ours
touches MLIR (each module that imports `mlir` calls it first; importing this package loads nothing, so a process that
only runs cached schedules never maps MLIR's and LLVM's libraries): the bindings import a dialect's module
(`mlir.dialects.func`) the first time they wrap one of its ops, and that module registers its namespace with the
process before its ops; interrupted in between (Ctrl-C during the first compile) it can never be imported again
("Dialect namespace 'func' is already registered") and every later compile fails. A Ctrl-C that arrives while they are
imported here is held until they all are."""
import importlib, signal, threading

MLIR_MODULES = ("mlir.ir", "mlir.passmanager", "mlir.execution_engine", "mlir.dialects.builtin", "mlir.dialects.func",
                "mlir.dialects.irdl", "mlir.dialects.gpu")

compile_lock = threading.RLock()   # one compile at a time: the MLIR contexts (ours, the devices') are not thread-safe

_loaded = False
def load() -> None:
  global _loaded
  if _loaded: return
  held, old = [], signal.getsignal(signal.SIGINT)
  hold = callable(old) and threading.current_thread() is threading.main_thread()   # Python handlers run on the main thread
  if hold: signal.signal(signal.SIGINT, lambda *a: held.append(a))
  try:
    for m in MLIR_MODULES: importlib.import_module(m)
  finally:
    if hold: signal.signal(signal.SIGINT, old)
  _loaded = True
  if held: old(*held[0])
