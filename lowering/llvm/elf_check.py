"""Cheap structural checks of an ELF relocatable object before MCJIT loads it.

LLVM trusts an object file: a section name out of range, a relocation against a symbol
that is not there, or an external symbol the process lacks ends in `LLVM ERROR` (which
aborts the process) or in undefined behaviour. `check_object` reads the headers, the
section table, the symbol table and the relocations with `struct` and raises CodegenError
unless the file is a relocatable object for this host's machine whose every offset, index
and name stays inside the file, whose relocations are of kinds MCJIT implements, and which
defines the symbols the caller needs. It guards against damage and foreign files, not
against a forger: well-formed machine code can still do anything.

    >>> from lowering.llvm.jit import compile_object
    >>> data = compile_object("define i32 @one() { ret i32 1 }")
    >>> check_object(data, functions=["one"])
    >>> check_object(data[:40])
    Traceback (most recent call last):
    ...
    tessel_errors.CodegenError: not an ELF object: 40 bytes, shorter than an ELF header
"""

from __future__ import annotations

import platform
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tessel_errors import CodegenError

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_REL = struct.Struct("<QQ")
_SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 3, 4, 8, 9
_SHF_WRITE, _SHF_ALLOC, _SHF_EXEC = 0x1, 0x2, 0x4
# section types LLVM writes (null..rel, init/fini arrays, group, x86-64 unwind, LLVM's
# address-significance table, GNU stack note); another type is damage
_SECTION_TYPES = {*range(12), 14, 15, 16, 17, 0x70000001, 0x6FFF4C03, 0x6FFF4C00}
_SYMBOL_TYPES = {0, 1, 2, 3, 4}  # notype, object, func, section, file
_STT_OBJECT, _STT_FUNC = 1, 2
_SHN_ABS, _SHN_COMMON = 0xFFF1, 0xFFF2
_MAX_SECTIONS = 1 << 16
_MAX_ALIGN = 1 << 16
_MAX_NOBITS = 1 << 30

# e_machine of the hosts MCJIT runs on here
_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
# x86-64 relocation types RuntimeDyldELF implements, with the bytes each one writes (an
# unknown type reaches an llvm_unreachable)
_X86_64_RELOCS = {0: 0, 1: 8, 2: 4, 4: 4, 9: 4, 10: 4, 11: 4, 15: 1, 24: 8, 25: 8, 26: 4,
                  29: 8, 41: 4, 42: 4}


@dataclass(frozen=True, slots=True)
class _Section:
    name: int
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, slots=True)
class _Symbol:
    name: str
    type: int
    bind: int
    shndx: int
    value: int
    size: int


def host_machine() -> int:
    """The ELF e_machine code of this host (62 on x86-64), or 0 when not known."""
    return _MACHINES.get(platform.machine().lower(), 0)


def _process_has(name: str) -> bool:
    # what MCJIT's resolver finds: LLVM's own table, then the process (dlsym)
    import ctypes

    import llvmlite.binding as llvm

    if llvm.address_of_symbol(name):
        return True
    try:
        ctypes.CDLL(None)[name]
    except (AttributeError, ValueError):
        return False
    return True


def _fail(what: str) -> CodegenError:
    return CodegenError(f"not a loadable ELF object: {what}")


def _c_string(table: bytes, offset: int, what: str) -> str:
    if offset >= len(table):
        raise _fail(f"{what} name offset {offset} is outside its string table "
                    f"({len(table)} bytes)")
    end = table.find(b"\0", offset)
    if end < 0:
        raise _fail(f"{what} name at offset {offset} is not NUL-terminated")
    return table[offset:end].decode("utf-8", "replace")


def _header(data: bytes) -> tuple[int, int, int]:
    if len(data) < _EHDR.size:
        raise CodegenError(f"not an ELF object: {len(data)} bytes, shorter than an ELF header")
    (ident, e_type, machine, version, _entry, _phoff, shoff, _flags, ehsize, _phentsize,
     phnum, shentsize, shnum, shstrndx) = _EHDR.unpack_from(data)
    if ident[:4] != b"\x7fELF":
        raise CodegenError(f"not an ELF object: it starts with {bytes(ident[:4])!r}, not "
                           "b'\\x7fELF'")
    if ident[4] != 2 or ident[5] != 1:
        raise _fail(f"class {ident[4]} / data {ident[5]}; expected 64-bit little-endian "
                    "(2 / 1)")
    want = host_machine()
    if want and machine != want:
        raise _fail(f"it is for ELF machine {machine}, this host is {want} "
                    f"({platform.machine()}): an object of another architecture")
    if e_type != 1:
        raise _fail(f"ELF type {e_type}; expected 1 (a relocatable object)")
    if version != 1 or ehsize != _EHDR.size or shentsize != _SHDR.size or phnum != 0:
        raise _fail(f"header fields version {version}, header size {ehsize}, section entry "
                    f"size {shentsize}, program headers {phnum}; expected 1, 64, 64, 0")
    if not 0 < shnum < _MAX_SECTIONS or shoff + shnum * _SHDR.size > len(data):
        raise _fail(f"{shnum} section headers at offset {shoff} do not fit in "
                    f"{len(data)} bytes")
    if shstrndx >= shnum:
        raise _fail(f"section-name table index {shstrndx} is not below {shnum} sections")
    return shoff, shnum, shstrndx


def _sections(data: bytes) -> tuple[list[_Section], list[str]]:
    shoff, shnum, shstrndx = _header(data)
    secs = []
    for k in range(shnum):
        name, typ, flags, _addr, off, size, link, info, align, entsize = _SHDR.unpack_from(
            data, shoff + k * _SHDR.size)
        if align & (align - 1) or align > _MAX_ALIGN:  # LLVM asserts a power of two
            raise _fail(f"section {k} has alignment {align}, not a power of two up to "
                        f"{_MAX_ALIGN}")
        if typ not in (0, _SHT_NOBITS) and off + size > len(data):
            raise _fail(f"section {k} ({size} bytes at offset {off}) runs past the end of "
                        f"the file ({len(data)} bytes)")
        if typ not in _SECTION_TYPES:
            raise _fail(f"section {k} has type {typ:#x}, not one LLVM writes")
        if typ == _SHT_NOBITS and size > _MAX_NOBITS:
            raise _fail(f"section {k} asks for {size} zeroed bytes, over {_MAX_NOBITS}")
        if link >= shnum:
            raise _fail(f"section {k} links to section {link} of {shnum}")
        secs.append(_Section(name, typ, flags, off, size, link, info, entsize))
    strtab = secs[shstrndx]
    if strtab.type != _SHT_STRTAB:
        raise _fail(f"section-name table (section {shstrndx}) has type {strtab.type}, not "
                    "a string table")
    table = data[strtab.offset:strtab.offset + strtab.size]
    names = [_c_string(table, s.name, f"section {k}") for k, s in enumerate(secs)]
    return secs, names


def _symbols(data: bytes, secs: list[_Section], k: int) -> list[_Symbol]:
    sec = secs[k]
    if sec.entsize != _SYM.size or sec.size % _SYM.size:
        raise _fail(f"symbol table (section {k}) has entries of {sec.entsize} bytes and "
                    f"size {sec.size}; expected a multiple of {_SYM.size}")
    names = secs[sec.link]
    if names.type != _SHT_STRTAB:
        raise _fail(f"symbol table (section {k}) names section {sec.link}, not a string "
                    "table")
    table = data[names.offset:names.offset + names.size]
    out = []
    for off in range(sec.offset, sec.offset + sec.size, _SYM.size):
        name, info, _other, shndx, value, size = _SYM.unpack_from(data, off)
        sym = _Symbol(_c_string(table, name, "symbol"), info & 0xF, info >> 4, shndx, value,
                      size)
        if sym.type not in _SYMBOL_TYPES:
            raise _fail(f"symbol {sym.name!r} has type {sym.type}, not one LLVM writes here")
        if shndx not in (0, _SHN_ABS, _SHN_COMMON):
            if shndx >= len(secs):
                raise _fail(f"symbol {sym.name!r} is in section {shndx} of {len(secs)}")
            if value + size > secs[shndx].size:
                raise _fail(f"symbol {sym.name!r} ({size} bytes at {value}) runs past its "
                            f"section ({secs[shndx].size} bytes)")
        out.append(sym)
    return out


def _check_relocations(data: bytes, secs: list[_Section], k: int,
                       syms: list[_Symbol]) -> None:
    sec = secs[k]
    entry = _RELA if sec.type == _SHT_RELA else _REL
    if sec.entsize != entry.size or sec.size % entry.size:
        raise _fail(f"relocation section {k} has entries of {sec.entsize} bytes and size "
                    f"{sec.size}; expected a multiple of {entry.size}")
    if secs[sec.link].type != _SHT_SYMTAB or sec.info >= len(secs):
        raise _fail(f"relocation section {k} names symbol table {sec.link} and target "
                    f"section {sec.info}, which are not a symbol table and a section")
    target = secs[sec.info].size
    x86 = host_machine() == 62
    for off in range(sec.offset, sec.offset + sec.size, entry.size):
        r_offset, r_info = entry.unpack_from(data, off)[:2]
        sym, typ = r_info >> 32, r_info & 0xFFFFFFFF
        width = _X86_64_RELOCS.get(typ) if x86 else 4
        if width is None:
            raise _fail(f"relocation section {k} holds relocation type {typ}, which MCJIT "
                        "does not implement")
        if sym >= len(syms) or r_offset + width > target:
            raise _fail(f"relocation section {k}: a relocation at offset {r_offset} (symbol "
                        f"{sym}) falls outside its section ({target} bytes) or symbol table "
                        f"({len(syms)} symbols)")
        s = syms[sym]
        if sym and s.type == 4:  # RuntimeDyld resolves no relocation against a file symbol
            raise _fail(f"relocation section {k} refers to file symbol {s.name!r}")
        if s.shndx < len(secs) and s.shndx and not (secs[s.shndx].flags & _SHF_ALLOC
                                                    and secs[s.shndx].size):
            raise _fail(f"relocation section {k} refers to symbol {s.name!r} in section "
                        f"{s.shndx}, which is empty or not loaded")


def check_object(data: bytes, functions: Iterable[str] = (),
                 data_symbols: Mapping[str, int] | None = None) -> None:
    """Raise CodegenError unless `data` is a well-formed relocatable ELF object for this
    host defining each of `functions` (in executable code) and each of `data_symbols`
    (name -> at least that many writable bytes), every external symbol it uses being one
    this process has.

    `check_object(open("kernel_0.o", "rb").read(), ["fused_dense"], {"__tessel_launch": 8})`
    """
    data = bytes(data)
    secs, _names = _sections(data)
    symtabs = [k for k, s in enumerate(secs) if s.type == _SHT_SYMTAB]
    if len(symtabs) != 1:
        raise _fail(f"{len(symtabs)} symbol tables; expected one")
    syms = _symbols(data, secs, symtabs[0])
    for k, s in enumerate(secs):
        if s.type in (_SHT_RELA, _SHT_REL):
            _check_relocations(data, secs, k, syms)
    defined = {s.name: s for s in syms if s.shndx not in (0, _SHN_ABS, _SHN_COMMON)}
    for name in functions:
        s = defined.get(name)
        if s is None or s.type != _STT_FUNC or not secs[s.shndx].flags & _SHF_EXEC:
            raise _fail(f"it defines no function {name!r}")
    for name, size in (data_symbols or {}).items():
        s = defined.get(name)
        # in a writable section that is not code: MCJIT maps code read-only
        if (s is None or s.type != _STT_OBJECT or s.size < size
                or secs[s.shndx].flags & (_SHF_WRITE | _SHF_EXEC) != _SHF_WRITE):
            raise _fail(f"it defines no writable {size}-byte variable {name!r}")
    for s in syms:
        if s.shndx == 0 and s.bind != 0 and s.name and not _process_has(s.name):
            raise _fail(f"it needs the external symbol {s.name!r}, which this process "
                        "does not have")


__all__ = ["check_object", "host_machine"]
