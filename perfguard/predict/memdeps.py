"""Dependencies through memory that llvm-mca does not see, found statically in a block's code.

llvm-mca assumes loads and stores never alias. On x86 cores, a load whose address matches a
recent store's in the low 12 bits but differs above them (4K aliasing) is held until the
store's address is fully compared: a false dependency that serialises read-modify-write code
walking an array with a 4 KiB stride (a TVM accumulator buffer indexed [..., f] with a 4 KiB row
runs at a fraction of what llvm-mca predicts). Such a load is found when it and an older store
(this iteration or the previous one: blocks run back to back) use the same base and index
registers, not written inside the block, with displacements that differ by a non-zero multiple
of 4096. Each costs ALIAS_PENALTY cycles per execution on top of llvm-mca's cycles.

x86_64 (AT&T syntax) only: aarch64 and riscv64 blocks are not analysed (their penalty is 0).
"""

from __future__ import annotations

import re

# Cycles a 4K-aliased load loses. Intel documents about 5 cycles; AMD gives no figure. Chosen,
# not fitted: on the verdict pairs any value from 2 to 8 gives the same ranking (RESULTS.md).
ALIAS_PENALTY = 5.0
STORE_WINDOW = 64  # older stores a load is compared with: about a store queue

_MEM = re.compile(r"(-?(?:0x[0-9a-f]+|\d+))?\((%\w+)?(?:,\s*(%\w+)(?:,\s*(\d+))?)?\)")
_NOT_LOADS = ("lea", "nop", "prefetch")
_NOT_STORES = ("cmp", "test", "prefetch", "nop", "lea", "bt", "j", "call", "push")


def _operands(line: str) -> tuple[str, str]:
    parts = line.split("#", 1)[0].strip().split(None, 1)
    return (parts[0] if parts else ""), (parts[1] if len(parts) > 1 else "")


def aliased_loads(asm: tuple[str, ...] | list[str], triple: str) -> int:
    """Loads in one execution of the block that 4K-alias an older store (see the module doc)."""
    if not triple.startswith("x86_64"):
        return 0
    accesses = []  # (index, is_store, (base, index, scale), displacement)
    written: set[str] = set()
    for i, line in enumerate(asm):
        mnemonic, ops = _operands(line)
        dest = ops.rsplit(",", 1)[-1].strip() if ops else ""
        if dest.startswith("%"):
            written.add(dest)
        found = _MEM.search(ops)
        if not found or mnemonic.startswith("rep"):
            continue
        store = dest.endswith(")") and not mnemonic.startswith(_NOT_STORES)
        if not store and mnemonic.startswith(_NOT_LOADS):
            continue
        disp = found.group(1) or "0"
        accesses.append((i, store, found.group(2, 3, 4), int(disp, 16) if "x" in disp else int(disp)))
    stores = [a for a in accesses if a[1]]
    count = 0
    for i, store, regs, disp in accesses:
        if store or regs[0] in written or regs[1] in written:
            continue
        older = [s for s in reversed(stores) if s[0] < i] + [s for s in reversed(stores) if s[0] >= i]
        for _, _, other_regs, other_disp in older[:STORE_WINDOW]:
            if other_regs == regs and other_disp != disp and (other_disp - disp) % 4096 == 0:
                count += 1
                break
            if other_regs == regs and other_disp == disp:
                break  # forwarded from the store it really reads: no false dependency
    return count
