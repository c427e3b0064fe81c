"""Call sites: the model line that made each operator, and stacks with paths that travel.

The hot path (`StackCapture`) keeps (code, instruction offset) pairs; everything else happens once per
distinct stack when a trace is built. *Model code* is every frame that is not plumbing: torch,
portscope, Python's own library, and the packages a user names as library (`explain(library=[...])`,
`PORTSCOPE_LIBRARY=pkg,pkg`). A call site is the innermost model frame and the model frame that called
it (decorator closures skipped), formatted by `portscope.ingest.callsites`.
"""

from __future__ import annotations

import bisect
import importlib.util
import linecache
import os
import sys
import sysconfig
from collections.abc import Iterable
from types import CodeType

import torch

from portscope.ingest.callsites import format_frame, model_site, package_relative, parse_frame
from portscope.ingest.errors import UsageError

Frame = tuple[str, int, str]  # (file relative to its root, line, qualified function name)
RawStack = tuple  # ((code, instruction offset), ...), outermost first
LIBRARY_ENV = "PORTSCOPE_LIBRARY"
USER_ROOT = "."
# portscope modules that play the user's part (the demo's model calls), so their lines are call sites
_USER_CODE = (os.path.join("profiler", "demo.py"), os.path.join("profiler", "compare.py"))
_getframe = sys._getframe


def raw_stack(skip: int = 2) -> RawStack:
    """The whole Python stack as ((code, offset), ...) pairs, outermost first (decoded later)."""
    out = []
    frame = _getframe(skip)
    while frame is not None:
        out.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(reversed(out))


class StackCapture:
    """`raw_stack` for a stream of operators, walking only the frames that changed since the last one.

    Operators come in runs from the same frames: the frames above the last capture's innermost frame
    are suspended while it runs, so only the frames below the deepest one still on the stack are new.
    Holds the last stack's frame objects (the innermost keeps the rest alive, so `id()`s are unique);
    `clear()` drops them when recording stops.
    """

    __slots__ = ("frames", "index", "pairs")

    def __init__(self) -> None:
        self.frames: list = []  # frame objects of the last capture, outermost first
        self.index: dict[int, int] = {}  # id(frame) -> its position in `frames`
        self.pairs: RawStack = ()

    def capture(self, skip: int) -> RawStack:
        frame = _getframe(skip)
        new = []
        index, frames = self.index, self.frames
        at = -1
        while frame is not None:
            i = index.get(id(frame), -1)
            # a generator's frame can resume under another caller: its recorded parent must still be its parent
            if i >= 0 and frames[i] is frame and frame.f_back is (frames[i - 1] if i else None):
                at = i
                break
            new.append(frame)
            frame = frame.f_back
        for gone in frames[at + 1:]:
            index.pop(id(gone), None)
        del frames[at + 1:]
        if at >= 0:
            pairs = self.pairs[:at] + ((frame.f_code, frame.f_lasti),)
        else:
            pairs = ()
        if new:
            new.reverse()
            start = len(frames)
            for k, f in enumerate(new):
                index[id(f)] = start + k
            frames += new
            pairs += tuple([(f.f_code, f.f_lasti) for f in new])
        self.pairs = pairs
        return pairs

    def clear(self) -> None:
        self.frames.clear()
        self.index.clear()
        self.pairs = ()


def outside_compiled(stack: RawStack) -> RawStack:
    """A compiled graph call's stack without the frame Dynamo runs as compiled code and what is inside it: that
    frame's lines are not its source's, and the graph belongs to the line that called the compiled function."""
    try:
        from torch._dynamo.utils import orig_code_map
    except ImportError:  # torch without Dynamo's code map: keep the stack as it is
        return stack
    for at in range(len(stack) - 1, -1, -1):  # innermost first
        code = stack[at][0]
        if code in orig_code_map or code.co_name.startswith("torch_dynamo_resume_in_"):
            return stack[:at]
    return stack


_LINE_STARTS: dict[CodeType, tuple[list[int], list[int]]] = {}


def line_of(code: CodeType, offset: int) -> int:
    """The source line of an instruction offset (what `frame.f_lineno` would have said)."""
    table = _LINE_STARTS.get(code)
    if table is None:
        starts, lines = [], []
        for start, _end, line in code.co_lines():
            starts.append(start)
            lines.append(line if line is not None else (lines[-1] if lines else code.co_firstlineno))
        table = _LINE_STARTS[code] = (starts, lines)
    at = bisect.bisect_right(table[0], offset) - 1
    return table[1][at] if at >= 0 else code.co_firstlineno


def library_from_env() -> tuple[str, ...]:
    """Package names listed in PORTSCOPE_LIBRARY (comma-separated)."""
    return tuple(n.strip() for n in os.environ.get(LIBRARY_ENV, "").split(",") if n.strip())


def library_dirs(names: Iterable[str]) -> list[str]:
    """The folders (or files) of the named packages; UsageError naming every package not found."""
    dirs, unknown = [], []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            unknown.append(name)
        elif spec.submodule_search_locations:
            dirs += [os.path.join(d, "") for d in spec.submodule_search_locations if os.path.isdir(d)]
        elif spec.origin:
            dirs.append(spec.origin)
    if unknown:
        raise UsageError(f"library packages not found: {', '.join(unknown)} (explain(library=...) / {LIBRARY_ENV})")
    return dirs


# test runners and notebook kernels: never model code, always plumbing when installed
_RUNNERS = ("_pytest", "pytest", "pluggy", "IPython", "ipykernel")


def _plumbing_prefixes() -> tuple[str, ...]:
    import portscope.app
    import portscope.ingest

    here = os.path.dirname(__file__)
    dirs = [os.path.dirname(torch.__file__), here, os.path.dirname(portscope.ingest.__file__),
            os.path.dirname(portscope.app.__file__)]
    runners = []
    for name in _RUNNERS:
        try:
            runners += library_dirs([name])
        except UsageError:  # not installed
            pass
    return tuple(os.path.join(d, "") for d in dirs) + tuple(runners)


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.join(paths[k], "") for k in ("stdlib", "platstdlib") if paths.get(k)})


_PLUMBING: tuple[str, ...] | None = None
_STDLIB: tuple[str, ...] = _stdlib_dirs()
_PACKAGE_FOLDERS = ("site-packages", "dist-packages")


def _is_stdlib(file: str) -> bool:
    for d in _STDLIB:
        if file.startswith(d):
            return not file[len(d):].startswith(_PACKAGE_FOLDERS)
    return False


class Roots:
    """Relative paths for files: `pkg/sub/mod.py` under a package's root, `x.py` under the user's root.

    Keeps the roots it used (`used`: first path component -> absolute folder) for `run_info.roots`.
    """

    def __init__(self, user_root: str | None = None) -> None:
        self.user_root = os.path.join(user_root or default_user_root(), "")
        self.used: dict[str, str] = {}
        self._cache: dict[str, str] = {}
        self._module_files: dict[str, str] | None = None

    def relative(self, file: str) -> str:
        got = self._cache.get(file)
        if got is None:
            got = self._cache[file] = self._relative(file)
        return got

    def _relative(self, file: str) -> str:
        if file.startswith("<") or not os.path.isabs(file):
            return file
        module = self._module_of(file)
        if not module or module == "__main__":
            return self._under_user(file)
        parts = module.split(".")
        levels = len(parts) - (0 if os.path.basename(file) == "__init__.py" else 1)  # folders up to the top package
        if levels == 0:  # a top-level module file (`six.py`)
            if file.startswith(self.user_root):
                return self._under_user(file)
            self.used.setdefault(os.path.basename(file), file)
            return os.path.basename(file)
        top = os.path.dirname(file)
        for _ in range(levels - 1):
            top = os.path.dirname(top)
        relative = os.path.relpath(file, top).replace(os.sep, "/")
        if relative.split("/")[:-1] != parts[1:levels]:  # loaded from elsewhere (code torch generates at run time)
            return f"{parts[0]}/<{'.'.join(parts[1:levels])}>/{os.path.basename(file)}"
        self.used.setdefault(parts[0], top)
        return f"{parts[0]}/{relative}"

    def _under_user(self, file: str) -> str:
        relative = package_relative(file)  # not a module, but under a package folder (code objects named after files)
        if relative != file:
            return relative
        if file.startswith(self.user_root):
            self.used.setdefault(USER_ROOT, self.user_root.rstrip(os.sep))
            return file[len(self.user_root):].replace(os.sep, "/")
        return file

    def top_package(self, file: str) -> str | None:
        """The top-level package the module loaded from `file` belongs to (None: not a module)."""
        module = self._module_of(file)
        return module.split(".", 1)[0] if module else None

    def _module_of(self, file: str) -> str | None:
        if self._module_files is None:
            self._module_files = {}
            for name, module in list(sys.modules.items()):
                path = getattr(module, "__file__", None)
                if isinstance(path, str):
                    self._module_files.setdefault(path, name)
        return self._module_files.get(file)


def default_user_root() -> str:
    """The user's root: the running script's folder, else the working directory."""
    key = (sys.argv[0] if sys.argv else "", os.getcwd())
    root = _USER_ROOTS.get(key)
    if root is None:  # a file system look-up: ~40 us at every region's start
        root = _USER_ROOTS[key] = _user_root()
    return root


_USER_ROOTS: dict[tuple[str, str], str] = {}  # (script, working directory) -> the user's root


def _user_root() -> str:
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if script.endswith(".py") and os.path.isfile(script) and not _is_stdlib(script) \
            and not any(os.sep + f + os.sep in script for f in _PACKAGE_FOLDERS):  # not `python -m pytest`
        return os.path.dirname(script)
    return os.getcwd()


class Attribution:
    """Call sites, relative frames and source text of raw stacks, for one set of library packages."""

    def __init__(self, roots: Roots, library: tuple[str, ...] = ()) -> None:
        global _PLUMBING
        if _PLUMBING is None:
            _PLUMBING = _plumbing_prefixes()
        self.roots = roots
        self._library = _PLUMBING + tuple(library_dirs(library))
        # by module name too: code loaded from elsewhere (torch's generated kernels live in a cache folder)
        self._library_packages = {"torch", "portscope", *_RUNNERS, *library}
        self._plumbing: dict[CodeType, bool] = {}
        self._sites: dict[RawStack, str | None] = {}
        self._frames: dict[RawStack, tuple[Frame, ...]] = {}
        self.sources: dict[Frame, str] = {}

    def is_plumbing(self, code: CodeType) -> bool:
        known = self._plumbing.get(code)
        if known is None:
            name = code.co_filename
            known = (name.startswith("<frozen") or _is_stdlib(name) or name.startswith(self._library)
                     or self.roots.top_package(name) in self._library_packages) and not name.endswith(_USER_CODE)
            self._plumbing[code] = known
        return known

    def _frame(self, code: CodeType, offset: int) -> Frame:
        frame = (self.roots.relative(code.co_filename), line_of(code, offset), code.co_qualname)
        if frame not in self.sources:
            self.sources[frame] = linecache.getline(code.co_filename, frame[1]).strip()
        return frame

    def site(self, stack: RawStack) -> str | None:
        """`line <- caller` of a raw stack: its innermost model frame and the model frame that called it."""
        got = self._sites.get(stack, ...)
        if got is not ...:
            return got
        got = model_site([self._frame(code, offset) for code, offset in reversed(stack) if not self.is_plumbing(code)])
        self._sites[stack] = got
        return got

    def frames(self, stack: RawStack) -> tuple[Frame, ...]:
        """Every frame of a raw stack, innermost first, with relative paths."""
        got = self._frames.get(stack)
        if got is None:
            got = self._frames[stack] = tuple(self._frame(code, offset) for code, offset in reversed(stack))
        return got

    def relative_site(self, text: str | None) -> str | None:
        """A `file:line (function)` from another source (a compile log) with its path made relative."""
        if not text:
            return text
        file, line, function = parse_frame(text)
        if line is None:
            return text
        frame = (self.roots.relative(file), line, function or "")
        if frame not in self.sources:
            self.sources[frame] = linecache.getline(file, line).strip()
        return format_frame(*frame)
