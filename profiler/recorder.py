"""The recording dispatch mode: one cheap tuple per operator on the hot path, decoded later.

Where it can, the mode's handler is native (native.py): the same records without the interpreter.
The mode sets ``ignore_compile_internals`` so torch.compile keeps compiling while
a region is open (a plain dispatch mode makes Dynamo skip the frame for good). Where that is
not enough (torch 2.5-2.8 have no such hook; 2.9's guards still see the mode), `legacy_compile`
steps the mode aside while compiled code runs.
"""

from __future__ import annotations

import gc
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _thread_state, callsite, legacy_compile
from . import native as native_code
from ._thread_state import skip_dynamo
from .events import OpEvent, TensorInfo

_now = time.perf_counter_ns
_Tensor = torch.Tensor
_SEQ = (list, tuple)
_bool = torch.bool
_OpOverload = torch._ops.OpOverload
_PLAIN = native_code.PLAIN  # argument types that are never tensors

# (func, inputs, outputs, t0, t1, stack, module, bool_index, graph_id); inputs and outputs: sequences of
# (shape, stride, dtype, device), None for an argument that is not a tensor
RawOp = tuple[Any, "Sequence[Any]", "Sequence[Any]", int, int, Any, "str | None", bool, "int | None"]
OpHook = Callable[[Any, tuple, dict, Any, int], None]


def _meta(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.dtype, t.device)


def _dispatch(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202, C901
    """The hot path: one raw tuple per operator. Everything is inlined (tensor metadata, the session's
    bookkeeping): each Python call or attribute lookup here costs ~0.1 us, times every operator."""
    op = func._op if type(func) is _OpOverload else func  # OpOverload.__call__ is a Python frame around _op
    t0 = _now()
    out = op(*args, **kwargs) if kwargs else op(*args)
    t1 = _now()
    s = self.session
    ins: list[Any] = []
    append = ins.append
    bool_index = False
    for a in args:
        kind = type(a)
        if kind is _Tensor or (kind not in _PLAIN and isinstance(a, _Tensor)):  # isinstance: ~0.2 us on a miss
            append((a.shape, a.stride(), a.dtype, a.device))
        elif kind in _SEQ:
            if a and type(a[0]) is not int:  # a size list holds no tensor
                for x in a:
                    if isinstance(x, _Tensor):
                        append((x.shape, x.stride(), x.dtype, x.device))
                        if x.dtype is _bool:
                            bool_index = True
        else:
            append(None)
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, _Tensor):
                append((a.shape, a.stride(), a.dtype, a.device))
    if isinstance(out, _Tensor):  # tuples: one allocation where a list takes two
        outs: tuple = ((out.shape, out.stride(), out.dtype, out.device),)
    elif type(out) in _SEQ:
        outs = tuple([(x.shape, x.stride(), x.dtype, x.device) for x in out if isinstance(x, _Tensor)])
    else:
        outs = ()
    raw = s.regions[-1].raw
    modules = s.modules
    raw.append((func, ins, outs, t0, t1, s.stacks.capture(2) if s.with_stack else None,
                modules[-1] if modules else None, bool_index, s.graph))
    if s.hooks:
        index = len(raw) - 1
        kwargs = kwargs or {}
        for hook in s.hooks:
            hook(func, args, kwargs, out, index)
    return out


_SKIP_BY_CODE = skip_dynamo(_dispatch.__code__)


def _compiles_through_mode() -> bool:
    """Whether torch.compile works under the recording mode as it is: the mode can ask Dynamo to compile
    through it (torch >= 2.9), and Dynamo's tensor guards know of such modes (newer; on 2.9 they still see
    the mode's dispatch key, so every call under it recompiles). Otherwise see legacy_compile."""
    if "ignore_compile_internals" not in vars(TorchDispatchMode):
        return False
    try:
        from torch._C._dynamo import guards
    except ImportError:
        return False
    return hasattr(guards, "set_is_in_mode_without_ignore_compile_internals")


_COMPILES_THROUGH_MODE = _compiles_through_mode()


class _RecordingMode(TorchDispatchMode):
    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch >= 2.9 wraps __torch_dispatch__ in a dynamo-disable wrapper costing ~5 us per
        # operator; _skip_dynamo_cheaply() marks the code object skipped instead (same effect).
        return not _SKIP_BY_CODE

    def __init__(self, session: Session, native: Callable[..., Any] | None = None) -> None:
        super().__init__()
        self.session = session
        if native is not None:
            # torch looks the handler up on the mode and checks that its __self__ is the mode: an instance
            # attribute wins over the class's _dispatch, which the native handler calls for what it leaves
            self.__torch_dispatch__ = native(session, self, _dispatch)

    __torch_dispatch__ = _dispatch

    @property
    def native(self) -> bool:
        """Whether the native hot path (_native.cpp) records this mode's operators."""
        return "__torch_dispatch__" in vars(self)


class Session:
    """Per-thread recording state shared by the regions open on that thread."""

    def __init__(self) -> None:
        self.regions: list[Any] = []  # open regions, innermost last
        self.mode: _RecordingMode | None = None
        # torch 2.5-2.9: the Dynamo wrapper frame that stepped the mode aside while compiled code runs
        self.suspended_by: Any = None
        self.modules: list[str] = []  # module path stack
        self.with_stack = False
        self.stacks = callsite.StackCapture()  # call sites: the stack of each operator while with_stack
        self.hooks: list[OpHook] = []  # e.g. the predictor; gets live tensors
        self.root_hooks: list[Callable[[torch.nn.Module], None]] = []  # called when a top-level module runs
        self.root_model: Any = None
        self.root_names: dict[int, str] = {}  # id(module) -> its path under root_model
        self.graph: int | None = None  # id of the compiled graph running now
        self.graph_hooks: list[Callable[..., None]] = []  # e.g. the predictor; gets a graph call's tensors
        self.watcher: Any = None  # the compile-event watcher while regions are open
        self.froze_gc = False  # whether start() froze the collector's view of the heap

    def graph_call(self, call: Any, args: tuple, kwargs: dict) -> Any:
        """Run one compiled graph as one recorded operator; operators inside it carry its graph id."""
        region = self.regions[-1]
        index = len(region.raw)
        region.raw.append(None)  # keeps the graph call before the operators it dispatches
        tensors_in = [a for a in _flat(args) if isinstance(a, _Tensor)]
        stack = callsite.outside_compiled(self.stacks.capture(3)) if self.with_stack else None
        module = self.modules[-1] if self.modules else None
        self.graph = call.graph_id
        t0 = _now()
        out: Any = None
        try:
            out = call.fn(*args, **kwargs)
            return out
        finally:
            t1 = _now()
            self.graph = None
            tensors_out = [o for o in _flat(out) if isinstance(o, _Tensor)]
            region.raw[index] = (call.func, [_meta(t) for t in tensors_in], [_meta(t) for t in tensors_out], t0, t1,
                                 stack, module, False, call.graph_id)
            for hook in self.graph_hooks:
                hook(call, tensors_in, tensors_out, index)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


_local = _thread_state.local
current_session = _thread_state.current_session  # this thread's session, without creating one


def session() -> Session:
    s = getattr(_local, "session", None)
    if s is None:
        s = _local.session = Session()
    return s


# ---- module paths -------------------------------------------------------------------------

_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_hook_handles: list[Any] = []
_hook_lock = threading.Lock()


def _module_name(module: torch.nn.Module, s: Session) -> str:
    if not s.modules:
        names = _names.get(module)
        if names is None:
            names = _names[module] = {id(m): n for n, m in module.named_modules()}
        s.root_model, s.root_names = module, names
        for hook in s.root_hooks:
            hook(module)
    name = s.root_names.get(id(module))  # a plain dict: a WeakKeyDictionary lookup per module call costs ~1 us
    if name is not None:
        return name
    parent = s.modules[-1] if s.modules else ""
    return f"{parent}.{type(module).__name__}" if parent else type(module).__name__


_compiling = torch.compiler.is_compiling


def _pre_hook(module: torch.nn.Module, args: Any) -> None:
    if _compiling():  # Dynamo folds this to True while tracing: the hook vanishes from compiled graphs
        return
    s = getattr(_local, "session", None)
    if s is not None and s.regions:
        s.modules.append(_module_name(module, s))


def _post_hook(module: torch.nn.Module, args: Any, output: Any) -> None:
    if _compiling():
        return
    s = getattr(_local, "session", None)
    if s is not None and s.regions and s.modules:
        s.modules.pop()


for _hook in (_pre_hook, _post_hook):  # called as frames of their own around compiled modules
    skip_dynamo(_hook.__code__)


def start(s: Session) -> None:
    """Push the dispatch mode and the compile watcher (first region of the thread).

    Module hooks are installed once and stay: adding and removing global hooks would change
    what torch.compile guards on, and recompile the user's functions at every region boundary.
    """
    native = native_code.handler_type(_PLAIN)  # built on the first start of a process (~30 s), or None
    with _hook_lock:
        if not _hook_handles:
            _hook_handles.append(torch.nn.modules.module.register_module_forward_pre_hook(_pre_hook))
            _hook_handles.append(torch.nn.modules.module.register_module_forward_hook(_post_hook, always_call=True))
    from .compiled import CompileWatcher

    if not _COMPILES_THROUGH_MODE and not legacy_compile.install():
        warnings.warn(
            f"torch {torch.__version__}: Dynamo does not compile through dispatch modes and its callback setter "
            "was not found: a torch.compile'd function called inside a portscope region may stay eager",
            RuntimeWarning,
            stacklevel=3,
        )

    # Records are small tuples that live until the region ends; the collector would otherwise keep
    # re-scanning the whole (large: torch, transformers, the model) heap as they accumulate.
    # Freezing moves what exists now out of its sight; stop() hands it back.
    s.froze_gc = gc.isenabled()
    if s.froze_gc:
        gc.freeze()
    s.watcher = CompileWatcher(s)
    s.watcher.install()
    s.mode = _RecordingMode(s, native)
    s.mode.__enter__()


def stop(s: Session) -> None:
    """Pop the dispatch mode and the compile watcher."""
    if s.mode is not None:
        if s.suspended_by is None:
            s.mode.__exit__(None, None, None)
        vars(s.mode).pop("__torch_dispatch__", None)  # the native handler and the mode refer to each other
        s.mode, s.suspended_by = None, None
    if s.watcher is not None:
        s.watcher.uninstall()
        s.watcher = None
    if s.froze_gc:
        gc.unfreeze()
        s.froze_gc = False
    s.modules.clear()
    s.stacks.clear()


# ---- decoding -------------------------------------------------------------------------------


class Decoder:
    """Turns raw hot-path tuples into OpEvents, caching every conversion."""

    def __init__(self) -> None:
        self._names: dict[Any, tuple[str, str]] = {}
        self._tensors: dict[tuple, TensorInfo] = {}
        self.attribution: callsite.Attribution | None = None  # call sites of the region being decoded

    def name(self, func: Any) -> tuple[str, str]:
        got = self._names.get(func)
        if got is None:
            try:
                full = func.name()
            except AttributeError:
                full = str(func)
            got = self._names[func] = (full, full.split(".", 1)[0])
        return got

    def tensor(self, meta: tuple) -> TensorInfo:
        shape, stride, dtype, device = meta
        key = (tuple(shape), stride, dtype, device)
        info = self._tensors.get(key)
        if info is None:
            info = self._tensors[key] = TensorInfo(
                key[0], tuple(stride), str(dtype).removeprefix("torch."), str(device), dtype.itemsize
            )
        return info

    def event(self, op_id: int, raw: RawOp, t_base: int) -> OpEvent:
        func, ins, outs, t0, t1, stack, module, bool_index, graph_id = raw
        full, packet = self.name(func)
        tensor = self.tensor
        return OpEvent(
            op_id=op_id,
            name=full,
            packet=packet,
            inputs=[tensor(m) if m is not None else None for m in ins],
            outputs=[tensor(m) for m in outs],
            start_ns=t0 - t_base,
            dur_ns=t1 - t0,
            call_site=self.attribution.site(stack) if stack is not None and self.attribution is not None else None,
            module=module,
            bool_index=bool_index,
            graph_id=graph_id,
        )
