"""Reading and rewriting the files of a segment-log repository (borg 1.x, borg2 2.0.0b5) in tests:
the index (BORG_IDX / BORG2IDX buckets), integrity.T's XXH64 digests, segment entries, the config.

Used to make damage real borg never makes on its own but a disk, a tool or a person can (an index
entry that points at another chunk's entry, a config id changed to another valid id), on copies of
repositories real borg made at test time. XXH64 is written out here (Python 3 standard library
only): borg's IntegrityCheckedFile digest is XXH64 over the framed file name and parts
(spec borg1-format.md §3.5).
"""

import json
import os
import re
import struct

# ---- XXH64 (the reference algorithm, seed 0) --------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                           0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
_M = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, lane):
    acc = (acc + lane * _P2) & _M
    return (_rotl(acc, 31) * _P1) & _M


def _merge(acc, val):
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _M


def xxh64(data, seed=0):
    n = len(data)
    p = 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while p + 32 <= n:
            for i in range(4):
                v[i] = _round(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0])
            p += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = _merge(h, x)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while p + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, p)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        p += 8
    if p + 4 <= n:
        h ^= (struct.unpack_from("<I", data, p)[0] * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def _framed(s):
    b = s.encode()
    return b"%10d" % len(b) + b


def integrity_digests(name, data, header_size):
    """The digests borg records for file `name` (header_size 0: no HashHeader part, as hints.T)."""
    buf = _framed(name)
    out = {}
    if header_size:
        buf += data[:header_size] + _framed("HashHeader") + str(header_size).encode()
        out["HashHeader"] = "%016x" % xxh64(buf)
    buf += data[header_size:] + _framed("final") + str(len(data)).encode()
    out["final"] = "%016x" % xxh64(buf)
    return out


def fix_integrity(repo, name, header_size):
    """Rewrites integrity.T's digests of `name` (index.T: 18 or 1024 header bytes; hints.T: 0) so
    that the file passes its integrity check again. The digests are replaced in place (same
    length), so the msgpack framing of integrity.T stays valid."""
    t = name.split(".")[1]
    ipath = os.path.join(repo, "integrity." + t)
    with open(os.path.join(repo, name), "rb") as f:
        data = f.read()
    with open(ipath, "rb") as f:
        integ = f.read()
    key = name.split(".")[0].encode()
    # The JSON text that follows the key in the msgpack map: {"algorithm": ..., "digests": {...}}.
    start = integ.index(key) + len(key)
    brace = integ.index(b"{", start)
    depth, end = 0, brace
    for end in range(brace, len(integ)):
        depth += {ord("{"): 1, ord("}"): -1}.get(integ[end], 0)
        if depth == 0:
            break
    old = json.loads(integ[brace:end + 1])
    new_digests = integrity_digests(name, data, header_size)
    text = integ[brace:end + 1]
    for part, hexdigest in new_digests.items():
        text = text.replace(old["digests"][part].encode(), hexdigest.encode())
    with open(ipath, "wb") as f:
        f.write(integ[:brace] + text + integ[end + 1:])


# ---- the index ---------------------------------------------------------------------------------

class Index:
    """index.T's buckets: BORG_IDX (borg 1.x: 18-byte header, 40-byte buckets) or BORG2IDX
    (2.0.0b5: 1024-byte header, 48-byte buckets)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = bytearray(f.read())
        if self.data[:8] == b"BORG_IDX":
            self.header, self.bucket = 18, 40
        elif self.data[:8] == b"BORG2IDX":
            self.header, self.bucket = 1024, 48
        else:
            raise ValueError("not an index: " + path)

    def entries(self):
        """{id bytes: (bucket number, segment, offset)} of the used buckets."""
        out = {}
        for i in range((len(self.data) - self.header) // self.bucket):
            at = self.header + i * self.bucket
            seg, off = struct.unpack_from("<II", self.data, at + 32)
            if seg in (0xFFFFFFFF, 0xFFFFFFFE):
                continue
            out[bytes(self.data[at:at + 32])] = (i, seg, off)
        return out

    def set_value(self, chunk_id, segment, offset, size=None):
        i = self.entries()[chunk_id][0]
        at = self.header + i * self.bucket + 32
        struct.pack_into("<II", self.data, at, segment, offset)
        if size is not None and self.bucket == 48:
            struct.pack_into("<I", self.data, at + 8, size)

    def value(self, chunk_id):
        i = self.entries()[chunk_id][0]
        at = self.header + i * self.bucket + 32
        return struct.unpack_from("<III" if self.bucket == 48 else "<II", self.data, at)

    def save(self, fix=True):
        with open(self.path, "wb") as f:
            f.write(self.data)
        if fix:
            fix_integrity(os.path.dirname(self.path), os.path.basename(self.path), self.header)


def index_path(repo):
    names = [n for n in os.listdir(repo) if re.fullmatch(r"index\.\d+", n)]
    return os.path.join(repo, max(names, key=lambda n: int(n.split(".")[1])))


def transaction(repo):
    return int(index_path(repo).rsplit(".", 1)[1])


# ---- segments ----------------------------------------------------------------------------------

def segment_path(repo, n, per_dir=1000):
    return os.path.join(repo, "data", str(n // per_dir), str(n))


def segment_entries(path):
    """[(offset, size, tag, id or None)] of a segment file, walked by the sizes in the headers."""
    with open(path, "rb") as f:
        data = f.read()
    out, off = [], 8
    while off + 9 <= len(data):
        _crc, size, tag = struct.unpack_from("<IIB", data, off)
        if size < 9 or off + size > len(data):
            break
        out.append((off, size, tag, bytes(data[off + 9:off + 41]) if tag != 2 else None))
        off += size
    return out


def set_config_id(repo, new_id_hex):
    """Replaces the `id = <hex>` line of an INI config (borg 1.x, 2.0.0b5)."""
    p = os.path.join(repo, "config")
    with open(p) as f:
        text = f.read()
    old = re.search(r"^id = ([0-9a-f]{64})$", text, re.M).group(1)
    with open(p, "w") as f:
        f.write(text.replace("id = " + old, "id = " + new_id_hex))
    return old
