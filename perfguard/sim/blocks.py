"""The block profile: every translated block executed in the region of interest.

Each block is its start address, size in bytes, instruction count, execution count, its
machine code (hex), so a pipeline model can re-score a stored baseline without the binary,
and the function it starts in ("" if unknown), for attribution.
Compact and versioned: {"version": 1, "blocks": [[addr, size, insns, count, code, symbol], ...]},
sorted, with blocks that QEMU translated more than once at the same address with the same
code merged (their counts add up). Blocks of different lengths at one address (QEMU split a
block differently the second time) stay apart: each ran as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfguard.errors import InputError

PROFILE_VERSION = 1
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Block:
    addr: int
    size: int  # bytes
    insns: int
    count: int  # executions inside the region(s) of interest
    code: str  # the block's bytes, lower-case hex
    symbol: str = ""  # the function the block starts in, "" if unknown

    @property
    def end(self) -> int:
        return self.addr + self.size


@dataclass(frozen=True)
class BlockProfile:
    blocks: tuple[Block, ...]

    @classmethod
    def merged(cls, blocks: list[Block]) -> BlockProfile:
        """Sum the counts of identical blocks and sort: the same run gives the same profile."""
        counts: dict[tuple[int, int, int, str, str], int] = {}
        for b in blocks:
            key = (b.addr, b.size, b.insns, b.code, b.symbol)
            counts[key] = counts.get(key, 0) + b.count
        return cls(tuple(Block(a, s, n, c, code, sym) for (a, s, n, code, sym), c in sorted(counts.items())))

    @property
    def insts(self) -> int:
        return sum(b.insns * b.count for b in self.blocks)

    def scaled(self, factor: float) -> BlockProfile:
        return BlockProfile(
            tuple(Block(b.addr, b.size, b.insns, int(round(b.count * factor)), b.code, b.symbol) for b in self.blocks)
        )

    def to_dict(self) -> dict:
        return {
            "version": PROFILE_VERSION,
            "blocks": [[b.addr, b.size, b.insns, b.count, b.code, b.symbol] for b in self.blocks],
        }

    @classmethod
    def from_dict(cls, data: object, source: str) -> BlockProfile:
        where = f"{source}: block profile"
        if not isinstance(data, dict) or set(data) != {"version", "blocks"}:
            raise InputError(f"{where} must be an object with 'version' and 'blocks'")
        if data["version"] != PROFILE_VERSION:
            raise InputError(f"{where} version {data['version']!r} is not {PROFILE_VERSION} (re-record it)")
        if not isinstance(data["blocks"], list):
            raise InputError(f"{where}: 'blocks' must be a list")
        blocks = []
        for i, row in enumerate(data["blocks"]):
            if not (
                isinstance(row, list)
                and len(row) == 6
                and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64 for v in row[:4])
                and isinstance(row[4], str)
                and isinstance(row[5], str)
            ):
                raise InputError(f"{where}: block {i} must be [addr, size, insns, count, code-hex, symbol]")
            addr, size, insns, count, code, symbol = row
            if len(code) != 2 * size or not set(code) <= _HEX or insns < 1 or insns > size:
                raise InputError(
                    f"{where}: block {i} at 0x{addr:x}: code is not {size} bytes of lower-case "
                    f"hex or its instruction count {insns} does not fit"
                )
            blocks.append(Block(addr, size, insns, count, code, symbol))
        profile = cls.merged(blocks)
        if len(profile.blocks) != len(blocks) or list(profile.blocks) != blocks:
            raise InputError(f"{where}: blocks are not sorted and distinct")
        return profile


def parse_block_lines(lines: list[str], source: str, first_line: int) -> BlockProfile:
    """The plugin's block lines ("ADDR_HEX SIZE INSNS COUNT CODE_HEX SYMBOL"), merged and sorted."""
    blocks = []
    for number, line in enumerate(lines, start=first_line):
        parts = line.split(" ")
        try:
            if len(parts) != 6:
                raise ValueError
            addr = int(parts[0], 16)
            size, insns, count = (int(p) for p in parts[1:4])
            code, symbol = parts[4], "" if parts[5] == "-" else parts[5]
            if not set(code) <= _HEX or len(code) != 2 * size or insns < 1 or count < 1 or size < insns:
                raise ValueError
        except ValueError:
            raise InputError(
                f"{source}: line {number}: not a block line 'ADDR SIZE INSNS COUNT CODE SYMBOL': {line[:80]!r}"
            ) from None
        blocks.append(Block(addr, size, insns, count, code, symbol))
    return BlockProfile.merged(blocks)
