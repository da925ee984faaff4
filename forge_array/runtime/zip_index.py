"""One member of a large zip archive read without reading the archive's directory.

Opening a zip archive with :mod:`zipfile` reads its central directory into one Python object
per member: for the shipped kernels (:mod:`.prebuilt`, thousands of members) tens of
milliseconds, which a fresh process's first call would wait for.  :func:`write` puts an index
beside an archive of hex-named members (``<64 hex digits>.<suffix>``): a header, then one
fixed-size record per member, sorted (the key's 32 bytes, the suffix's number, the offset of
the member's local header).  :class:`Reader` finds a member by binary search over the records,
reads its local header and its bytes at that offset and decompresses them (stored or LZMA, as
:mod:`zipfile` writes them).  A record that does not lead to a local header of that very
name (a damaged file) reads as missing; the index records the archive's size and its central
directory's place and checksum (read and summed at open: a few hundred kilobytes, under a
millisecond), so the index of another archive is never used at all.

>>> import io, os, tempfile, zipfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "a.zip")
>>> with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_LZMA) as z:
...     z.writestr("ab" * 32 + ".ptx", b"kernel")
>>> write(path)
1
>>> Reader(path).read("ab" * 32 + ".ptx")
b'kernel'
>>> Reader(path).read("cd" * 32 + ".ptx") is None
True
"""

from __future__ import annotations

import lzma
import os
import struct
import threading
import zlib

__all__ = ["SUFFIXES", "index_path", "write", "Reader"]

#: the member names' suffixes an index can hold, by their number in a record
SUFFIXES = ("ptx", "cubin", "skeleton")
_MAGIC = b"FAZIDX01"
_HEADER = struct.Struct("<8sQQQII")      # magic, archive size, directory offset, size, crc32; records
_END = struct.Struct("<4s4H2LH")          # zip end of central directory record (22 bytes)
_RECORD = struct.Struct("<32sBQ")         # key, suffix number, local header offset
_LOCAL = struct.Struct("<4s2B4HL2L2H")    # zip local file header (30 bytes)
_ZIP64 = 0xFFFFFFFF                       # sizes and offsets from here on live in zip64 fields


def index_path(archive: str) -> str:
    """Where the index of ``archive`` lies: beside it, ``.idx`` for ``.zip``."""
    return os.path.splitext(archive)[0] + ".idx"


def _parse(name: str):
    """``(key bytes, suffix number)`` of a member name, or None when an index cannot hold it."""
    stem, _, suffix = name.partition(".")
    if len(stem) != 64 or suffix not in SUFFIXES:
        return None
    try:
        return bytes.fromhex(stem), SUFFIXES.index(suffix)
    except ValueError:
        return None


def _directory(f, size: int):
    """``(offset, size, crc32)`` of the central directory of the zip archive open as ``f``
    (``size`` bytes long, without an archive comment), or None."""
    if size < _END.size:
        return None
    f.seek(size - _END.size)
    sig, _, _, _, _, cd_size, cd_offset, comment = _END.unpack(f.read(_END.size))
    if sig != b"PK\x05\x06" or comment or cd_offset + cd_size > size:
        return None
    f.seek(cd_offset)
    return cd_offset, cd_size, zlib.crc32(f.read(cd_size))


def write(archive: str) -> int:
    """Write the index of zip archive ``archive``; returns its number of records, or 0 (and
    no index) when a member's name is not of the indexed form or the archive needs zip64
    fields (it is then read with :mod:`zipfile` alone)."""
    import zipfile  # noqa: PLC0415

    records = []
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            parsed = _parse(info.filename)
            if parsed is None or max(info.header_offset, info.compress_size, info.file_size) >= _ZIP64:
                records = None
                break
            records.append(parsed + (info.header_offset,))
    path = index_path(archive)
    if not records:
        if os.path.exists(path):
            os.unlink(path)
        return 0
    size = os.path.getsize(archive)
    with open(archive, "rb") as f:
        directory = _directory(f, size)
    if directory is None:
        return 0
    records.sort()
    body = b"".join(_RECORD.pack(*r) for r in records)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_HEADER.pack(_MAGIC, size, *directory, len(records)) + body)
    os.replace(tmp, path)
    return len(records)


def _decompress(method: int, data: bytes):
    if method == 0:
        return data
    if method == 8:
        return zlib.decompress(data, -15)
    if method == 14:   # zipfile's LZMA: version (2 bytes), properties' size (2), properties, raw LZMA1
        (size,) = struct.unpack_from("<H", data, 2)
        filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, data[4:4 + size])]  # noqa: SLF001
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters).decompress(data[4 + size:])
    return None


class Reader:
    """The members of zip archive ``archive`` through its index (:func:`write`).
    ``usable`` says whether there is an index of this archive; :meth:`read` returns a
    member's bytes, or None where the index has no such member or it does not read back."""

    def __init__(self, archive: str):
        self._lock = threading.Lock()
        self._file = None
        self._records = b""
        self._count = 0
        try:
            with open(index_path(archive), "rb") as f:
                data = f.read()
            magic, size, cd_offset, cd_size, crc, count = _HEADER.unpack_from(data)
            if magic == _MAGIC and len(data) == _HEADER.size + count * _RECORD.size:
                f = open(archive, "rb")  # noqa: SIM115 - kept open for the process
                actual = os.fstat(f.fileno()).st_size
                if size == actual and _directory(f, actual) == (cd_offset, cd_size, crc):
                    self._records = memoryview(data)[_HEADER.size:]
                    self._count = count
                    self._file = f
                else:
                    f.close()
        except (OSError, struct.error):
            pass

    @property
    def usable(self) -> bool:
        return self._file is not None

    def _offset(self, name: str):
        parsed = _parse(name)
        if parsed is None or not self._count:
            return None
        want = parsed[0] + bytes((parsed[1],))
        lo, hi, r = 0, self._count, _RECORD.size
        while lo < hi:
            mid = (lo + hi) // 2
            if bytes(self._records[mid * r:mid * r + 33]) < want:
                lo = mid + 1
            else:
                hi = mid
        if lo < self._count and bytes(self._records[lo * r:lo * r + 33]) == want:
            return _RECORD.unpack_from(self._records, lo * r)[2]
        return None

    def read(self, name: str):
        offset = self._offset(name)
        if offset is None:
            return None
        try:
            with self._lock:
                self._file.seek(offset)
                head = self._file.read(_LOCAL.size)
                sig, _, _, flags, method, _, _, _, csize, _, nlen, elen = _LOCAL.unpack(head)
                if sig != b"PK\x03\x04" or flags & 0x9:   # encrypted, or sizes after the data
                    return None
                if self._file.read(nlen) != name.encode():
                    return None
                self._file.seek(elen, 1)
                data = self._file.read(csize)
            return _decompress(method, data)
        except (OSError, struct.error, lzma.LZMAError, zlib.error, ValueError):
            return None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
