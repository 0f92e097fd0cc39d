"""Plain data across a process boundary: the only thing a solution and its tests exchange.

The function-test harness (:mod:`sandboxes.harness`) runs a solution and the tests that judge it
in two processes. Every call the tests make of the solution's names, and everything that comes
back, crosses between them through this module: values are *encoded* to JSON on one side and
*rebuilt* as builtins on the other. Nothing else crosses: no object, no code, no reference to
the other process's memory. The side that judges (the test process) validates every frame, so
a solution that writes anything at all to its end of the connection can only fail its tests.

Values that cross (nested in any combination):

==============================  ========================================================
``None``, ``bool``, ``int``     JSON ``null``/``true``/``false``/integers; an int of 63
                                bits or more as ``["I", hex]`` (no digit limit applies)
``float``                       a JSON number (``NaN``, ``Infinity``, ``-Infinity``
                                included), exactly as ``repr`` writes it
``complex``                     ``["c", real, imag]``
``str``                         a JSON string
``bytes`` (``bytearray``)       ``["b", base64]``
``list``, ``tuple``             ``["l", [items]]``, ``["t", [items]]``
``set``, ``frozenset``          ``["s", [items]]``, ``["fs", [items]]``
``dict``                        ``["d", [key, value, key, value, ...]]``
a generator, builtin iterator   ``["it", [items]]``: run to its end on the sending
(``map``, ``zip``, ``filter``,  side, rebuilt as an iterator over the items (truthy, no
``enumerate``, ``iter(list)``)  ``len``, equal only to itself, as a generator is)
an object of the solution's     ``["h", id]``: an opaque handle; the object stays where
                                it was made (only the solution's side makes handles)
==============================  ========================================================

A JSON list is always one of these tagged forms, so no data can pass for another type. A
subclass of a builtin type crosses as its base type's value (a namedtuple as a tuple, an
``IntEnum`` as an int, an ``OrderedDict`` as a dict), and so do numpy arrays and scalars
(``tolist()``/``item()``); on the receiving side every value is rebuilt as the exact builtin
type, so no ``__eq__``, ``__hash__`` or ``__bool__`` of the sender's reaches the receiver.

Limits (the receiver checks them; anything beyond fails the call, it is never accepted in part):

* :data:`MAX_FRAME_BYTES` per frame (a frame is a 4-byte big-endian length, then UTF-8 JSON);
* :data:`MAX_DEPTH` levels of nesting of containers;
* :data:`MAX_TEXT_CHARS` for a message or a type name carried with an exception.

This module is standard library only and keeps its names private: its source is sent into the
sandbox ahead of the harness driver (``sandboxes/_function_driver.py``); on the host it is
imported to test it.
"""

import base64 as _base64
import json as _json
import struct as _struct

#: Largest frame either side accepts, in bytes (the value of the largest test argument or result
#: must fit, JSON-encoded).
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: Deepest nesting of containers that crosses (a deeper value fails the call, on either side).
MAX_DEPTH = 100
#: Longest exception message or stdout text kept from the solution's side, in characters.
MAX_TEXT_CHARS = 2000
_HEADER = _struct.Struct(">I")
_SMALL_INT = 1 << 62


class CrossingError(Exception):
    """A value cannot cross (not plain data, too large, too deep) or a frame is malformed."""


# ---------------------------------------------------------------------------------------------
# framing


def send_frame(sock, message):
    """Write one frame holding ``message`` (JSON-encodable) on a connected stream socket."""
    body = _json.dumps(message, separators=(",", ":"), allow_nan=True).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise CrossingError("a message of %d bytes is over the %d-byte limit" % (len(body), MAX_FRAME_BYTES))
    sock.sendall(_HEADER.pack(len(body)) + body)


def _recv_exact(sock, size):
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock):
    """Read one frame; its JSON value. Raises `CrossingError` for an oversized or malformed frame
    and ``EOFError`` when the peer is gone."""
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if size > MAX_FRAME_BYTES:
        raise CrossingError("a frame of %d bytes is over the %d-byte limit" % (size, MAX_FRAME_BYTES))
    body = _recv_exact(sock, size)
    try:
        return _json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as exc:
        raise CrossingError("a malformed frame (%s)" % type(exc).__name__) from None


# ---------------------------------------------------------------------------------------------
# values


def _numpy_value(value):
    """A numpy array or scalar as builtins (``tolist``/``item``), else the value itself."""
    module = getattr(type(value), "__module__", "") or ""
    if type(module) is str and module.partition(".")[0] == "numpy":
        convert = getattr(value, "tolist", None)
        if callable(convert):
            return convert()
    return value


def encode(value, make_handle=None, depth=0):
    """``value`` as its JSON form (see the module docstring).

    ``make_handle(obj) -> int`` turns an object that is not data into a handle; without it such
    an object raises `CrossingError` naming its type.
    """
    if depth > MAX_DEPTH:
        raise CrossingError("a value nested more than %d levels deep" % MAX_DEPTH)
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -_SMALL_INT < value < _SMALL_INT else ["I", format(value, "x")]
    if kind is float:
        return value
    if kind is list or kind is tuple:
        items = [encode(item, make_handle, depth + 1) for item in value]
        return ["l" if kind is list else "t", items]
    if kind is dict:
        flat = []
        for key, item in value.items():
            flat.append(encode(key, make_handle, depth + 1))
            flat.append(encode(item, make_handle, depth + 1))
        return ["d", flat]
    if kind is set or kind is frozenset:
        return ["s" if kind is set else "fs", [encode(item, make_handle, depth + 1) for item in value]]
    if kind is complex:
        return ["c", value.real, value.imag]
    if kind in _ITERATOR_TYPES:
        return ["it", [encode(item, make_handle, depth + 1) for item in value]]
    if kind is bytes or kind is bytearray:
        return ["b", _base64.b64encode(value).decode("ascii")]
    # Subclasses of builtin data cross as their base's value; numpy as builtins.
    # (Read through the base type's own methods; depth grows, so a value that converts into
    # itself again cannot loop.)
    converted = _numpy_value(value)
    if converted is not value:
        return encode(converted, make_handle, depth + 1)
    for base, plain in _BASES:
        if isinstance(value, base):
            return encode(plain(value), make_handle, depth + 1)
    if make_handle is None:
        raise CrossingError("a value of type %s is not plain data and cannot cross" % _type_name(value))
    return ["h", make_handle(value)]


def _iterator_types():
    import types

    samples = (iter([]), iter(()), iter(range(0)), iter(range(1 << 64)), iter(""), iter(b""), iter(bytearray()),
               iter(set()), iter({}), iter({}.values()), iter({}.items()), reversed([]), reversed(range(0)),
               reversed({}), map(None, ()), filter(None, ()), zip(), enumerate(()))
    return frozenset([type(sample) for sample in samples] + [types.GeneratorType])


#: Generators and the builtin iterators, which cross as the items they yield (["it", [...]]).
_ITERATOR_TYPES = _iterator_types()

_BASES = (
    (int, int.__int__),  # bool and IntEnum included (bool is an exact type, handled above)
    (float, float.__float__),
    (complex, complex.__complex__),
    (str, str.__str__),
    (bytes, bytes.__bytes__),
    (bytearray, bytes),
    (tuple, lambda value: tuple(tuple.__iter__(value))),
    (list, lambda value: list(list.__iter__(value))),
    (dict, lambda value: dict(dict.items(value))),
    (frozenset, lambda value: frozenset(frozenset.__iter__(value))),
    (set, lambda value: set(set.__iter__(value))),
)


def _type_name(value):
    name = getattr(type(value), "__qualname__", None)
    return name if type(name) is str and len(name) <= 100 else "object"


def decode(data, resolve_handle=None, depth=0):
    """The value a JSON form stands for, rebuilt from builtins only.

    ``resolve_handle(id) -> object`` rebuilds a handle; without it a handle raises
    `CrossingError`. Anything that is not a well-formed form (see the module docstring), or
    nested deeper than :data:`MAX_DEPTH`, raises `CrossingError`.
    """
    if depth > MAX_DEPTH:
        raise CrossingError("a value nested more than %d levels deep" % MAX_DEPTH)
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is float or kind is str:
        return data
    if kind is not list or len(data) < 2 or type(data[0]) is not str:
        raise CrossingError("a malformed value")
    tag = data[0]
    if tag in ("l", "t", "s", "fs", "d", "it"):
        if len(data) != 2 or type(data[1]) is not list:
            raise CrossingError("a malformed container")
        items = [decode(item, resolve_handle, depth + 1) for item in data[1]]
        try:
            if tag == "l":
                return items
            if tag == "it":
                return iter(items)
            if tag == "t":
                return tuple(items)
            if tag == "s":
                return set(items)
            if tag == "fs":
                return frozenset(items)
            if len(items) % 2:
                raise CrossingError("a malformed dict")
            return dict(zip(items[0::2], items[1::2]))
        except TypeError:
            raise CrossingError("an unhashable set element or dict key") from None
    if len(data) == 2 and type(data[1]) is str and tag == "I":
        try:
            return int(data[1], 16)
        except ValueError:
            raise CrossingError("a malformed integer") from None
    if len(data) == 2 and type(data[1]) is str and tag == "b":
        try:
            return _base64.b64decode(data[1].encode("ascii"), validate=True)
        except ValueError:
            raise CrossingError("malformed bytes") from None
    if tag == "c" and len(data) == 3 and all(type(part) in (int, float) for part in data[1:]):
        return complex(float(data[1]), float(data[2]))
    if tag == "h" and len(data) == 2 and type(data[1]) is int:
        if resolve_handle is None:
            raise CrossingError("an object handle where only data may cross")
        return resolve_handle(data[1])
    raise CrossingError("a malformed value (tag %r)" % tag[:20])


def text(value, limit=MAX_TEXT_CHARS):
    """``value`` if it is a ``str`` (cut to ``limit`` characters), else raise `CrossingError`."""
    if type(value) is not str:
        raise CrossingError("a text field that is not a string")
    return value[:limit]
