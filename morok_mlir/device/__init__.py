"""Devices, in the shape of Morok's device.rs: each is a renderer (our pass pipeline to upstream MLIR), a compiler
(upstream MLIR to machine code), a runtime (compiled code -> callable program) and an allocator.

  Device["CPU"]      the device (implementations are imported on first use); "cpu" and "CPU:0" name the same one;
                     "CPU:1", "CPU:2", ... are virtual CPU devices: the CPU's compiler, threads and memory, their own
                     name, so their Buffers, schedules and copies are theirs (several devices in one process)
                     "CPU@1", ... name a rank's device (morok_mlir.dist): the local rank's is a virtual CPU device,
                     another rank's is never given memory here
  Device.DEFAULT     "CPU", or the env var DEVICE; `with Device.default(name):` sets it for one thread
  dev.compile(f: Func) -> program: program.call_buffers(bufs: list[Buffer], inputs) runs it on allocated Buffers
  dev.allocator                   alloc/free/copyin/copyout/copy/offset/ptr of the device's memory (see buffer.py)
  Buffer(device, size, dtype)     memory on a device (device/buffer.py)"""
from __future__ import annotations
import contextlib, importlib, threading
from morok_mlir.core import env

class _Local(threading.local):
  default: str | None = None   # (a class attribute: reading it when unset raises nothing)

class _Device:
  _impls = {"CPU": ("morok_mlir.device.cpu", "CPU"), "CUDA": ("morok_mlir.device.cuda", "CUDA")}
  def __init__(self):
    self._default, self._local, self._found = self.canonicalize(env.get("DEVICE")), _Local(), {}
    self.on_settings_change: list = []   # f(base name): what was compiled for that device under its old settings is stale
  def settings_changed(self, base: str) -> None:
    """A device's compile settings changed (CUDA.allow_tf32): later realizes compile again, as PyTorch's flags act at once."""
    for f in self.on_settings_change: f(base)
  @property
  def DEFAULT(self) -> str:
    """The device of tensors made without one: this thread's inside a `with Device.default(name):` block, else the
    process's (`Device.DEFAULT = name` sets that one, as tinygrad's)."""
    return self._local.default or self._default
  @DEFAULT.setter
  def DEFAULT(self, name: str): self._default = name
  @contextlib.contextmanager
  def default(self, name: str):
    """Device.DEFAULT is name in this thread only, inside the block."""
    prev, self._local.default = self._local.default, name
    try: yield
    finally: self._local.default = prev
  @staticmethod
  def canonicalize(name: str) -> str:
    name, at, rank = name.partition("@")
    base, _, idx = name.partition(":")
    dev = f"CPU:{int(idx)}" if base.upper() == "CPU" and idx.isdigit() and int(idx) else base.upper()
    return f"{dev}@{int(rank) if rank.isdigit() else rank}" if at else dev
  @property
  def names(self) -> list[str]: return list(self._impls)
  def __getitem__(self, name: str):
    if (d := self._found.get(name)) is not None: return d   # every Buffer looks its device up: keep that a dict hit
    key = (c := self.canonicalize(name)).split("@")[0].split(":")[0]
    if "@" in c and not c.partition("@")[2].isdigit(): raise KeyError(f"unknown device {name!r}: a rank's device is BASE@RANK, e.g. CPU@1")
    if key not in self._impls: raise KeyError(f"unknown device {name!r} (devices: {', '.join(self._impls)})")
    mod, attr = self._impls[key]
    d = getattr(importlib.import_module(mod), attr)
    if c != key: d = self._found.get(c) or _Virtual(d, c)
    self._found[name] = d
    return d

class _Virtual:
  """A device that is another one's compiler, runtime and memory under its own name (CPU:1, CPU:2, ...)."""
  def __init__(self, dev, name: str): self._dev, self.name = dev, name
  def __getattr__(self, k): return getattr(self._dev, k)

Device = _Device()
