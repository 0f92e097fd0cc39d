"""Which stdin/stdout programs may run their cases one after another in one process.

`keeps_to_itself` reads a program's syntax (it runs nothing) and says whether the program changes
only what it made itself. `harness.run_io_programs` runs the cases of such a program in one
process, which puts back between cases what a program changes through calls
(``sandboxes/_function_driver.py``, ``_put_back_process_state``); any other program runs each
case in a process of its own, as a run of its own would (docs/sandboxes.md, "Trusted
stdin/stdout programs in one run").
"""

from __future__ import annotations

import ast
import functools
import re

from ._parse import parse_python

#: What a program may rebind on ``sys`` and still run its cases in one process: the run sets each
#: afresh for every case.
RESET_BETWEEN_CASES = frozenset({"stdin", "stdout", "stderr"})

#: Builtins that reach into an object's namespace: given a module (or what it holds), they change
#: or hand out what every later case would see.
_REACHES_INTO = frozenset({"setattr", "delattr", "vars", "getattr"})

#: Modules whose state a program changes through calls the check cannot tell apart from reading
#: it (``logging.basicConfig()``, ``logging.getLogger().addHandler(h)``, an event loop left in
#: ``asyncio``'s policy, ``ctypes`` writing anywhere): a program importing one runs each case in
#: a process of its own.
_KEEPS_STATE = frozenset({"asyncio", "concurrent", "ctypes", "logging", "multiprocessing", "unittest"})

#: A module's function whose name says it sets, registers, installs, switches on or off, or
#: seeds something (``numpy.set_printoptions``, ``os.sched_setaffinity``, ``copyreg.add_extension``,
#: ``torch.manual_seed``), or one of a few others that change what later cases see: its module
#: keeps what it set for every later case ...
_SETS_STATE = re.compile(
    r"(^|_)(set|seed)|^(register|add_|install|enable|disable)|^(basicConfig|field_size_limit|putenv|unsetenv)$"
)

#: ... except these, which the case process puts back before every case
#: (``sandboxes/_function_driver.py``, ``_put_back_process_state`` and the case's setup); a
#: module named here (``gc``) is put back whole.
_PUT_BACK = frozenset({
    "sys.setrecursionlimit", "sys.set_int_max_str_digits", "sys.setswitchinterval", "sys.settrace",
    "sys.setprofile", "threading.settrace", "threading.setprofile", "gc", "signal.setitimer",
    "resource.setrlimit", "locale.setlocale", "socket.setdefaulttimeout", "decimal.setcontext",
    "random.seed", "random.setstate", "numpy.random.seed", "faulthandler.enable", "faulthandler.disable",
})

#: Functions whose names look like `_SETS_STATE` and that set nothing (set operations).
_SETS_NOTHING = frozenset({"numpy.setdiff1d", "numpy.setxor1d"})

#: What a module holds that shows what earlier cases did, read or not: the modules imported so
#: far (a module a case imported stays in the process), caches a module fills as it is used
#: (``linecache.cache``), counts of the interpreter's objects and allocations. Matched as a whole
#: dotted name or its end (``os.sys.modules``).
_SHOWS_HISTORY = frozenset({
    "sys.modules", "sys.path_importer_cache", "sys.getallocatedblocks", "sys.getrefcount",
    "linecache.cache", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.get_stats",
    "gc.get_count", "gc.get_freeze_count",
})

#: A module's private names (``re._cache``, ``sys._getframe``) are its internals, caches among
#: them: a program that reads one runs each case in a process of its own. These are not.
_PRIVATE_BUT_PLAIN = frozenset({"os._exit"})

#: Attributes that lead from an object of the program's own to what is not its own: a class's
#: bases (``class F(json.JSONEncoder)``, then ``F.__bases__[0].x = 1``), a function's globals.
_LEADS_OUT = frozenset({"__bases__", "__base__", "__mro__", "mro", "__subclasses__", "__globals__", "__builtins__"})

#: Values a module holds that cannot be changed in place (numbers and strings): stored or bound,
#: they are the program's own (``dist[v] = math.inf``, ``INF = sys.maxsize``).
_VALUES = frozenset({
    *(f"{module}.{name}" for module in ("math", "cmath", "numpy") for name in ("inf", "nan", "pi", "e", "tau")),
    "sys.maxsize", "sys.maxunicode", "sys.byteorder", "sys.platform", "sys.version", "sys.hexversion",
    *(f"string.{name}" for name in (
        "ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
        "punctuation", "printable", "whitespace",
    )),
})

#: Builtins that run text as code: what it does, the syntax does not show.
_RUNS_TEXT = frozenset({"exec", "eval", "compile"})

#: Methods that change the object they belong to: taken from something a module holds
#: (``collections.__all__.append(x)``, ``sys.meta_path.insert(0, f)``, ``add =
#: sys.path.append``), they change it for every later case.
_MUTATORS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add",
    "discard", "sort", "reverse", "appendleft", "extendleft", "popleft", "rotate", "__setitem__",
    "__delitem__", "intersection_update", "difference_update", "symmetric_difference_update",
    "__setattr__", "__delattr__", "__iadd__", "__isub__", "__imul__", "__ior__", "__iand__", "__ixor__",
})

#: Functions of a module that register something in the interpreter for good, which nothing
#: removes or lists (``codecs.register``, ``copyreg.pickle``, ``mimetypes.add_type``, ...).
_REGISTERS = frozenset({"register", "pickle", "constructor", "add_type", "register_dialect", "addaudithook"})

# What an expression stands for, as far as the syntax tells:
#: something the program made itself (a literal, a local variable, an instance of its own class);
_LOCAL = 0
#: what a call on a module's function returned: fresh (``collections.deque()``) or held by the
#: module (``logging.getLogger()``); its items are taken as fresh, its attributes as held;
_RETURNED = 1
#: a module, or what a module holds (``collections.__all__``, a name imported from a module).
_HELD = 2


#: Passes over a program's bindings before the check gives up (and runs each case on its own).
_MOST_PASSES = 64


class _TooTangled(Exception):
    """Names bound to one another in more passes than `_MOST_PASSES`."""


def _chain(node: ast.expr) -> tuple[ast.expr, list[ast.expr]]:
    """The root of ``node``'s chain of attributes, items and calls (``a`` in ``a.b[0]().c``) and
    the links from the root outward (the Attribute, Subscript and Call nodes)."""
    links = []
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            links.append(node)
            node = node.value
        elif isinstance(node, ast.Call):
            links.append(node)
            node = node.func
        else:
            return node, links[::-1]


class _Reach:
    """What the names of one program stand for (:data:`_HELD`, :data:`_RETURNED`, else local)."""

    def __init__(self, nodes: list[ast.AST]) -> None:
        self.names: dict[str, int] = {"__import__": _HELD}
        self.from_imported: set[str] = set()
        #: The modules the program imports (dotted), and the dotted name each imported name is
        #: (``np`` of ``import numpy as np`` is ``numpy``; ``path`` of ``from sys import path``
        #: ``sys.path``).
        self.modules: set[str] = set()
        self.dotted: dict[str, str] = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules.add(alias.name)
                    name = alias.asname or alias.name.split(".")[0]
                    self.names[name] = _HELD
                    self.dotted[name] = alias.name if alias.asname else name
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                self.modules.add(module)
                for alias in node.names:
                    name = alias.asname or alias.name
                    self.names[name] = _HELD
                    self.from_imported.add(name)
                    self.dotted[name] = f"{module}.{alias.name}"
        #: What a call on a function or method of the program's own (by its name) gives: the
        #: most of what it returns or yields (``def f(): return sys.path`` then ``f().append(d)``).
        self.returns: dict[str, int] = {}
        given = _own_results(nodes)
        # A name bound to what a module holds stands for it (``names = collections.__all__``,
        # ``m = collections``, ``log = logging.getLogger()``), also through another such name or
        # a function of the program's own: repeat until nothing changes (each pass only raises
        # what a name stands for).
        bindings = [(target, value) for node in nodes for target, value in _bindings(node)]
        changed, passes = True, 0
        while changed:
            changed, passes = False, passes + 1
            if passes > _MOST_PASSES:
                raise _TooTangled
            for target, value in bindings:
                reach = self.of(value)
                for name in _bound_names(target):
                    if reach > self.names.get(name.id, _LOCAL):
                        self.names[name.id] = reach
                        changed = True
            for name, values in given.items():
                reach = max((self.of(value) for value in values), default=_LOCAL)
                if reach > self.returns.get(name, _LOCAL):
                    self.returns[name] = reach
                    changed = True

    def dotted_name(self, node: ast.expr) -> str | None:
        """``node``'s dotted name where it is an imported name or an attribute of one
        (``numpy.random.seed`` for ``np.random.seed``), else ``None``."""
        if isinstance(node, ast.Name):
            return self.dotted.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.dotted_name(node.value)
            return None if owner is None else f"{owner}.{node.attr}"
        return None

    def of(self, node: ast.expr) -> int:
        """What ``node`` stands for: a module's attribute or item is held, a call on what a module
        holds returned, an attribute of what a call returned held, an item of it returned; the
        streams of ``sys`` are local (the run sets them afresh for each case)."""
        parts = _PARTS.get(type(node))
        if parts is not None:
            return max((self.of(part) for part in parts(node) if part is not None), default=_LOCAL)
        if self.dotted_name(node) in _VALUES:
            return _LOCAL
        root, links = _chain(node)
        if isinstance(root, ast.Name):
            reach = self.names.get(root.id, _LOCAL)
        elif links and root is not node:  # (``[sys.path][0]``, ``(sys.path or [])``)
            reach = self.of(root)
        else:
            return _LOCAL
        for at, link in enumerate(links):
            if at == 0 and isinstance(root, ast.Name) and root.id == "sys" and isinstance(link, ast.Attribute) and link.attr in RESET_BETWEEN_CASES:
                return _LOCAL
            if isinstance(link, ast.Call):
                func = link.func
                callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                returned = _RETURNED if reach != _LOCAL else _LOCAL
                if callee == "type" and at == 0 and isinstance(root, ast.Name) and link.args:  # (a module's class)
                    returned = _HELD if self.of(link.args[0]) != _LOCAL else _LOCAL
                reach = max(returned, self.returns.get(callee, _LOCAL))
            elif isinstance(link, ast.Attribute):
                reach = _HELD if reach != _LOCAL or link.attr in _LEADS_OUT else _LOCAL
            # (an item keeps what its container stands for: ``d[k]`` of ``d = defaultdict(list)``)
        return reach


#: The parts of a compound expression whose most is what it stands for.
_PARTS = {
    ast.BoolOp: lambda n: n.values, ast.IfExp: lambda n: [n.body, n.orelse],
    ast.Tuple: lambda n: n.elts, ast.List: lambda n: n.elts, ast.Set: lambda n: n.elts,
    ast.Dict: lambda n: [*n.keys, *n.values], ast.Starred: lambda n: [n.value],
    ast.NamedExpr: lambda n: [n.value],
}


def _own_results(nodes: list[ast.AST]) -> dict[str, list[ast.expr]]:
    """What each function, method or lambda of the program's own returns or yields, by its name
    (a nested function's results count for the one around it too)."""
    results: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names, body = [node.name], node
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names = [name.id for target in node.targets for name in _bound_names(target)]
            body = node.value
        else:
            continue
        values = [node.value.body] if isinstance(node, ast.Assign) else []
        values += [
            part.value for part in ast.walk(body)
            if isinstance(part, (ast.Return, ast.Yield, ast.YieldFrom)) and part.value is not None
        ]
        for name in names:
            results.setdefault(name, []).extend(values)
    return results


def _bound_names(target: ast.expr) -> list[ast.Name]:
    """The names a binding to ``target`` binds: ``a`` and ``b`` of ``a, *b = ...``, none of
    ``memo[n] = ...`` (what is stored in a container or an object the program made is not
    followed)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _bindings(node: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """``(target, value)`` of each name binding ``node`` makes with a value: assignments, the
    walrus, a ``for`` loop's target (bound to the items of what it iterates), ``with ... as``, a
    parameter's default."""
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return [(node.target, node.iter)]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars is not None]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):  # (a parameter's default)
        arguments = node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
        pairs += [(arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is not None]
        return [(ast.Name(id=arg.arg, ctx=ast.Store()), default) for arg, default in pairs]
    return []


@functools.lru_cache(maxsize=4096)
def keeps_to_itself(program: str) -> bool:
    """Whether `program` changes only what it made itself, so that its cases may run one after
    another in one process (`harness.run_io_programs`). It does not where it

    * assigns to (or deletes) an attribute or item of a module or of what a module holds
      (``collections.marker = 1``, ``os.environ[k] = v``; ``sys``'s streams excepted), or an
      attribute of what a module's function returned (``getcontext().prec = 50``);
    * takes a method that changes its object (``append``, ``update``, ...: `_MUTATORS`) from what
      a module holds, called or not (``sys.meta_path.insert(0, f)``, ``from sys import path;
      path.append(d)``, ``logging.getLogger().handlers.append(h)``, ``add = sys.path.append``);
    * registers something nothing can remove or list (``codecs.register``: `_REGISTERS`);
    * gives a module or what it holds to ``setattr``, ``delattr``, ``getattr`` or ``vars``, to a
      function or class of its own (whose body could change it), to a changing method
      (``list.append(sys.path, d)``), or as the first argument to a module's function
      (``heapq.heapify(sys.path)``, ``operator.setitem(os.environ, k, v)``); changes it in place
      through a name (``from sys import path; path += [d]``); touches ``__dict__`` or an audit
      hook;
    * uses a module's function that sets state the case process does not put back
      (``numpy.set_printoptions``, ``os.putenv``, ``csv.field_size_limit``: `_SETS_STATE`, less
      `_PUT_BACK`), called or not, or imports a module whose state it cannot follow
      (``logging``, ``asyncio``, ``ctypes``: `_KEEPS_STATE`);
    * reads what shows what earlier cases did: a module's private name (``re._cache``), the
      modules imported so far (``sys.modules``), a cache a module fills as it is used, object
      counts (`_SHOWS_HISTORY`);
    * stores what a module holds in a container or object of its own (``memo[k] = sys.path``),
      or reaches a module's class through ``type(...)`` of what a module made or through a
      class's ``__bases__`` (`_LEADS_OUT`);
    * runs text as code (``exec``, ``eval``, ``compile``: what it does, the syntax does not
      show), imports ``*`` (names the check cannot see), or does not parse.

    Names follow what they are bound to: ``names = collections.__all__; names.append(x)`` and ``m
    = collections; m.marker = 1`` are seen, and so is what a function, method or lambda of the
    program's own returns or yields (``def f(): return sys.path`` then ``f().append(d)``). A
    module's numbers and strings (`_VALUES`) are values, its own to store anywhere. What the
    syntax hides (``next(iter([sys.path]))``) is not followed; the programs this runs are a
    task's golden solution and mutants of it. A program that does any of this runs each case in
    a process of its own: a later case could read what an earlier one left."""
    try:
        tree = parse_python(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    try:
        return _keeps_to_itself(tree)
    except (RecursionError, _TooTangled):
        return False


def _keeps_to_itself(tree: ast.Module) -> bool:
    nodes = list(ast.walk(tree))
    reach = _Reach(nodes)
    if "*" in reach.from_imported:
        return False
    if any(_shows_history(reach.dotted[name]) for name in reach.from_imported):  # (``from re import _cache``)
        return False
    own_callables = {
        node.name for node in nodes if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    } | {
        name.id
        for node in nodes
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
        for target in node.targets
        for name in _bound_names(target)
    }
    if any(module.split(".")[0] in _KEEPS_STATE for module in reach.modules):
        return False
    for node in nodes:
        # A module's function that sets state (`_SETS_STATE`) and that the case process does not
        # put back (`_PUT_BACK`), taken from the module or imported by name, called or not.
        named = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if named is not None and _SETS_STATE.search(named):
            held = reach.of(node.value) == _HELD if isinstance(node, ast.Attribute) else named in reach.from_imported
            dotted = reach.dotted_name(node)
            if held and not (dotted in _PUT_BACK or dotted in _SETS_NOTHING or (dotted or "").split(".")[0] in _PUT_BACK):
                return False
        if isinstance(node, ast.Attribute) and _shows_history(reach.dotted_name(node)):
            return False
        if isinstance(node, ast.Attribute):
            if node.attr in ("__dict__", "addaudithook"):
                return False
            # A changing method of what a module holds (a name imported from a module is what
            # it holds), or a registration nothing undoes.
            owner = reach.of(node.value)
            if node.attr in _REGISTERS and owner == _HELD:
                return False
            if node.attr in _MUTATORS and owner == _HELD:
                return False
        if isinstance(node, ast.Name) and node.id == "addaudithook":
            return False
        if isinstance(node, ast.Call):
            given = [*node.args, *(keyword.value for keyword in node.keywords)]
            held = any(reach.of(arg) == _HELD for arg in given)
            func = node.func
            # A module's namespace reached through a builtin (``setattr(math, 'pi', 3)``,
            # ``vars(collections).update(...)``): any first argument but the program's own.
            if isinstance(func, ast.Name) and func.id in _RUNS_TEXT:
                return False
            if isinstance(func, ast.Name) and func.id in _REACHES_INTO:
                first = node.args[0] if node.args else None
                root = _chain(first)[0] if first is not None else None
                if not isinstance(root, ast.Name) or reach.of(first) != _LOCAL:
                    return False
            if held and isinstance(func, ast.Name) and func.id in own_callables:
                return False
            if held and isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
                return False
            # A module's function given what a module holds first (``heapq.heapify(sys.path)``,
            # ``operator.setitem(os.environ, k, v)``, ``random.shuffle(sys.path)``).
            if node.args and reach.of(node.args[0]) == _HELD and reach.of(func) != _LOCAL:
                return False
        # ``p += [...]`` changes in place what ``p`` stands for (``from sys import path as p``).
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and reach.of(node.target) == _HELD:
            return False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            # What a module holds, stored in the program's own container or object (``memo[k] =
            # sys.path``, ``self.p = collections.__all__``): the check does not follow it there.
            value = getattr(node, "value", None)
            if value is not None and reach.of(value) == _HELD and any(
                isinstance(part, (ast.Attribute, ast.Subscript)) for target in targets for part in ast.walk(target)
            ):
                return False
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, (ast.Attribute, ast.Subscript)) and not _assignable(part, reach):
                        return False
    return True


def _shows_history(dotted: str | None) -> bool:
    """Whether the dotted name of something a module holds (``re._cache``) shows what earlier
    cases did (`_SHOWS_HISTORY`) or is a module's private name (`_PRIVATE_BUT_PLAIN` aside)."""
    if dotted is None or "." not in dotted:
        return False
    if any(dotted == shown or dotted.endswith("." + shown) for shown in _SHOWS_HISTORY):
        return True
    last = dotted.rsplit(".", 1)[-1]
    private = last.startswith("_") and not (last.startswith("__") and last.endswith("__"))
    return private and dotted not in _PRIVATE_BUT_PLAIN


def _assignable(part: ast.Attribute | ast.Subscript, reach: _Reach) -> bool:
    """Whether a case may assign to (or delete) ``part`` and leave nothing for a later case: an
    attribute or item of what the program made itself, an item of what a call returned
    (``d[k]`` of ``d = collections.defaultdict(list)``), or a stream of ``sys``."""
    root, links = _chain(part.value)
    if not isinstance(root, ast.Name):
        return False
    if any(isinstance(link, ast.Call) for link in links) and reach.names.get(root.id, _LOCAL) == _LOCAL:
        # (what a call on the program's own name returns, assigned into: ``f().x = 1``)
        return isinstance(part, ast.Subscript)
    owner = reach.of(part.value)
    if owner == _LOCAL:
        return True
    if owner == _RETURNED:
        return isinstance(part, ast.Subscript)
    return (
        isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "sys"
        and part.attr in RESET_BETWEEN_CASES
    )
