"""The PyTorch zip archive, written byte for byte the way torch.save (miniz) lays it out, and written atomically.

    <archive>/data.pkl, .format_version, .storage_alignment, byteorder, data/<key>..., version, .data/serialization_id

Entries are stored (no compression). Each local header carries an extra field 'FB' + length + 'Z' padding so that
the entry's data starts on a 64-byte boundary (torch maps storages straight from the file); sizes and CRC follow
the data in a data descriptor (general-purpose flag bit 3, with bit 11 for UTF-8 names), and the archive ends
with a zip64 end record and locator before the classic end record, as torch always writes them.
"""
import pathlib
import random
import struct
import zlib

from utils.atomic_files import write_atomically

ALIGNMENT = 64
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_DESCRIPTOR = struct.Struct("<IIII")
_ZIP64_END = struct.Struct("<IQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<IIQI")
_END = struct.Struct("<IHHHHIIH")
_FLAGS = 0x0808  # bit 3: sizes in a data descriptor; bit 11: UTF-8 names


def archive_name(path):
    """torch names the archive folder after the file, without its last extension ('last.pt' -> 'last')."""
    name = pathlib.Path(path).name
    return name.rsplit(".", 1)[0] if "." in name[1:] else name


def serialization_id():
    """torch writes a random 40-digit decimal id per file."""
    return "".join(random.SystemRandom().choice("0123456789") for _ in range(40))


def torch_zip_records(pickle_data, storages, name, version="3\n"):
    """The (entry name, bytes) list of a torch.save archive: storages is [(key, raw little-endian bytes)]."""
    records = [(f"{name}/data.pkl", pickle_data), (f"{name}/.format_version", b"1"),
               (f"{name}/.storage_alignment", str(ALIGNMENT).encode()), (f"{name}/byteorder", b"little")]
    records += [(f"{name}/data/{key}", data) for key, data in storages]
    records += [(f"{name}/version", version.encode()), (f"{name}/.data/serialization_id", serialization_id().encode())]
    return records


def write_zip(f, records):
    """Write stored entries with 64-byte aligned data to the binary file f."""
    pos, central = 0, []
    for name, data in records:
        data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        fname = name.encode("utf-8")
        start = pos + _LOCAL.size + len(fname) + 4  # where data would start after a bare 'FB' field header
        pad = (-start) % ALIGNMENT
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        crc = zlib.crc32(data) & 0xFFFFFFFF
        size = len(data)
        if size >= 0xFFFFFFFF or pos >= 0xFFFFFFFF:
            raise ValueError(f"checkpoint entry {name} ({size} bytes at offset {pos}) needs zip64 sizes: over 4 GB")
        header = _LOCAL.pack(0x04034B50, 0, _FLAGS, 0, 0, 0, 0, 0, 0, len(fname), len(extra)) + fname + extra
        f.write(header)
        f.write(data)
        f.write(_DESCRIPTOR.pack(0x08074B50, crc, size, size))
        central.append((fname, crc, size, pos))
        pos += len(header) + size + _DESCRIPTOR.size
    cd_start = pos
    for fname, crc, size, offset in central:
        entry = _CENTRAL.pack(0x02014B50, 0, 0, _FLAGS, 0, 0, 0, crc, size, size, len(fname), 0, 0, 0, 0, 0,
                              offset) + fname
        f.write(entry)
        pos += len(entry)
    n, cd_size = len(central), pos - cd_start
    f.write(_ZIP64_END.pack(0x06064B50, _ZIP64_END.size - 12, 0x031E, 45, 0, 0, n, n, cd_size, cd_start))
    f.write(_ZIP64_LOCATOR.pack(0x07064B50, 0, pos, 1))
    f.write(_END.pack(0x06054B50, 0, 0, n, n, cd_size, cd_start, 0))


def atomic_write(path, write):
    """Call write(binary file) on <name>.<host>.<pid>.yolo-partial<suffix> beside path (last.pt ->
    last.pt.<host>.<pid>.yolo-partial.pt), fsync it, then rename it over path (mode 0644, as torch.save's files): a
    crash or an error mid-save never leaves a half-written file under the final name, a failure raises
    OutputWriteError naming path, and a process killed mid-save leaves a temporary file the next run removes
    (utils/atomic_files.py)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, write, durable=True, mode=0o644)
    return path
