"""Equality that a result object cannot fake; runs inside the sandbox, ahead of the test driver.

``assert candidate(x) == 3`` passes for any object whose ``__eq__`` returns True: the classic
reward hack of code RL. The function-test driver (:mod:`sandboxes.harness`) rewrites every
single ``a == b``, ``a != b``, ``a in b`` and ``a not in b`` of a test (on its syntax tree;
chained comparisons such as ``a == b == c`` are left as they are) into ``__harness_eq__(a, b)``,
``__harness_ne__(a, b)``, ``__harness_in__(a, b)`` and ``__harness_not_in__(a, b)``:

* a value whose equality is its own (a class of the solution's, an ``int`` or ``list`` subclass
  with its own ``__eq__``, a solution's subclass of a library class such as ``Counter`` or
  ``ndarray``, such an object anywhere inside lists, tuples, dicts, sets, deques or the
  attributes of a library object such as ``UserList.data``) never equals plain data, and is
  never unequal to it either;
* plain data (builtins and dict views, numpy scalars and arrays, ``Decimal``, ``Fraction``, sympy
  numbers and expressions, namedtuples and
  other subclasses of builtin types that keep their base's equality) compares exactly as Python
  compares it;
* two values that both define their own equality (a problem's own ``Node`` class) still compare
  with their own ``==``;
* for ``in`` / ``not in``, a container whose membership test is its own (a ``__contains__``,
  ``__iter__`` or ``__getitem__`` of the solution's) is treated like a value with its own
  equality.

The check runs no code of the values it inspects (a property or ``__class__`` that gave a class
an ``__eq__`` between the check and the comparison would otherwise get through).

The source of this module is sent into the sandbox with the driver, so it must use only the
standard library and keep its names private to the driver's ``__main__``. The builtin classes
are captured when it runs, before the solution does; library classes (numpy, ``fractions``,
``collections``, ...) are looked up in their modules. Determined cheating by introspection or
monkeypatching (of builtins, or of those libraries) is out of scope (see docs/sandboxes.md).
"""

import ast as _ast
import builtins as _builtins
import collections as _collections
import sys as _sys
import types as _types

_TRUSTED_EQ = frozenset(
    getattr(_builtins, _name)
    for _name in ("object", "type", "int", "float", "complex", "bool", "str", "bytes", "bytearray",
                  "list", "tuple", "dict", "set", "frozenset", "range", "slice", "memoryview")
) | {type(None), type(NotImplemented), type(Ellipsis), type({}.keys()), type({}.items()), type({}.values())}
# sympy: a solution may return sympy.Integer(10) where 10 is expected (Python says equal).
_TRUSTED_MODULES = ("decimal", "fractions", "collections", "datetime", "numpy", "array", "sympy")
_CONTAINERS = ((list, list.__iter__), (tuple, tuple.__iter__), (set, set.__iter__),
               (frozenset, frozenset.__iter__), (_collections.deque, _collections.deque.__iter__),
               # dict views compare by their elements (dict.values() compares by identity)
               (type({}.keys()), type({}.keys()).__iter__), (type({}.items()), type({}.items()).__iter__))
_MAX_VISITS = 1_000_000
# A class's own namespace, read past any `__dict__` a metaclass might define to hide an `__eq__`.
_class_namespace = type.__dict__["__dict__"].__get__
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a class of C code, never one of the solution's
_instance_dict = object.__getattribute__
_type_module = type.__dict__["__module__"].__get__
_type_name = type.__dict__["__name__"].__get__


def _eq_owner(klass):
    """The class in ``klass``'s MRO that defines its equality."""
    for base in type.__getattribute__(klass, "__mro__"):
        namespace = _class_namespace(base)
        if "__eq__" in namespace or "__ne__" in namespace:
            return base
    return object


def _library_class(klass):
    """``klass`` is a trusted library's own class, found under its name in its module."""
    module_name, name = _type_module(klass), _type_name(klass)
    if type(module_name) is not str or type(name) is not str:
        return False  # a str subclass could run code when hashed
    module = _sys.modules.get(module_name)
    return (module is not None and module_name.partition(".")[0] in _TRUSTED_MODULES
            and getattr(module, name, None) is klass)


def _trusted_class(klass):
    """None if ``klass``'s equality is its own; else whether it is a library's class (whose
    instances' attributes are then checked too)."""
    owner = _eq_owner(klass)
    if owner in _TRUSTED_EQ:
        return False  # a builtin's equality reads the value itself, whatever the subclass
    if not _library_class(owner):
        return None
    # A library's equality is trusted for the library's own classes only: a subclass can redirect
    # it (numpy's __array_ufunc__, Counter's __getitem__, Fraction's numerator). Every class below
    # the owner must be C code (numpy's private dtype classes) or a trusted library's class.
    for base in type.__getattribute__(klass, "__mro__"):
        if base is owner:
            return True
        if not (type.__getattribute__(base, "__flags__") & _IMMUTABLE_TYPE or _library_class(base)):
            return None
    return None


def _state_reader(klass):
    """For a library class: ``item -> list`` of an instance's attributes (``__dict__`` and
    ``__slots__``), which its equality may read and a solution may set (``UserList.data``,
    ``Fraction._numerator``, ``ChainMap.maps``), and of a numpy array of objects its elements."""
    mro = type.__getattribute__(klass, "__mro__")
    members = [descriptor for base in mro for descriptor in _class_namespace(base).values()
               if type(descriptor) is _types.MemberDescriptorType]
    has_dict = any("__dict__" in _class_namespace(base) for base in mro)
    has_flat = any("flat" in _class_namespace(base) for base in mro)

    def read(item):
        state = []
        if has_dict:
            try:
                namespace = _instance_dict(item, "__dict__")
            except AttributeError:
                namespace = None
            if type(namespace) is dict:
                state.extend(dict.values(namespace))
        for descriptor in members:
            try:
                state.append(descriptor.__get__(item))
            except AttributeError:
                pass
        if has_flat and getattr(getattr(item, "dtype", None), "hasobject", False):
            state.extend(item.flat)  # a numpy array of Python objects
        return state

    return read


def _container_of(klass):
    """The iterator of the builtin container ``klass`` is (or subclasses), else None."""
    mro = type.__getattribute__(klass, "__mro__")
    if any(base is dict for base in mro):
        return dict.items
    for container, iterate in _CONTAINERS:
        if any(base is container for base in mro):
            return iterate
    return None


def _plain(value):
    """True if no part of ``value`` defines its own equality.

    No code of the value's runs here (no ``isinstance``, ``getattr`` or hashing of its objects):
    code run between this check and the comparison could give a class its own ``__eq__`` late.
    """
    stack, seen, visits = [value], set(), 0
    kinds = {}  # id(class) -> (class, state reader, container iterator); classes cannot change here
    while stack:
        item = stack.pop()
        visits += 1
        if visits > _MAX_VISITS:
            return True  # huge data: the test's time limit is the guard
        klass = type(item)
        kind = kinds.get(id(klass))
        if kind is None:
            library = _trusted_class(klass)
            if library is None:
                return False
            kind = kinds[id(klass)] = (klass, _state_reader(klass) if library else None, _container_of(klass))
        _klass, read_state, iterate = kind
        if (read_state is None and iterate is None) or id(item) in seen:
            continue
        seen.add(id(item))
        if read_state is not None:
            stack.extend(read_state(item))
        if iterate is dict.items:
            for key, element in dict.items(item):
                stack.append(key)
                stack.append(element)
        elif iterate is not None:
            stack.extend(iterate(item))
    return True


def _harness_eq(left, right):
    """``left == right``, except that plain data never equals a value with its own equality."""
    if _plain(left) != _plain(right):
        return False
    return left == right


def _harness_ne(left, right):
    """``left != right``, except that plain data is never unequal to a value with its own equality."""
    if _plain(left) != _plain(right):
        return False
    return left != right


def _membership_owner(klass):
    """The class whose code answers ``x in instance``: ``__contains__``, else ``__iter__``, else
    ``__getitem__`` (Python's own order)."""
    mro = type.__getattribute__(klass, "__mro__")
    for name in ("__contains__", "__iter__", "__getitem__"):
        for base in mro:
            if name in _class_namespace(base):
                return base
    return object


def _plain_container(container):
    """``container`` is plain data and its membership test is C code or a trusted library's."""
    if not _plain(container):
        return False
    owner = _membership_owner(type(container))
    return bool(type.__getattribute__(owner, "__flags__") & _IMMUTABLE_TYPE) or _library_class(owner)


def _harness_in(item, container):
    """``item in container``, except that a value with its own equality is never in plain data,
    and a container with its own membership test never holds plain data."""
    if _plain(item) != _plain_container(container):
        return False
    return item in container


def _harness_not_in(item, container):
    """``item not in container``, under the same conditions as :func:`_harness_in` (never true
    where those fail)."""
    if _plain(item) != _plain_container(container):
        return False
    return item not in container


_REWRITES = {_ast.Eq: "__harness_eq__", _ast.NotEq: "__harness_ne__", _ast.In: "__harness_in__",
             _ast.NotIn: "__harness_not_in__"}


class _StrictComparisons(_ast.NodeTransformer):
    """Every single ``==``, ``!=``, ``in`` and ``not in`` comparison becomes a call of its strict
    helper (``__harness_eq__``, ...); chained comparisons are left as they are."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        helper = _REWRITES.get(type(node.ops[0])) if len(node.ops) == 1 else None
        if helper is None:
            return node
        call = _ast.Call(func=_ast.Name(id=helper, ctx=_ast.Load()),
                         args=[node.left, node.comparators[0]], keywords=[])
        return _ast.copy_location(call, node)


def _compile_test(source, filename):
    """A test's code object with its comparisons made strict; run it with :data:`_HELPERS` bound."""
    tree = _StrictComparisons().visit(_ast.parse(source, filename))
    return compile(_ast.fix_missing_locations(tree), filename, "exec")


_HELPERS = {"__harness_eq__": _harness_eq, "__harness_ne__": _harness_ne, "__harness_in__": _harness_in,
            "__harness_not_in__": _harness_not_in}
