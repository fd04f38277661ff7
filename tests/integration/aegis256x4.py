"""AEGIS-256X4 (RFC 10032) in plain Python, written from the RFC rather than
from gandiva's code, so that a test can speak the migration bulk channel by
hand. Slow (a few hundred KiB per second) and not constant-time: for tests.

    seal(key, nonce, ad, msg) -> ct + tag     open_(key, nonce, ad, ct_and_tag) -> msg
"""


def _sbox():
    box = [0] * 256
    p = q = 1
    while True:
        p = (p ^ (p << 1) ^ (0x1B if p & 0x80 else 0)) & 0xFF  # times 3
        q ^= q << 1                                             # divided by 3
        q ^= q << 2
        q ^= q << 4
        q &= 0xFF
        if q & 0x80:
            q ^= 0x09
        rot = lambda x, k: ((x << k) | (x >> (8 - k))) & 0xFF
        box[p] = q ^ rot(q, 1) ^ rot(q, 2) ^ rot(q, 3) ^ rot(q, 4) ^ 0x63
        if p == 1:
            break
    box[0] = 0x63
    return box


def _tables():
    """T[r][x]: what byte x of row r adds to its column after SubBytes and
    MixColumns (a 32-bit little-endian column: byte k is row k)."""
    s = _sbox()
    times2 = lambda x: ((x << 1) ^ (0x1B if x & 0x80 else 0)) & 0xFF
    tables = []
    for r in range(4):
        t = []
        for x in range(256):
            v = s[x]
            rows = {r: times2(v), (r - 1) % 4: times2(v) ^ v, (r - 2) % 4: v, (r - 3) % 4: v}
            t.append(sum(b << (8 * k) for k, b in rows.items()))
        tables.append(t)
    return tables


_T = _tables()
_MASK = (1 << 128) - 1
_C0 = int.from_bytes(bytes.fromhex("000101020305080d1522375990e97962"), "little")
_C1 = int.from_bytes(bytes.fromhex("db3d18556dc22ff12011314273b528dd"), "little")
LANES = 4
RATE = 16 * LANES


def aes_round(block, round_key):
    """SubBytes, ShiftRows, MixColumns, AddRoundKey on 128-bit ints (little-endian bytes)."""
    b = block.to_bytes(16, "little")
    out = 0
    for c in range(4):
        col = (_T[0][b[4 * c]] ^ _T[1][b[4 * ((c + 1) % 4) + 1]] ^
               _T[2][b[4 * ((c + 2) % 4) + 2]] ^ _T[3][b[4 * ((c + 3) % 4) + 3]])
        out |= col << (32 * c)
    return out ^ round_key


class _State:
    def __init__(self, key, nonce):
        k0, k1 = int.from_bytes(key[:16], "little"), int.from_bytes(key[16:], "little")
        n0, n1 = int.from_bytes(nonce[:16], "little"), int.from_bytes(nonce[16:], "little")
        self.v = [[k0 ^ n0, k1 ^ n1, _C1, _C0, k0 ^ _C0, k1 ^ _C1] for _ in range(LANES)]
        ctx = [i | (LANES - 1) << 8 for i in range(LANES)]
        for _ in range(4):
            for m in (k0, k1, k0 ^ n0, k1 ^ n1):
                for i in range(LANES):
                    self.v[i][3] ^= ctx[i]
                    self.v[i][5] ^= ctx[i]
                self.update([m] * LANES)

    def update(self, m):
        for i, v in enumerate(self.v):
            self.v[i] = [aes_round(v[5], v[0] ^ m[i])] + [aes_round(v[j - 1], v[j]) for j in range(1, 6)]

    def keystream(self):
        return [v[1] ^ v[4] ^ v[5] ^ (v[2] & v[3]) for v in self.v]

    def finalize(self, ad_len, msg_len):
        u = (ad_len * 8) | (msg_len * 8) << 64
        t = [v[3] ^ u for v in self.v]
        for _ in range(7):
            self.update(t)
        tag = 0
        for v in self.v:
            for x in v:
                tag ^= x
        return tag.to_bytes(16, "little")


def _blocks(data):
    for at in range(0, len(data), RATE):
        piece = data[at:at + RATE]
        yield piece, [int.from_bytes(piece.ljust(RATE, b"\0")[16 * i:16 * i + 16], "little")
                      for i in range(LANES)]


def _lanes_to_bytes(lanes):
    return b"".join(x.to_bytes(16, "little") for x in lanes)


def _crypt(key, nonce, ad, data, decrypt):
    s = _State(key, nonce)
    for _, m in _blocks(ad):
        s.update(m)
    out = b""
    for piece, x in _blocks(data):
        z = s.keystream()
        y = _lanes_to_bytes([a ^ b for a, b in zip(x, z)])[:len(piece)]
        out += y
        plain = y if decrypt else piece
        s.update([int.from_bytes(plain.ljust(RATE, b"\0")[16 * i:16 * i + 16], "little")
                  for i in range(LANES)])
    return out, s.finalize(len(ad), len(data))


def seal(key, nonce, ad, msg):
    ct, tag = _crypt(key, nonce, ad, msg, False)
    return ct + tag


def open_(key, nonce, ad, sealed):
    msg, tag = _crypt(key, nonce, ad, sealed[:-16], True)
    if tag != sealed[-16:]:
        raise ValueError("AEGIS-256X4 tag mismatch")
    return msg


def _self_check():
    """RFC 10032's AEGIS-256X4 test vector 2 (and the AES round's vector)."""
    assert aes_round(int.from_bytes(bytes(range(16)), "little"),
                     int.from_bytes(bytes(range(16, 32)), "little")).to_bytes(16, "little") == \
        bytes.fromhex("7a7b4e5638782546a8c0477a3b813f43")
    key, nonce = bytes(range(32)), bytes(range(16, 48))
    msg = bytes.fromhex("04050607") * 30
    sealed = seal(key, nonce, bytes.fromhex("0102030401020304"), msg)
    assert sealed[:-16].hex().startswith("bfc2085b7e8017da99b0b6d646ae4d01"), sealed.hex()
    assert sealed[-16:].hex() == "b63b611b13975e2f3dc3cb6c2397bfcd", sealed[-16:].hex()
    assert open_(key, nonce, bytes.fromhex("0102030401020304"), sealed) == msg


_self_check()
