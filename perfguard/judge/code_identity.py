"""What makes two blocks of two builds the same code: their disassembly with what only says where
the code sits taken out.

Code that moved (another function grew, the C library was linked at another address) keeps its
instructions but not its bytes: a branch or call target, an x86 rip-relative displacement, an
aarch64 adrp page or a riscv64 auipc offset (and the low 12 bits added to it) are relative to
where the code is. `normalised` masks exactly those, so a block that only moved reads the same.

Code of a loop nest that did not change, in a function where another nest did, often comes
out of the register allocator with other registers and other stack slots: `renamed` also
numbers the registers of each block in order of first use (one number per physical register,
whatever width is named) and masks stack-slot offsets, so such a block reads the same as well.
Neither form is ever shown: they are keys (judge.block_pairs).
"""

from __future__ import annotations

import functools
import re

Form = tuple[str, ...]

TARGET, PC, LO12, SLOT = "<target>", "<pc>", "<lo12>", "<slot>"

# -- x86_64 (AT&T syntax, as llvm-mc prints it) -------------------------------------------------
_X86_RELATIVE = re.compile(r"^(j[a-z]+|call[a-z]*|loop[a-z]*|xbegin)\s+-?\d+$")
_X86_RIP = re.compile(r"-?\d+\(%rip\)")
_X86_SLOT = re.compile(r"-?\d+\(%rsp")
_X86_REG = re.compile(r"%([a-z][a-z0-9]*)")
_X86_FIXED = {"rip", "rsp", "esp", "sp", "spl"}


@functools.lru_cache(maxsize=1024)  # a few dozen register names, looked up for every operand
def _x86_family(name: str) -> tuple[str, str] | None:
    """(physical register, width) of an AT&T register name; None for one kept as it is."""
    if name in _X86_FIXED:
        return None
    if m := re.fullmatch(r"([xyz])mm(\d+)", name):
        return f"v{m.group(2)}", m.group(1)
    if m := re.fullmatch(r"r(\d+)([dwb]?)", name):
        return f"r{m.group(1)}", m.group(2) or "q"
    if m := re.fullmatch(r"k([0-7])", name):
        return f"k{m.group(1)}", "k"
    if m := re.fullmatch(r"([re]?)([abcd])([xlh])", name):
        return m.group(2), {"r": "q", "e": "d"}.get(m.group(1), m.group(3))
    if m := re.fullmatch(r"([re]?)(si|di|bp)(l?)", name):
        return m.group(2), {"r": "q", "e": "d"}.get(m.group(1), "b" if m.group(3) else "w")
    return None


def _x86_normalised(asm: Form) -> Form:
    out = []
    for line in asm:
        line = line.split(" #", 1)[0].strip()
        if m := _X86_RELATIVE.match(line):
            line = f"{m.group(1)} {TARGET}"
        out.append(_X86_RIP.sub(f"{PC}(%rip)", line))
    return tuple(out)


def _x86_renamed(form: Form) -> Form:
    numbers: dict[str, int] = {}

    def rename(m: re.Match) -> str:
        family = _x86_family(m.group(1))
        if family is None:
            return m.group(0)
        number = numbers.setdefault(family[0], len(numbers))
        return f"%R{number}{family[1]}"

    return tuple(_X86_REG.sub(rename, _X86_SLOT.sub(f"{SLOT}(%rsp", line)) for line in form)


# -- aarch64 ------------------------------------------------------------------------------------
_A64_BRANCH = re.compile(r"^(b|bl|b\.[a-z]+|cbn?z|tbn?z)\s")
_A64_LITERAL = re.compile(r"^(ldr|ldrsw|prfm)\s+[^\[]*#-?\d+$")  # a load from a pc-relative literal
_A64_IMM = re.compile(r"#-?(0x)?[0-9a-f]+")
_A64_GPR = re.compile(r"\b[xw](\d+)\b")
_A64_BASE = re.compile(r"\[([xw]\d+)")
_A64_REG = re.compile(r"\b([xwqdshbv])(\d+)\b")
_A64_SLOT = re.compile(r"\[sp, #-?\d+\]")


def _a64_gpr(name: str) -> str:
    return _A64_GPR.sub(r"x\1", name)


def _a64_normalised(asm: Form) -> Form:
    out, pages = [], set()  # registers holding an adrp page: the offsets added to them are addresses too
    for line in asm:
        line = line.strip()
        mnemonic, _, operands = line.partition(" ")
        parts = [p.strip() for p in operands.split(",")] if operands else []
        dest = _a64_gpr(parts[0]) if parts else ""
        if mnemonic in ("adrp", "adr"):
            out.append(f"{mnemonic} {parts[0]}, {PC}")
            pages.add(dest)
            continue
        if _A64_BRANCH.match(line) or _A64_LITERAL.match(line):
            at = line.rfind("#")
            out.append(line[:at] + TARGET if at >= 0 else line)
            continue
        bases = [_a64_gpr(b) for b in _A64_BASE.findall(line)]
        if mnemonic == "add" and len(parts) == 3:
            bases.append(_a64_gpr(parts[1]))
        if pages & set(bases):
            line = _A64_IMM.sub("#" + LO12, line)
        if dest in pages and not mnemonic.startswith("st"):
            pages.discard(dest)  # overwritten
        out.append(line)
    return tuple(out)


def _a64_renamed(form: Form) -> Form:
    numbers: dict[str, int] = {}

    def rename(m: re.Match) -> str:
        family = ("g" if m.group(1) in "xw" else "f") + m.group(2)
        return f"{m.group(1)}R{numbers.setdefault(family, len(numbers))}"

    return tuple(_A64_REG.sub(rename, _A64_SLOT.sub(f"[sp, #{SLOT}]", line)) for line in form)


# -- riscv64 ------------------------------------------------------------------------------------
_RV_BRANCH = re.compile(r"^(j|jal|b[a-z]+|c\.j|c\.jal|c\.bn?ez)\s+(.*?)-?\d+$")
_RV_OFFSET = re.compile(r"-?\d+(?=\()")
_RV_BASE = re.compile(r"\((\w+)\)")
_RV_FIXED = {"zero", "sp", "gp", "tp", "ra"}
_RV_REG = re.compile(
    r"\b(t[0-6]|s(?:[0-9]|1[01])|a[0-7]|f(?:t(?:[0-9]|1[01])|s(?:[0-9]|1[01])|a[0-7])|[xf](?:[12]?\d|3[01]))\b"
)
_RV_SLOT = re.compile(r"-?\d+\(sp\)")
_RV_STORE = re.compile(r"^(c\.)?f?s[bhwd](sp)?$")  # writes no register


def _rv_normalised(asm: Form) -> Form:
    out, pages = [], set()  # registers holding an auipc result: what is added to them is an address too
    for line in asm:
        line = line.strip()
        mnemonic, _, operands = line.partition(" ")
        parts = [p.strip() for p in operands.split(",")] if operands else []
        dest = parts[0] if parts else ""
        if mnemonic == "auipc":
            out.append(f"auipc {dest}, {PC}")
            pages.add(dest)
            continue
        if m := _RV_BRANCH.match(line):
            out.append(f"{m.group(1)} {m.group(2)}{TARGET}")
            continue
        bases = _RV_BASE.findall(line)
        if mnemonic in ("addi", "c.addi") and len(parts) == 3:
            bases.append(parts[1])
        if pages & set(bases):
            line = _RV_OFFSET.sub(LO12, line)
            if mnemonic in ("addi", "c.addi"):
                line = re.sub(r", -?\d+$", ", " + LO12, line)
        if dest in pages and not _RV_STORE.match(mnemonic) and not mnemonic.startswith("b"):
            pages.discard(dest)
        out.append(line)
    return tuple(out)


def _rv_renamed(form: Form) -> Form:
    numbers: dict[str, int] = {}

    def rename(m: re.Match) -> str:
        name = m.group(1)
        kind = "f" if name.startswith("f") else "x"
        return f"{kind}R{numbers.setdefault(name, len(numbers))}"

    return tuple(_RV_REG.sub(rename, _RV_SLOT.sub(f"{SLOT}(sp)", line)) for line in form)


_FORMS = {
    "x86_64": (_x86_normalised, _x86_renamed),
    "aarch64": (_a64_normalised, _a64_renamed),
    "riscv64": (_rv_normalised, _rv_renamed),
}


def normalised(asm: Form, isa: str) -> Form:
    """The disassembly with branch and call targets, pc-relative displacements and the page
    offsets added to them masked: equal for code that only moved. An ISA without rules (none
    here) keeps its text: only identical code then reads the same."""
    rules = _FORMS.get(isa)
    return rules[0](tuple(asm)) if rules else tuple(asm)


def renamed(form: Form, isa: str) -> Form:
    """A normalised form with registers numbered by first use and stack-slot offsets masked:
    equal for the same code allocated to other registers."""
    rules = _FORMS.get(isa)
    return rules[1](form) if rules else form
