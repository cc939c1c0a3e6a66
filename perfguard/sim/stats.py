"""The one statistics schema every simulator back end produces.

Counts cover the kernel alone (start-up, input set-up and output checking excluded).
A back end that cannot measure a field leaves it None, never 0. Beside the counts, a back
end that can (QEMU) gives the block profile (perfguard.sim.blocks); to_dict() is the counts
alone, to_record() the counts plus "blocks" when there is a profile.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from perfguard.errors import InputError
from perfguard.sim.blocks import BlockProfile

STAT_FIELDS = (
    "insts",
    "loads",
    "stores",
    "branches",
    "cond_branches",
    "indirect_branches",
    "calls",
    "returns",
    "fp_insts",
    "vec_insts",
    "vec_fp_insts",
    "l1i_accesses",
    "l1i_misses",
    "l1d_accesses",
    "l1d_misses",
    "l1d_writebacks",
    "l2_accesses",
    "l2_misses",
    "l2_writebacks",
)

COUNT_LIMIT = 1 << 64  # every count is an unsigned 64-bit counter in every back end


@dataclass(frozen=True)
class Stats:
    insts: int | None = None
    loads: int | None = None
    stores: int | None = None
    branches: int | None = None
    cond_branches: int | None = None
    indirect_branches: int | None = None
    calls: int | None = None
    returns: int | None = None
    fp_insts: int | None = None
    vec_insts: int | None = None
    vec_fp_insts: int | None = None
    l1i_accesses: int | None = None
    l1i_misses: int | None = None
    l1d_accesses: int | None = None
    l1d_misses: int | None = None
    l1d_writebacks: int | None = None
    l2_accesses: int | None = None
    l2_misses: int | None = None
    l2_writebacks: int | None = None
    blocks: BlockProfile | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in STAT_FIELDS}

    def to_record(self) -> dict:
        """The counts and, when there is one, the block profile: what caches and baselines store."""
        data: dict = self.to_dict()
        if self.blocks is not None:
            data["blocks"] = self.blocks.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: object, source: str = "stats") -> Stats:
        """Validate and build; `source` names the file or object in the error message."""
        if not isinstance(data, dict):
            raise InputError(f"{source}: stats must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(STAT_FIELDS) - {"blocks"})
        if unknown:
            raise InputError(f"{source}: unknown stats field '{unknown[0]}'")
        values = {}
        for name in STAT_FIELDS:
            value = data.get(name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise InputError(f"{source}: stats field '{name}' must be an integer or null, got {value!r}")
                if value < 0:
                    raise InputError(f"{source}: stats field '{name}' is negative ({value})")
                if value >= COUNT_LIMIT:
                    raise InputError(f"{source}: stats field '{name}' does not fit in 64 bits")
            values[name] = value
        blocks = data.get("blocks")
        return cls(**values, blocks=None if blocks is None else BlockProfile.from_dict(blocks, source))

    def scaled(self, factor: float) -> Stats:
        """Counts divided per repetition etc.; rounding keeps them integers."""
        return Stats(
            **{k: (None if v is None else int(round(v * factor))) for k, v in self.to_dict().items()},
            blocks=None if self.blocks is None else self.blocks.scaled(factor),
        )


assert tuple(f.name for f in fields(Stats)) == STAT_FIELDS + ("blocks",)
