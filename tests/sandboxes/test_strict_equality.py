"""The strict comparison of function tests (sandboxes/_strict_equality.py), checked on the host.

The module runs inside the sandbox as part of the test driver; here it is imported directly so
that its rules can be checked exhaustively: for plain data it must agree with Python's own
``==`` and ``!=`` on every value, and a value with its own equality must never match plain data.
"""

from __future__ import annotations

import collections
import copy
import fractions

import numpy as np
import sympy
from hypothesis import given
from hypothesis import strategies as st

from sandboxes import _strict_equality as strict

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=5),
)
hashables = st.recursive(scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6)
plain_data = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    | st.sets(hashables, max_size=3),
    max_leaves=12,
)


class Anything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


class Int(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Node:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Node) and other.value == self.value


@given(plain_data, plain_data)
def test_plain_data_compares_exactly_as_python_does(left, right):
    assert strict._harness_eq(left, right) == (left == right)
    assert strict._harness_ne(left, right) == (left != right)
    twin = copy.deepcopy(left)
    assert strict._harness_eq(left, twin) == (left == twin)


@given(plain_data)
def test_a_value_with_its_own_equality_never_matches_plain_data(value):
    for fake in (Anything(), Int(0), [Anything()], {"k": Anything()}, (1, Int(2))):
        assert not strict._harness_eq(fake, value) and not strict._harness_eq(value, fake)
        assert not strict._harness_ne(fake, value) and not strict._harness_ne(value, fake)


def test_library_data_types_are_plain():
    point = collections.namedtuple("Point", "x y")
    cases = [
        (np.int64(4), 4, True),
        (np.array([1.5, 2.0]).tolist(), [1.5, 2.0], True),
        (fractions.Fraction(1, 2), 0.5, True),
        (point(1, 2), (1, 2), True),
        (collections.OrderedDict(a=1), {"a": 1}, True),
        (collections.Counter("aab"), {"a": 2, "b": 1}, True),
        (collections.deque([1, 2]), collections.deque([1, 2]), True),
        (collections.UserList([1]), [1], True),
        (collections.ChainMap({"a": 1}), {"a": 1}, True),
        (np.zeros(2).dtype, np.float64, True),
        (np.array([1, "a"], dtype=object)[1], "a", True),
        (float("nan"), float("nan"), False),  # as in Python
        ({"a": 1}.keys(), {"a"}, True),
        ({"a": 1}.items(), {("a", 1)}, True),
        (sympy.binomial(5, 2), 10, True),
        (sympy.sqrt(2) ** 2, 2, True),
        (sympy.Float(1.5), 1.5, True),
        (sympy.Rational(1, 2), 0.5, False),  # as sympy says
    ]
    for left, right, equal in cases:
        assert bool(strict._harness_eq(left, right)) is equal, (left, right)


def test_values_of_a_problems_own_class_keep_their_equality():
    assert strict._harness_eq(Node(3), Node(3))
    assert not strict._harness_eq(Node(3), Node(4))
    assert strict._harness_ne(Node(3), Node(4))
    assert not strict._harness_eq(Node(3), 3)


def test_cycles_and_huge_values_terminate():
    loop: list = [1]
    loop.append(loop)
    assert strict._plain(loop)
    assert strict._harness_eq(list(range(2_000_000)), list(range(2_000_000)))


def test_only_single_equality_comparisons_are_rewritten():
    namespace = dict(strict._HELPERS, f=lambda: Anything(), g=lambda: 3)
    code = strict._compile_test("result = [f() == 3, f() != 3, g() == 3, 1 < 2 == 2, (lambda: f() == 3)()]", "t.py")
    exec(code, namespace)
    assert namespace["result"] == [False, False, True, True, False]
    # a chained comparison is left as it is (Python's own semantics)
    exec(strict._compile_test("chained = 3 == f() == 3", "t.py"), namespace)
    assert namespace["chained"] is True


def test_a_metaclass_cannot_hide_its_classes_equality():
    class Hiding(type):
        @property
        def __dict__(cls):
            return {}

    class Sneaky(metaclass=Hiding):
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    assert not strict._harness_eq(Sneaky(), 3)


def _set(obj, name, value):
    setattr(obj, name, value)
    return obj


class UfuncArray(np.ndarray):
    def __array_ufunc__(self, *args, **kwargs):
        return True


class FakeCounter(collections.Counter):
    def __getitem__(self, key):
        return Anything()


def test_a_library_object_cannot_carry_a_value_with_its_own_equality():
    # Library classes whose equality reads attributes a solution can set, and subclasses of
    # library classes (whose equality they can redirect), are not plain data.
    smuggled = [
        (_set(collections.UserList(), "data", Anything()), [1, 2]),
        (_set(collections.UserString("x"), "data", Anything()), "abc"),
        (_set(fractions.Fraction(1), "_numerator", Anything()), 42),
        (_set(collections.ChainMap(), "maps", [{"a": Anything()}]), {"a": 1}),
        (collections.deque([Anything()]), collections.deque([1])),
        (np.zeros(1).view(UfuncArray), 42),
        (FakeCounter(), collections.Counter("abc")),
    ]
    for fake, value in smuggled:
        assert not strict._harness_eq(fake, value) and not strict._harness_eq(value, fake), fake
        assert not strict._harness_ne(fake, value), fake


def test_no_code_of_a_value_runs_while_it_is_checked():
    # Code run by the check (a property read, an isinstance through __class__) could give the
    # value's class its own __eq__ after it was found to have none.
    class LateByAttribute:
        @property
        def dtype(self):
            type(self).__eq__ = lambda a, b: True
            return None

        __hash__ = object.__hash__

    class LateByClass:
        @property
        def __class__(self):
            LateByClass.__eq__ = lambda a, b: True
            return LateByClass

        __hash__ = object.__hash__

    for late in (LateByAttribute(), LateByClass(), [LateByClass()]):
        assert not strict._harness_eq(late, 42)


def test_views_and_sympy_values_cannot_carry_a_fake():
    class SympyInt(sympy.Integer):
        def __eq__(self, other):
            return True

        __hash__ = sympy.Integer.__hash__

    assert not strict._harness_eq({Anything(): 1}.keys(), {3})
    assert not strict._harness_eq(SympyInt(3), 5)


@given(plain_data, st.lists(plain_data, max_size=4))
def test_membership_in_plain_data_is_pythons(item, container):
    assert strict._harness_in(item, container) == (item in container)
    assert strict._harness_not_in(item, container) == (item not in container)


def test_a_value_with_its_own_equality_is_never_in_plain_data():
    for container in ([1, 2], (3,), {4}, {"k": 5}, "text"):
        assert not strict._harness_in(Anything(), container)
        assert not strict._harness_not_in(Anything(), container)
    assert strict._harness_in(Node(3), [Node(1), Node(3)])  # a problem's own class: its own rules

    class HoldsEverything:
        def __contains__(self, item):
            return True

    class IteratesAnything:
        def __iter__(self):
            return iter([Anything()])

    for container in (HoldsEverything(), IteratesAnything()):
        assert not strict._harness_in(3, container) and not strict._harness_not_in(3, container)
    assert strict._harness_in(2, range(3)) and strict._harness_in("a", {"a": 1}.keys())
    assert strict._harness_in(1, collections.deque([1])) and strict._harness_in(1, collections.UserList([1]))
    namespace = dict(strict._HELPERS, f=lambda: Anything(), g=lambda: 3)
    exec(strict._compile_test("result = [f() in [1, 2], f() not in [1], g() in (3,), 'a' in 'cat']", "t.py"), namespace)
    assert namespace["result"] == [False, False, True, True]
