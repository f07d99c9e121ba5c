"""Paths quoted as git quotes them (core.quotePath), and read back.

grep shows a path as is unless it could pose as another `path:line:text` row or break one:
colons fake a row's fields, a control character or a Unicode line break (U+0085, U+2028,
U+2029) may end it, a bidirectional control may disguise it (`evil\u202eyp.txt` reads
`eviltxt.py` on a screen, CVE-2021-42574's trick). Such a path is quoted: C escapes, else the
octal of the character's UTF-8 bytes (of the byte itself for one that is not UTF-8, a
surrogate escape). The engine reads such a path back when a question quotes a grep row.
"""

from __future__ import annotations

__all__ = ["quoted_path", "unquoted_path"]

_BIDI_CONTROLS = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_C_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}
_C_UNESCAPES = {letter: char.encode() for char, letter in _C_ESCAPES.items()}
_PATH_ESCAPES = {
    **{code: "".join(f"\\{byte:03o}" for byte in chr(code).encode())
       for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *_BIDI_CONTROLS]},
    **{code: f"\\{code - 0xDC00:03o}" for code in range(0xDC80, 0xDD00)},
    **{ord(char): "\\" + letter for char, letter in _C_ESCAPES.items()},
}


def quoted_path(path: str) -> str:
    """`path` as grep shows it: as is, or quoted when it holds a colon or a character of
    _PATH_ESCAPES."""
    escaped = path.translate(_PATH_ESCAPES)
    return f'"{escaped}"' if escaped != path or ":" in path else path


def unquoted_path(body: str) -> str:
    """The path whose quoted form, between its quotes, is `body` (what quoted_path undoes)."""
    out, k = bytearray(), 0
    while k < len(body):
        if body[k] == "\\" and k + 1 < len(body):
            octal = body[k + 1 : k + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal):
                out.append(int(octal, 8) & 0xFF)
                k += 4
                continue
            out += _C_UNESCAPES.get(body[k + 1], body[k + 1].encode("utf-8", "surrogatepass"))
            k += 2
            continue
        out += body[k].encode("utf-8", "surrogatepass")
        k += 1
    return out.decode("utf-8", "surrogateescape")
