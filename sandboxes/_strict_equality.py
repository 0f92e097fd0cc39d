"""Equality that a result object cannot fake; runs inside the sandbox, ahead of the test driver.

``assert candidate(x) == 3`` passes for any object whose ``__eq__`` returns True: the classic
reward hack of code RL. The function-test driver (:mod:`sandboxes.harness`) rewrites every
``a == b`` and ``a != b`` of a test (on its syntax tree) into ``__harness_eq__(a, b)`` /
``__harness_ne__(a, b)``:

* a value whose equality is its own (a class of the solution's, an ``int`` or ``list`` subclass
  with its own ``__eq__``, such an object anywhere inside lists, tuples, dicts and sets) never
  equals plain data, and is never unequal to it either;
* plain data (builtins, numpy scalars and arrays, ``Decimal``, ``Fraction``, namedtuples and
  other subclasses that keep their base's equality) compares exactly as Python compares it;
* two values that both define their own equality (a problem's own ``Node`` class) still compare
  with their own ``==``.

The source of this module is sent into the sandbox with the driver, so it must use only the
standard library and keep its names private to the driver's ``__main__``. The trusted classes
are captured when it runs, before the solution does. Determined cheating by introspection is out
of scope (see docs/sandboxes.md).
"""

import ast as _ast
import builtins as _builtins
import sys as _sys

_TRUSTED_EQ = frozenset(
    getattr(_builtins, _name)
    for _name in ("object", "type", "int", "float", "complex", "bool", "str", "bytes", "bytearray",
                  "list", "tuple", "dict", "set", "frozenset", "range", "slice", "memoryview")
) | {type(None), type(NotImplemented), type(Ellipsis)}
_TRUSTED_MODULES = ("decimal", "fractions", "collections", "datetime", "numpy", "array")
_CONTAINERS = ((list, list.__iter__), (tuple, tuple.__iter__), (set, set.__iter__),
               (frozenset, frozenset.__iter__))
_MAX_VISITS = 1_000_000
# A class's own namespace, read past any `__dict__` a metaclass might define to hide an `__eq__`.
_class_namespace = type.__dict__["__dict__"].__get__


def _eq_owner(klass):
    """The class in ``klass``'s MRO that defines its equality."""
    for base in type.__getattribute__(klass, "__mro__"):
        namespace = _class_namespace(base)
        if "__eq__" in namespace or "__ne__" in namespace:
            return base
    return object


def _trusted_class(klass):
    owner = _eq_owner(klass)
    if owner in _TRUSTED_EQ:
        return True
    module_name = getattr(owner, "__module__", "") or ""
    module = _sys.modules.get(module_name)
    return (module_name.partition(".")[0] in _TRUSTED_MODULES and module is not None
            and getattr(module, getattr(owner, "__name__", ""), None) is owner)


def _plain(value):
    """True if no part of ``value`` defines its own equality."""
    stack, seen, visits = [value], set(), 0
    while stack:
        item = stack.pop()
        visits += 1
        if visits > _MAX_VISITS:
            return True  # huge data: the test's time limit is the guard
        if not _trusted_class(type(item)):
            return False
        if id(item) in seen:
            continue
        if isinstance(item, dict):
            seen.add(id(item))
            for key, element in dict.items(item):
                stack.append(key)
                stack.append(element)
            continue
        for container, iterate in _CONTAINERS:
            if isinstance(item, container):
                seen.add(id(item))
                stack.extend(iterate(item))
                break
        else:
            if getattr(getattr(item, "dtype", None), "hasobject", False) and hasattr(item, "flat"):
                seen.add(id(item))
                stack.extend(item.flat)  # a numpy array of Python objects
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


class _StrictComparisons(_ast.NodeTransformer):
    """Every single ``==`` / ``!=`` comparison becomes a ``__harness_eq__`` / ``__harness_ne__`` call."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (_ast.Eq, _ast.NotEq)):
            return node
        helper = "__harness_eq__" if isinstance(node.ops[0], _ast.Eq) else "__harness_ne__"
        call = _ast.Call(func=_ast.Name(id=helper, ctx=_ast.Load()),
                         args=[node.left, node.comparators[0]], keywords=[])
        return _ast.copy_location(call, node)


def _compile_test(source, filename):
    """A test's code object with its comparisons made strict; run it with :data:`_HELPERS` bound."""
    tree = _StrictComparisons().visit(_ast.parse(source, filename))
    return compile(_ast.fix_missing_locations(tree), filename, "exec")


_HELPERS = {"__harness_eq__": _harness_eq, "__harness_ne__": _harness_ne}
