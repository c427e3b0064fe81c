// The recording mode's __torch_dispatch__ for its common case (no stacks, no hooks), in C++: it does what
// recorder._dispatch does, without the interpreter. Built on first use by profiler/_native.py (see there).
//
// One record per operator, appended to the session's innermost region's `raw` list:
//   (func, ins: list, outs: tuple, t0, t1, None, module, bool_index, graph)
// where each tensor is (torch.Size, stride tuple, torch.dtype, torch.device), as _dispatch builds it.
// Clock: CLOCK_MONOTONIC in ns, the clock of time.perf_counter_ns on Linux (the loader checks).
#include <torch/csrc/python_headers.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Size.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/object_ptr.h>
#include <time.h>
#include <algorithm>
#include <cstdint>
#include <vector>
#include <utility>
#include <structmember.h>

namespace {

PyObject *s_regions, *s_raw, *s_modules, *s_graph, *s_with_stack, *s_hooks, *s_shape, *s_stride, *s_dtype,
    *s_device, *s_op;
PyObject* g_opoverload = nullptr;  // torch._ops.OpOverload
PyObject* g_parameter = nullptr;   // torch.nn.Parameter
PyObject* g_plain = nullptr;       // tuple of types that are never tensors (beyond int/float/bool/None)
PyObject* g_bool_dtype = nullptr;
std::vector<std::pair<c10::Device, PyObject*>> g_devices;

inline long long now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

PyObject* device_obj(const c10::Device& d) {
  for (auto& p : g_devices) {
    if (p.first == d) {
      Py_INCREF(p.second);
      return p.second;
    }
  }
  PyObject* o = THPDevice_New(d);
  if (!o) return nullptr;
  Py_INCREF(o);
  g_devices.emplace_back(d, o);
  return o;
}

// (shape, stride, dtype, device), taking the four references; NULL (and none kept) if any is NULL
PyObject* pack_meta(PyObject* shape, PyObject* stride, PyObject* dtype, PyObject* device) {
  PyObject* r = (shape && stride && dtype && device) ? PyTuple_New(4) : nullptr;
  if (!r) {
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(dtype);
    Py_XDECREF(device);
    return nullptr;
  }
  PyTuple_SET_ITEM(r, 0, shape);
  PyTuple_SET_ITEM(r, 1, stride);
  PyTuple_SET_ITEM(r, 2, dtype);
  PyTuple_SET_ITEM(r, 3, device);
  return r;
}

// (shape, stride(), dtype, device) read through Python attributes: any tensor the fast path does not know
PyObject* meta_generic(PyObject* t) {
  PyObject* shape = PyObject_GetAttr(t, s_shape);
  PyObject* stride = shape ? PyObject_CallMethodNoArgs(t, s_stride) : nullptr;
  PyObject* dtype = stride ? PyObject_GetAttr(t, s_dtype) : nullptr;
  PyObject* device = dtype ? PyObject_GetAttr(t, s_device) : nullptr;
  return pack_meta(shape, stride, dtype, device);
}

// Recently made metadata tuples, shared by the records of tensors alike (they are immutable: records of a
// long region hold one tuple per distinct tensor layout instead of one per tensor): a direct-mapped cache
// keyed by sizes, strides, dtype and device, of tensors up to kCachedDims dims.
constexpr size_t kCachedDims = 6;
constexpr size_t kCacheSlots = 1024;

struct MetaSlot {
  PyObject* meta = nullptr;  // the slot's (shape, stride, dtype, device), or nullptr
  size_t ndim = 0;
  at::ScalarType dtype = at::ScalarType::Undefined;
  c10::Device device{c10::kCPU};
  int64_t sizes[kCachedDims] = {};
  int64_t strides[kCachedDims] = {};
};

MetaSlot g_cache[kCacheSlots];

// The slot for this layout: its metadata if the slot holds it, else a slot emptied for it; nullptr if too many dims
MetaSlot* cache_slot(c10::IntArrayRef sizes, c10::IntArrayRef strides, at::ScalarType st, c10::Device device) {
  size_t n = sizes.size();
  if (n > kCachedDims) return nullptr;
  uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)st << 16) ^ ((uint64_t)device.type() << 8) ^
               (uint64_t)(uint8_t)device.index();
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ (uint64_t)sizes[i]) * 0x100000001b3ull;
    h = (h ^ (uint64_t)strides[i]) * 0x100000001b3ull;
  }
  h ^= h >> 29;
  MetaSlot* slot = &g_cache[h & (kCacheSlots - 1)];
  if (slot->meta && slot->ndim == n && slot->dtype == st && slot->device == device &&
      std::equal(sizes.begin(), sizes.end(), slot->sizes) && std::equal(strides.begin(), strides.end(), slot->strides))
    return slot;
  Py_CLEAR(slot->meta);
  slot->ndim = n;
  slot->dtype = st;
  slot->device = device;
  std::copy(sizes.begin(), sizes.end(), slot->sizes);
  std::copy(strides.begin(), strides.end(), slot->strides);
  return slot;
}

// exact Tensor or Parameter: read the TensorImpl; anything unusual (a subclass, symbolic sizes, a sparse or
// nested layout) goes through Python, which also raises what Python would raise
PyObject* meta(PyObject* obj, bool* is_bool) {
  PyTypeObject* tp = Py_TYPE(obj);
  c10::TensorImpl* impl = nullptr;
  if (tp == (PyTypeObject*)THPVariableClass || (PyObject*)tp == g_parameter) {
    impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
    if (impl->has_symbolic_sizes_strides() || impl->is_nested() || impl->layout() != c10::kStrided ||
        impl->is_python_dispatch())
      impl = nullptr;
  }
  if (!impl) {
    PyObject* r = meta_generic(obj);
    if (r && is_bool) *is_bool = PyTuple_GET_ITEM(r, 2) == g_bool_dtype;
    return r;
  }
  c10::IntArrayRef sizes = impl->sizes();
  c10::IntArrayRef strides = impl->strides();
  at::ScalarType st = impl->dtype().toScalarType();
  if (is_bool) *is_bool = st == at::kBool;
  MetaSlot* slot = cache_slot(sizes, strides, st, impl->device());
  if (slot && slot->meta) {
    Py_INCREF(slot->meta);
    return slot->meta;
  }
  Py_ssize_t n = (Py_ssize_t)sizes.size();
  PyObject* shape = THPSizeType.tp_alloc(&THPSizeType, n);  // what Tensor.shape makes: a torch.Size
  PyObject* stride = PyTuple_New(n);
  if (!shape || !stride) return pack_meta(shape, stride, nullptr, nullptr);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = PyLong_FromLongLong(sizes[i]);
    PyObject* b = PyLong_FromLongLong(strides[i]);
    if (!a || !b) {
      Py_XDECREF(a);
      Py_XDECREF(b);
      return pack_meta(shape, stride, nullptr, nullptr);
    }
    PyTuple_SET_ITEM(shape, i, a);
    PyTuple_SET_ITEM(stride, i, b);
  }
  PyObject* dtype = (PyObject*)torch::getTHPDtype(st);
  Py_INCREF(dtype);
  PyObject* r = pack_meta(shape, stride, dtype, device_obj(impl->device()));
  if (r && slot) {
    Py_INCREF(r);
    Py_XSETREF(slot->meta, r);
  }
  return r;
}

inline int is_tensor(PyObject* a) {  // -1 on error
  PyTypeObject* tp = Py_TYPE(a);
  if (tp == (PyTypeObject*)THPVariableClass || (PyObject*)tp == g_parameter) return 1;
  if (a == Py_None || PyLong_CheckExact(a) || PyFloat_CheckExact(a) || PyBool_Check(a)) return 0;
  return PyObject_IsInstance(a, THPVariableClass);
}

inline bool is_plain(PyObject* a) {
  if (a == Py_None || PyLong_CheckExact(a) || PyFloat_CheckExact(a) || PyBool_Check(a)) return true;
  PyObject* tp = (PyObject*)Py_TYPE(a);
  Py_ssize_t n = PyTuple_GET_SIZE(g_plain);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (PyTuple_GET_ITEM(g_plain, i) == tp) return true;
  return false;
}

struct Handler {
  PyObject_HEAD
  PyObject* session;
  PyObject* mode;
  PyObject* fallback;
  vectorcallfunc vectorcall;
};

int append_new(PyObject* list, PyObject* item) {  // takes item's reference; -1 on error
  if (!item) return -1;
  int r = PyList_Append(list, item);
  Py_DECREF(item);
  return r;
}

// The metadata of each tensor in items (a list or tuple) appended to into; -1 on error
int append_tensors(PyObject* into, PyObject* items, bool* bool_index) {
  Py_ssize_t m = PySequence_Fast_GET_SIZE(items);
  for (Py_ssize_t j = 0; j < m; ++j) {
    PyObject* x = PySequence_Fast_GET_ITEM(items, j);
    int k = is_tensor(x);
    if (k < 0) return -1;
    bool b = false;
    if (k && append_new(into, meta(x, bool_index ? &b : nullptr)) < 0) return -1;
    if (b) *bool_index = true;
  }
  return 0;
}

// _dispatch's inputs: per positional argument its tensor's metadata or None, each tensor of a tensor list,
// each tensor keyword argument
PyObject* inputs(PyObject* args, PyObject* kwargs, bool* bool_index) {
  THPObjectPtr ins(PyList_New(0));
  if (!ins) return nullptr;
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    PyTypeObject* tp = Py_TYPE(a);
    int r;
    if (tp == (PyTypeObject*)THPVariableClass || (PyObject*)tp == g_parameter) {
      r = append_new(ins.get(), meta(a, nullptr));
    } else if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {  // a size list holds no tensor
      bool sizes = PySequence_Fast_GET_SIZE(a) == 0 || PyLong_CheckExact(PySequence_Fast_GET_ITEM(a, 0));
      r = sizes ? 0 : append_tensors(ins.get(), a, bool_index);
    } else if (is_plain(a)) {
      r = PyList_Append(ins.get(), Py_None);
    } else {
      int k = PyObject_IsInstance(a, THPVariableClass);
      r = k < 0 ? -1 : k ? append_new(ins.get(), meta(a, nullptr)) : PyList_Append(ins.get(), Py_None);
    }
    if (r < 0) return nullptr;
  }
  if (kwargs) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      int t = is_tensor(v);
      if (t < 0 || (t && append_new(ins.get(), meta(v, nullptr)) < 0)) return nullptr;
    }
  }
  return ins.release();
}

// _dispatch's outputs: a tuple of the metadata of the output tensor, or of each tensor of a list or tuple
PyObject* outputs(PyObject* out) {
  int t = is_tensor(out);
  if (t < 0) return nullptr;
  if (t) {
    THPObjectPtr m(meta(out, nullptr));
    return m ? PyTuple_Pack(1, m.get()) : nullptr;
  }
  if (!PyList_CheckExact(out) && !PyTuple_CheckExact(out)) return PyTuple_New(0);
  THPObjectPtr tmp(PyList_New(0));
  if (!tmp || append_tensors(tmp.get(), out, nullptr) < 0) return nullptr;
  return PyList_AsTuple(tmp.get());
}

// The last item of a list (or any sequence), None when it is empty (or an IndexError if empty_is_error)
PyObject* last_item(PyObject* seq, bool empty_is_error) {
  Py_ssize_t n = PyObject_Length(seq);
  if (n < 0) return nullptr;
  if (n > 0) return PySequence_GetItem(seq, n - 1);
  if (empty_is_error) {
    PyErr_SetString(PyExc_IndexError, "list index out of range");
    return nullptr;
  }
  Py_RETURN_NONE;
}

// Appends (func, ins, outs, t0, t1, None, module, bool_index, graph) to the session's innermost region
int record(Handler* h, PyObject* func, PyObject* args, PyObject* kwargs, PyObject* out, long long t0,
           long long t1) {
  bool bool_index = false;
  THPObjectPtr ins(inputs(args, kwargs, &bool_index));
  if (!ins) return -1;
  THPObjectPtr outs(outputs(out));
  if (!outs) return -1;
  THPObjectPtr regions(PyObject_GetAttr(h->session, s_regions));
  if (!regions) return -1;
  THPObjectPtr region(last_item(regions.get(), true));
  if (!region) return -1;
  THPObjectPtr raw(PyObject_GetAttr(region.get(), s_raw));
  if (!raw) return -1;
  THPObjectPtr modules(PyObject_GetAttr(h->session, s_modules));
  if (!modules) return -1;
  THPObjectPtr module(last_item(modules.get(), false));
  if (!module) return -1;
  THPObjectPtr graph(PyObject_GetAttr(h->session, s_graph));
  if (!graph) return -1;
  THPObjectPtr pt0(PyLong_FromLongLong(t0)), pt1(PyLong_FromLongLong(t1));
  if (!pt0 || !pt1) return -1;
  THPObjectPtr rec(PyTuple_Pack(9, func, ins.get(), outs.get(), pt0.get(), pt1.get(), Py_None, module.get(),
                                bool_index ? Py_True : Py_False, graph.get()));
  if (!rec) return -1;
  return PyList_Append(raw.get(), rec.get());
}

// The Python path, _dispatch(mode, *argv, **kw): with_stack, hooks, or a call of another shape than torch's
PyObject* forward(Handler* h, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  Py_ssize_t total = n + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject* small[8];  // torch's calls: 3 or 4 arguments, no keywords
  std::vector<PyObject*> large;
  PyObject** stack = small;
  if (total + 1 > 8) {
    large.resize((size_t)total + 1);
    stack = large.data();
  }
  stack[0] = h->mode;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = argv[i];
  return PyObject_Vectorcall(h->fallback, stack, (size_t)n + 1, kwnames);
}

int truthy_attr(PyObject* obj, PyObject* name) {  // -1 on error
  PyObject* v = PyObject_GetAttr(obj, name);
  if (!v) return -1;
  int r = PyObject_IsTrue(v);
  Py_DECREF(v);
  return r;
}

// __torch_dispatch__(func, types, args=(), kwargs=None)
PyObject* handler_vectorcall(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  Handler* h = (Handler*)self;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (kwnames || n < 2 || n > 4) return forward(h, argv, nargsf, kwnames);
  PyObject* func = argv[0];
  PyObject* args = n > 2 ? argv[2] : nullptr;
  PyObject* kwargs = n > 3 ? argv[3] : Py_None;
  if ((args && !PyTuple_CheckExact(args)) || (kwargs != Py_None && !PyDict_CheckExact(kwargs)))
    return forward(h, argv, nargsf, kwnames);
  int slow = truthy_attr(h->session, s_with_stack);
  if (slow == 0) slow = truthy_attr(h->session, s_hooks);
  if (slow < 0) return nullptr;
  if (slow) return forward(h, argv, nargsf, kwnames);

  PyObject* empty = nullptr;
  if (!args) {
    empty = PyTuple_New(0);
    if (!empty) return nullptr;
    args = empty;
  }
  PyObject* op = func;  // OpOverload.__call__ is a Python frame around its C++ handle, _op
  bool own_op = false;
  if ((PyObject*)Py_TYPE(func) == g_opoverload) {
    op = PyObject_GetAttr(func, s_op);
    if (!op) {
      Py_XDECREF(empty);
      return nullptr;
    }
    own_op = true;
  }
  PyObject* kw = (kwargs != Py_None && PyDict_GET_SIZE(kwargs)) ? kwargs : nullptr;
  long long t0 = now_ns();
  PyObject* out = PyObject_Call(op, args, kw);
  long long t1 = now_ns();
  if (own_op) Py_DECREF(op);
  if (!out) {
    Py_XDECREF(empty);
    return nullptr;
  }
  int recorded = record(h, func, args, kw, out, t0, t1);
  Py_XDECREF(empty);
  if (recorded < 0) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
  END_HANDLE_TH_ERRORS
}

int handler_traverse(PyObject* self, visitproc visit, void* arg) {
  Handler* h = (Handler*)self;
  Py_VISIT(h->session);
  Py_VISIT(h->mode);
  Py_VISIT(h->fallback);
  return 0;
}

int handler_clear(PyObject* self) {
  Handler* h = (Handler*)self;
  Py_CLEAR(h->session);
  Py_CLEAR(h->mode);
  Py_CLEAR(h->fallback);
  return 0;
}

void handler_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  handler_clear(self);
  Py_TYPE(self)->tp_free(self);
}

PyObject* handler_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject *session, *mode, *fallback;
  if (!PyArg_ParseTuple(args, "OOO", &session, &mode, &fallback)) return nullptr;
  if (!g_opoverload) {
    PyErr_SetString(PyExc_RuntimeError, "call setup() before making a Handler");
    return nullptr;
  }
  Handler* h = (Handler*)type->tp_alloc(type, 0);
  if (!h) return nullptr;
  Py_INCREF(session); h->session = session;
  Py_INCREF(mode); h->mode = mode;
  Py_INCREF(fallback); h->fallback = fallback;
  h->vectorcall = handler_vectorcall;
  return (PyObject*)h;
}

PyMemberDef handler_members[] = {
    {"__self__", T_OBJECT, offsetof(Handler, mode), READONLY, "the mode (torch checks that its handler is bound to it)"},
    {nullptr, 0, 0, 0, nullptr}};

PyTypeObject HandlerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* setup(PyObject*, PyObject* args) {
  PyObject *opoverload, *parameter, *plain, *bool_dtype;
  if (!PyArg_ParseTuple(args, "OOO!O", &opoverload, &parameter, &PyTuple_Type, &plain, &bool_dtype)) return nullptr;
  Py_INCREF(opoverload); Py_XSETREF(g_opoverload, opoverload);
  Py_INCREF(parameter); Py_XSETREF(g_parameter, parameter);
  Py_INCREF(plain); Py_XSETREF(g_plain, plain);
  Py_INCREF(bool_dtype); Py_XSETREF(g_bool_dtype, bool_dtype);
  Py_RETURN_NONE;
}

PyObject* monotonic_ns(PyObject*, PyObject*) { return PyLong_FromLongLong(now_ns()); }

PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(OpOverload, Parameter, plain_types, torch.bool)"},
    {"monotonic_ns", monotonic_ns, METH_NOARGS, "the clock the handler reads"},
    {nullptr, nullptr, 0, nullptr}};

#define PS_STR2(x) #x
#define PS_STR(x) PS_STR2(x)
PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, PS_STR(TORCH_EXTENSION_NAME), nullptr, -1, methods};

}  // namespace

#define PS_CAT2(a, b) a##b
#define PS_CAT(a, b) PS_CAT2(a, b)
PyMODINIT_FUNC PS_CAT(PyInit_, TORCH_EXTENSION_NAME)() {
  HandlerType.tp_name = PS_STR(TORCH_EXTENSION_NAME) ".Handler";
  HandlerType.tp_basicsize = sizeof(Handler);
  HandlerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  HandlerType.tp_vectorcall_offset = offsetof(Handler, vectorcall);
  HandlerType.tp_call = PyVectorcall_Call;
  HandlerType.tp_new = handler_new;
  HandlerType.tp_traverse = handler_traverse;
  HandlerType.tp_clear = handler_clear;
  HandlerType.tp_dealloc = handler_dealloc;
  HandlerType.tp_members = handler_members;
  HandlerType.tp_doc = "__torch_dispatch__(func, types, args=(), kwargs=None) of one recording mode";
  if (PyType_Ready(&HandlerType) < 0) return nullptr;
#define INTERN(v, s) if (!(v = PyUnicode_InternFromString(s))) return nullptr;
  INTERN(s_regions, "regions") INTERN(s_raw, "raw") INTERN(s_modules, "modules") INTERN(s_graph, "graph")
  INTERN(s_with_stack, "with_stack") INTERN(s_hooks, "hooks") INTERN(s_shape, "shape") INTERN(s_stride, "stride")
  INTERN(s_dtype, "dtype") INTERN(s_device, "device") INTERN(s_op, "_op")
  PyObject* m = PyModule_Create(&moduledef);
  if (!m) return nullptr;
  Py_INCREF(&HandlerType);
  if (PyModule_AddObject(m, "Handler", (PyObject*)&HandlerType) < 0) return nullptr;
  return m;
}
