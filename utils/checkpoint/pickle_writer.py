"""A protocol-2 pickle writer for a small object language, so that checkpoints can name classes (models.yolo.
DetectionModel, torch.nn.modules.conv.Conv2d, torch._utils._rebuild_tensor_v2 ...) that are not importable here:
under OneFlow there is no torch, and the project's own model classes must not be what the file names by identity.

The writer emits what CPython's pickler emits for the same objects at protocol 2 (what torch.save uses): GLOBAL,
NEWOBJ + BUILD for objects, REDUCE for calls, BINPERSID for storages, memoised containers, batched SETITEMS and
APPENDS. Plain Python values (None, bool, int, float, str, tuple, list, dict) are written as themselves; everything
else is described with the node classes below.
"""
import struct

PROTO, STOP, MARK = b"\x80", b".", b"("
NONE, NEWTRUE, NEWFALSE = b"N", b"\x88", b"\x89"
BININT1, BININT2, BININT, LONG1, BINFLOAT = b"K", b"M", b"J", b"\x8a", b"G"
BINUNICODE, EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3, TUPLE = b"X", b")", b"\x85", b"\x86", b"\x87", b"t"
EMPTY_LIST, APPEND, APPENDS, EMPTY_DICT, SETITEM, SETITEMS = b"]", b"a", b"e", b"}", b"s", b"u"
GLOBAL, REDUCE, NEWOBJ, BUILD, BINPERSID = b"c", b"R", b"\x81", b"b", b"Q"
BINPUT, LONG_BINPUT, BINGET, LONG_BINGET = b"q", b"r", b"h", b"j"
_BATCH = 1000  # items per SETITEMS/APPENDS, as CPython batches them


class Global:
    """A module-level name (a class or function) written as GLOBAL 'module name'; equal names share one memo."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __repr__(self):
        return f"Global({self.module}.{self.name})"


class Call:
    """callable(*args), optionally followed by BUILD(state) and dict items (REDUCE, as copyreg reductions do)."""
    __slots__ = ("func", "args", "state", "items")

    def __init__(self, func, args=(), state=None, items=None):
        self.func, self.args, self.state, self.items = func, tuple(args), state, items


class NewObject:
    """cls.__new__(cls) then BUILD(state): how protocol 2 pickles plain instances (nn.Module, Namespace)."""
    __slots__ = ("cls", "state")

    def __init__(self, cls, state):
        self.cls, self.state = cls, state


class PersistentId:
    """BINPERSID of a value (torch's storage records: ('storage', storage class, key, location, numel))."""
    __slots__ = ("pid",)

    def __init__(self, pid):
        self.pid = pid


def ordered_dict(items):
    """collections.OrderedDict(items) as CPython pickles it: OrderedDict() then SETITEMS."""
    return Call(Global("collections", "OrderedDict"), (), items=list(items))


def pickle_bytes(data):
    """bytes at protocol 2: _codecs.encode(latin-1 text, 'latin1'), or bytes() when empty."""
    if not data:
        return Call(Global("__builtin__", "bytes"), ())
    return Call(Global("_codecs", "encode"), (bytes(data).decode("latin-1"), "latin1"))


class PickleWriter:
    """Serialises a node tree; ``dumps(tree)`` returns the pickle bytes. Objects are memoised by identity (a node
    or container met twice is written once and fetched with BINGET), strings and globals by value."""

    def __init__(self):
        self.out = []
        self.memo = {}
        self._alive = []

    def dumps(self, obj):
        self.out = [PROTO, b"\x02"]
        self.memo, self._alive = {}, []
        self.save(obj)
        self.out.append(STOP)
        return b"".join(self.out)

    # ------------------------------------------------------------------------------------------------ memo
    def _put(self, key):
        idx = len(self.memo)
        self.memo[key] = idx
        self.out.append(BINPUT + bytes([idx]) if idx < 256 else LONG_BINPUT + struct.pack("<I", idx))

    def _get(self, key):
        idx = self.memo.get(key)
        if idx is None:
            return False
        self.out.append(BINGET + bytes([idx]) if idx < 256 else LONG_BINGET + struct.pack("<I", idx))
        return True

    # ------------------------------------------------------------------------------------------------ values
    def save(self, x):
        w = self.out.append
        if x is None:
            w(NONE)
        elif x is True or x is False:
            w(NEWTRUE if x else NEWFALSE)
        elif type(x) is int:
            self._int(x)
        elif type(x) is float:
            w(BINFLOAT + struct.pack(">d", x))
        elif type(x) is str:
            self._str(x)
        elif type(x) is tuple:
            self._tuple(x)
        elif type(x) is list:
            self._list(x)
        elif type(x) is dict:
            self._dict(x)
        elif isinstance(x, Global):
            self._global(x)
        elif isinstance(x, Call):
            self._call(x)
        elif isinstance(x, NewObject):
            self._newobj(x)
        elif isinstance(x, PersistentId):
            self.save(x.pid)
            w(BINPERSID)
        else:
            raise TypeError(f"pickle writer: no rule for {type(x).__module__}.{type(x).__name__}")

    def _int(self, x):
        w = self.out.append
        if 0 <= x < 256:
            w(BININT1 + bytes([x]))
        elif 0 <= x < 65536:
            w(BININT2 + struct.pack("<H", x))
        elif -2 ** 31 <= x < 2 ** 31:
            w(BININT + struct.pack("<i", x))
        else:  # two's complement, little-endian, as pickle.encode_long
            n = (x.bit_length() >> 3) + 1
            data = x.to_bytes(n, "little", signed=True)
            if x < 0 and n > 1 and data[-1] == 0xFF and (data[-2] & 0x80):
                data = data[:-1]
            w(LONG1 + bytes([len(data)]) + data)

    def _str(self, s):
        if self._get(("str", s)):
            return
        data = s.encode("utf-8", "surrogatepass")
        self.out.append(BINUNICODE + struct.pack("<I", len(data)) + data)
        self._put(("str", s))

    def _tuple(self, t):
        w = self.out.append
        if not t:
            w(EMPTY_TUPLE)
            return
        if self._get(("id", id(t))):
            return
        if len(t) <= 3:
            for v in t:
                self.save(v)
            w((TUPLE1, TUPLE2, TUPLE3)[len(t) - 1])
        else:
            w(MARK)
            for v in t:
                self.save(v)
            w(TUPLE)
        self._keep(t)
        self._put(("id", id(t)))

    def _keep(self, obj):
        """Hold a reference so that ids stay unique while the tree is written (no temporary is freed and reused)."""
        self._alive.append(obj)

    def _list(self, lst):
        if self._get(("id", id(lst))):
            return
        self.out.append(EMPTY_LIST)
        self._keep(lst)
        self._put(("id", id(lst)))
        self._batch(lst, APPEND, APPENDS, lambda v: self.save(v))

    def _dict(self, d):
        if self._get(("id", id(d))):
            return
        self.out.append(EMPTY_DICT)
        self._keep(d)
        self._put(("id", id(d)))
        self._items(list(d.items()))

    def _items(self, items):
        def one(kv):
            self.save(kv[0])
            self.save(kv[1])
        self._batch(items, SETITEM, SETITEMS, one)

    def _batch(self, seq, single, many, save_one):
        seq = list(seq)
        for i in range(0, len(seq), _BATCH):
            chunk = seq[i:i + _BATCH]
            if len(chunk) == 1:
                save_one(chunk[0])
                self.out.append(single)
            else:
                self.out.append(MARK)
                for v in chunk:
                    save_one(v)
                self.out.append(many)

    def _global(self, g):
        key = ("global", g.module, g.name)
        if self._get(key):
            return
        self.out.append(GLOBAL + f"{g.module}\n{g.name}\n".encode("utf-8"))
        self._put(key)

    def _call(self, c):
        if self._get(("id", id(c))):
            return
        self.save(c.func)
        self.save(c.args)
        self.out.append(REDUCE)
        self._keep(c)
        self._put(("id", id(c)))
        if c.state is not None:
            self.save(c.state)
            self.out.append(BUILD)
        if c.items:
            self._items(c.items)

    def _newobj(self, n):
        if self._get(("id", id(n))):
            return
        self.save(n.cls)
        self.out.append(EMPTY_TUPLE + NEWOBJ)
        self._keep(n)
        self._put(("id", id(n)))
        self.save(n.state)
        self.out.append(BUILD)
