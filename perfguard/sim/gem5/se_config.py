"""The gem5 syscall-emulation (SE) configuration script perfguard runs for one target profile.

`generate_se_config` returns the script as Python source; gem5 runs it as
`gem5.opt --outdir=DIR script.py`. It builds one core (atomic, timing, o3 or minor) with classic
caches: private L1I and L1D, an L2 behind an L2XBar, a SystemXBar and one DDR3 memory
controller, with the profile's cache geometry (size, associativity; the line size is the
system's `cache_line_size`) and the profile's clock. The workload is the statically linked
harness binary with its arguments; the guest's stdout and stderr go to files, the guest
environment is empty (QEMU's experience: the environment changes instruction counts).

Only the documented gem5 Python API is used (the objects of `m5.objects`, `m5.instantiate`,
`m5.simulate`, `m5.curTick`, the exit event's `getCause`/`getCode`, `m5.defines.buildEnv`),
as in gem5's own learning_gem5 scripts, so the script runs on gem5 v21 to v24. gem5 dumps
the statistics to DIR/stats.txt when the script ends (gem5 registers that dump at exit),
and writes DIR/config.ini and config.json.

Before building anything the script checks that the gem5 binary was built for the wanted
ISA; if not, it writes a status file saying so and exits with `WRONG_ISA_EXIT`.
When the simulation ends it writes the status file (JSON: exit cause, guest exit code, tick).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path

from perfguard.errors import InputError
from perfguard.targets import TargetProfile

CPU_TYPES = ("atomic", "timing", "o3", "minor")

# exit status of the generated script when the gem5 binary lacks the ISA (any value gem5 itself
# does not use for its own failures, which are 1 for fatal() and negative signals for crashes)
WRONG_ISA_EXIT = 87
NO_CPU_MODEL_EXIT = 88

# target ISA -> gem5's name for it (buildEnv's USE_<NAME>_ISA / TARGET_ISA) and its class prefix
GEM5_ISA = {"x86_64": "x86", "aarch64": "arm", "riscv64": "riscv"}
GEM5_BUILD_DIR = {"x86_64": "X86", "aarch64": "ARM", "riscv64": "RISCV"}
_CLASS_PREFIX = {"x86_64": "X86", "aarch64": "Arm", "riscv64": "Riscv"}

# Latencies in cycles and MSHRs of gem5's classic Cache (these parameters have no default).
# The L1 values are those of gem5's example L1 caches, the L2 values those of its example L2.
L1_TIMING = {"tag_latency": 2, "data_latency": 2, "response_latency": 2, "mshrs": 4, "tgts_per_mshr": 20}
L2_TIMING = {"tag_latency": 20, "data_latency": 20, "response_latency": 20, "mshrs": 20, "tgts_per_mshr": 12}

DEFAULT_MEM_SIZE = 2 * 1024**3  # bytes of simulated DRAM
SYSTEM_CLOCK = "1GHz"  # buses and memory controller; the core, its caches and the L2 use the profile's clock

SCRIPT_NAME = "perfguard_se.py"
STATUS_NAME = "perfguard_status.json"


# x86 CPUs whose code has no VEX/EVEX encodings (AVX, AVX2, FMA, F16C, AVX-512), which gem5's
# x86 decoder (v24) stops at with "Unrecognized/invalid instruction", and no SSE4.1, whose
# PTEST, ROUNDPS and DPPS gem5 24 executes to wrong results (checked against native runs).
# Names as LLVM's -mcpu and gcc's -march spell them; any other CPU may emit either.
GEM5_X86_CPUS = frozenset(
    {
        "x86-64",
        "generic",
        "core2",
        "nocona",
        "k8",
        "opteron",
        "athlon64",
        "k8-sse3",
        "opteron-sse3",
        "athlon64-sse3",
    }
)
_VEX_FEATURES = ("avx", "fma", "f16c", "xop", "vaes", "vpclmulqdq", "amx", "sse4")
GEM5_X86_PROFILE = "x86_64v1"


def _unsafe_source(target: TargetProfile) -> str | None:
    """What in an x86 profile lets its code use AVX or SSE4.1, or None."""
    mcpu = str(target.tvm_target.get("mcpu", "generic"))
    if mcpu not in GEM5_X86_CPUS:
        return f"tvm_target mcpu '{mcpu}'"
    for attr in target.tvm_target.get("mattr", []) or []:
        if str(attr).startswith("+") and str(attr)[1:].startswith(_VEX_FEATURES):
            return f"tvm_target mattr '{attr}'"
    for flag in target.cflags:
        if flag.startswith(("-march=", "-mcpu=")) and flag.split("=", 1)[1] not in GEM5_X86_CPUS:
            return f"cflags '{flag}'"
        if flag.startswith("-m") and flag[2:].startswith(_VEX_FEATURES):
            return f"cflags '{flag}'"
    return None


# Arm CPUs (LLVM -mcpu, gcc -mcpu/-march names) without FEAT_FP16 half-precision arithmetic, which
# gem5 24's AArch64 decoder lacks: it panics "Attempted to execute unknown instruction" on fadd h0,
# fmul v.4h, fmla v.8h and fmov v.8h #imm (checked one at a time; sdot/udot, fcvt and fcvtl to and
# from half precision run). Any other CPU (Cortex-A55/A75/A76 and later, Neoverse) has FP16 and LLVM
# emits it for float16 kernels unless `-fullfp16` is in mattr.
GEM5_ARM_CPUS = frozenset(
    {
        "generic",
        "cortex-a35",
        "cortex-a53",
        "cortex-a57",
        "cortex-a72",
        "cortex-a73",
        "thunderx",
        "thunderx2t99",
        "xgene1",
        "kryo",
        "exynos-m3",
    }
)
_ARM_FP16_FEATURES = ("fullfp16", "fp16fml")
GEM5_ARM_PROFILE = "aarch64"


def _unsafe_arm_source(target: TargetProfile) -> str | None:
    """What in an aarch64 profile lets its code use FP16 arithmetic, or None."""
    mattr = [str(a) for a in target.tvm_target.get("mattr", []) or []]
    disabled = any(a in ("-fullfp16", "-fp16") for a in mattr)
    for attr in mattr:
        if attr.startswith("+") and attr[1:] in _ARM_FP16_FEATURES and not disabled:
            return f"tvm_target mattr '{attr}'"
    mcpu = str(target.tvm_target.get("mcpu", "generic"))
    if mcpu not in GEM5_ARM_CPUS and not disabled:
        return f"tvm_target mcpu '{mcpu}'"
    for flag in target.cflags:
        if flag.startswith(("-march=", "-mcpu=")) and (
            "fp16" in flag.split("=", 1)[1].split("+")[1:] or "fp16fml" in flag
        ):
            return f"cflags '{flag}'"
        if flag.startswith("-mcpu=") and flag.split("=", 1)[1].split("+")[0] not in GEM5_ARM_CPUS:
            return f"cflags '{flag}'"
    return None


def check_decodable(target: TargetProfile) -> None:
    """InputError, before anything is built or simulated, when gem5 cannot run the code the
    profile produces (on x86: AVX and later, which it cannot decode, and SSE4.1, which it runs wrong;
    on aarch64: FP16 half-precision arithmetic, which it cannot decode)."""
    if target.isa == "aarch64":
        source = _unsafe_arm_source(target)
        if source is not None:
            raise InputError(
                f"target '{target.name}': gem5 24 decodes no Armv8.2 FP16 arithmetic (fadd h, fmla v.8h, fmul "
                f"v.4h, fmov v.8h #imm: unknown instruction), and {source} may emit it; use the "
                f"'{GEM5_ARM_PROFILE}' profile (Cortex-A72, no FP16), or keep sdot/udot with mattr "
                f'["+neon", "+dotprod", "-fullfp16"] on base = "aarch64dot"'
            )
        return
    if target.isa != "x86_64":
        return
    source = _unsafe_source(target)
    if source is not None:
        raise InputError(
            f"target '{target.name}': gem5 24 decodes no AVX and runs SSE4.1 to wrong results, and {source} may "
            f"emit either; use the '{GEM5_X86_PROFILE}' profile (x86-64, SSE2) or a base = \"{GEM5_X86_PROFILE}\" target"
        )


def cpu_class_names(isa: str, cpu_type: str) -> tuple[str, ...]:
    """gem5 CPU classes to try, first found wins: the ISA-specific name (gem5 >= 22.1), then
    the name a single-ISA build of older gem5 exports. The script checks the ISA first."""
    if isa not in _CLASS_PREFIX:
        raise InputError(f"gem5: unsupported ISA '{isa}' (one of {', '.join(_CLASS_PREFIX)})")
    prefix = _CLASS_PREFIX[isa]
    if cpu_type == "atomic":
        return (f"{prefix}AtomicSimpleCPU", "AtomicSimpleCPU")
    if cpu_type == "timing":
        return (f"{prefix}TimingSimpleCPU", "TimingSimpleCPU")
    if cpu_type == "o3":
        return (f"{prefix}O3CPU", "DerivO3CPU", "O3CPU")
    if cpu_type == "minor":
        return (f"{prefix}MinorCPU", "MinorCPU")
    raise InputError(f"gem5: unknown CPU type '{cpu_type}' (one of {', '.join(CPU_TYPES)})")


def mem_mode(cpu_type: str) -> str:
    return "atomic" if cpu_type == "atomic" else "timing"


def clock_string(clock_hz: float) -> str:
    """A gem5 frequency string; gem5 turns it into a whole number of 1 ps ticks."""
    if not clock_hz > 0:
        raise InputError(f"gem5: clock must be positive, got {clock_hz!r}")
    mhz = clock_hz / 1e6
    return f"{mhz:.6g}MHz" if mhz >= 1 else f"{clock_hz:.6g}Hz"


def line_size(target: TargetProfile) -> int:
    lines = {target.l1i.line, target.l1d.line, target.l2.line}
    if len(lines) != 1:
        raise InputError(
            f"target '{target.name}': gem5 has one cache line size per system, but l1i/l1d/l2 lines are "
            f"{target.l1i.line}/{target.l1d.line}/{target.l2.line}"
        )
    return lines.pop()


_TEMPLATE = string.Template("""\
# gem5 syscall-emulation configuration generated by perfguard for target $target_name.
# perfguard writes a new one for every run; run it as: gem5.opt --outdir=DIR $script_name
import json
import os
import sys

import m5
import m5.objects
from m5.defines import buildEnv
from m5.objects import (
    AddrRange,
    Cache,
    DDR3_1600_8x8,
    L2XBar,
    MemCtrl,
    Process,
    Root,
    SEWorkload,
    SrcClockDomain,
    System,
    SystemXBar,
    VoltageDomain,
)

GEM5_ISA = $gem5_isa
CPU_TYPE = $cpu_type
CPU_CLASSES = $cpu_classes
MEM_MODE = $mem_mode
BINARY = $binary
ARGV = $argv
WORK_DIR = $work_dir
GUEST_STDOUT = $guest_stdout
GUEST_STDERR = $guest_stderr
STATUS_PATH = $status_path
WRONG_ISA_EXIT = $wrong_isa_exit
NO_CPU_MODEL_EXIT = $no_cpu_model_exit


def write_status(**fields):
    partial = STATUS_PATH + ".partial"
    with open(partial, "w") as handle:
        json.dump(fields, handle)
    os.replace(partial, STATUS_PATH)


def built_isas():
    if "TARGET_ISA" in buildEnv:  # gem5 up to 21.x: one ISA per binary
        return [str(buildEnv["TARGET_ISA"]).lower()]
    names = ("arm", "mips", "power", "riscv", "sparc", "x86")
    return [name for name in names if buildEnv.get("USE_" + name.upper() + "_ISA", False)]


if GEM5_ISA not in built_isas():
    write_status(error="wrong-isa", wanted=GEM5_ISA, built=built_isas())
    sys.stderr.write("perfguard: this gem5 binary has no %s ISA\\n" % GEM5_ISA)
    sys.exit(WRONG_ISA_EXIT)

cpu_class = None
for class_name in CPU_CLASSES:
    cpu_class = getattr(m5.objects, class_name, None)
    if cpu_class is not None:
        break
if cpu_class is None:
    write_status(error="no-cpu-model", wanted=list(CPU_CLASSES))
    sys.stderr.write("perfguard: this gem5 binary has none of %s\\n" % ", ".join(CPU_CLASSES))
    sys.exit(NO_CPU_MODEL_EXIT)

system = System()
system.clk_domain = SrcClockDomain(clock=$system_clock, voltage_domain=VoltageDomain())
system.mem_mode = MEM_MODE
system.mem_ranges = [AddrRange($mem_size)]
system.cache_line_size = $line_size

system.cpu_voltage_domain = VoltageDomain()
system.cpu_clk_domain = SrcClockDomain(clock=$cpu_clock, voltage_domain=system.cpu_voltage_domain)
system.cpu = cpu_class(clk_domain=system.cpu_clk_domain)

system.cpu.icache = Cache(size=$l1i_size, assoc=$l1i_assoc, $l1_timing)
system.cpu.dcache = Cache(size=$l1d_size, assoc=$l1d_assoc, $l1_timing)
system.cpu.icache_port = system.cpu.icache.cpu_side
system.cpu.dcache_port = system.cpu.dcache.cpu_side

system.tol2bus = L2XBar(clk_domain=system.cpu_clk_domain)
system.cpu.icache.mem_side = system.tol2bus.cpu_side_ports
system.cpu.dcache.mem_side = system.tol2bus.cpu_side_ports
system.l2 = Cache(size=$l2_size, assoc=$l2_assoc, $l2_timing, clk_domain=system.cpu_clk_domain)
system.l2.cpu_side = system.tol2bus.mem_side_ports

system.membus = SystemXBar()
system.l2.mem_side = system.membus.cpu_side_ports
system.system_port = system.membus.cpu_side_ports

system.cpu.createInterruptController()
if GEM5_ISA == "x86":  # the x86 local APIC talks to the memory bus directly
    system.cpu.interrupts[0].pio = system.membus.mem_side_ports
    system.cpu.interrupts[0].int_requestor = system.membus.cpu_side_ports
    system.cpu.interrupts[0].int_responder = system.membus.mem_side_ports

system.mem_ctrl = MemCtrl()
system.mem_ctrl.dram = DDR3_1600_8x8()
system.mem_ctrl.dram.range = system.mem_ranges[0]
system.mem_ctrl.port = system.membus.mem_side_ports

if hasattr(SEWorkload, "init_compatible"):  # gem5 >= 21.1 wants a system workload in SE mode
    system.workload = SEWorkload.init_compatible(BINARY)

process = Process()
process.executable = BINARY
process.cmd = ARGV
process.cwd = WORK_DIR
process.env = []
process.output = GUEST_STDOUT
process.errout = GUEST_STDERR
system.cpu.workload = process
system.cpu.createThreads()

root = Root(full_system=False, system=system)
m5.instantiate()
exit_event = m5.simulate()
write_status(cause=exit_event.getCause(), code=exit_event.getCode(), tick=m5.curTick())
""")


def _kwargs(values: dict[str, int]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in values.items())


def generate_se_config(
    target: TargetProfile,
    binary: Path | str,
    argv: Sequence[str],
    run_dir: Path | str,
    *,
    cpu_type: str = "atomic",
    mem_size: int = DEFAULT_MEM_SIZE,
) -> str:
    """The SE-mode script for `target`: run `binary` with `argv` (argv[0] included), write the
    guest's stdout/stderr and perfguard's status file into `run_dir` (absolute paths)."""
    if isinstance(mem_size, bool) or not isinstance(mem_size, int) or mem_size <= 0:
        raise InputError(f"gem5: memory size must be a positive number of bytes, got {mem_size!r}")
    if target.isa not in GEM5_ISA:
        raise InputError(f"target '{target.name}': gem5 back end does not support ISA '{target.isa}'")
    classes = cpu_class_names(target.isa, cpu_type)
    run_dir = Path(run_dir)
    values = {
        "target_name": target.name.replace("\n", " "),
        "script_name": SCRIPT_NAME,
        "gem5_isa": repr(GEM5_ISA[target.isa]),
        "cpu_type": repr(cpu_type),
        "cpu_classes": repr(classes),
        "mem_mode": repr(mem_mode(cpu_type)),
        "binary": repr(str(binary)),
        "argv": repr([str(arg) for arg in argv]),
        "work_dir": repr(str(run_dir)),
        "guest_stdout": repr(str(run_dir / "guest.stdout")),
        "guest_stderr": repr(str(run_dir / "guest.stderr")),
        "status_path": repr(str(run_dir / STATUS_NAME)),
        "wrong_isa_exit": repr(WRONG_ISA_EXIT),
        "no_cpu_model_exit": repr(NO_CPU_MODEL_EXIT),
        "system_clock": repr(SYSTEM_CLOCK),
        "mem_size": repr(f"{mem_size}B"),
        "line_size": repr(line_size(target)),
        "cpu_clock": repr(clock_string(target.clock_hz)),
        "l1i_size": repr(f"{target.l1i.size}B"),
        "l1i_assoc": repr(target.l1i.assoc),
        "l1d_size": repr(f"{target.l1d.size}B"),
        "l1d_assoc": repr(target.l1d.assoc),
        "l2_size": repr(f"{target.l2.size}B"),
        "l2_assoc": repr(target.l2.assoc),
        "l1_timing": _kwargs(L1_TIMING),
        "l2_timing": _kwargs(L2_TIMING),
    }
    return _TEMPLATE.substitute(values)
