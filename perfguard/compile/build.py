"""A lowered kernel built for a target: the build recipe, its key and the toolchain it records.

compile/'s interface, as sim/base.py is sim/'s: `build` turns a LoweredKernel into a linked harness
binary in the content-addressed build cache (or finds it there), keyed by `build_key`: the lowered
IR, the target, the toolchain (`build_toolchain`: compiler, C library, TVM, LLVM's tools, harness
and this recipe) and the tensors as the harness sees them. The compiler is also held by its bytes
(`build_tools`), so a wrapper adding flags is another compiler. Nothing here knows the config or
the job: job/run.py resolves the kernel and hands its lowered form in.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from perfguard import __version__
from perfguard.compile.cache import BuildCache, file_digest
from perfguard.compile.harness import HARNESS_VERSION, fill_digest, render_harness, template_digest, values_digest
from perfguard.compile.loops import ensure_loops
from perfguard.compile.lower import LoweredKernel, build_object
from perfguard.compile.toolchain import cc_version, find_cc, libc_version, link_harness, llvm_version
from perfguard.fingerprints import digest, tool_environment, tool_identity
from perfguard.targets import TargetProfile
from perfguard.timings import measured

# Part of every build key: bump when the build recipe (flags, layout) changes.
BUILD_RECIPE = 1


@dataclass(frozen=True)
class Plan:
    """What a build will be keyed and identified by, known before anything is compiled (a result
    records them even when the build then fails)."""

    toolchain: dict[str, str]  # build_toolchain's
    key: str  # build_key: the content hash every result and baseline records
    tools: str  # build_tools: what the build's marker must also hold to be reused


@dataclass(frozen=True)
class Build:
    """Where a kernel's build is, and whether this run made it."""

    build_dir: Path
    binary_hash: str  # the harness binary's sha256
    rebuilt: bool  # False: found in the cache
    loops: dict | None  # the loop nest (compile.loops), beside the build

    @property
    def binary(self) -> Path:
        return self.build_dir / "harness"


def build_toolchain(cc: str) -> dict[str, str]:
    """The build side of the toolchain every result and baseline records (`simulator` is added by
    the run): what a change of would change the statistics without any change to the kernel."""
    import tvm

    return {
        "cc": cc_version(cc),
        "libc": libc_version(cc),
        "tvm": tvm.__version__,
        "llvm": llvm_version(),
        "harness": f"harness {HARNESS_VERSION}, template {template_digest()[:12]}, build recipe {BUILD_RECIPE}",
        "perfguard": __version__,
    }


def build_key(lowered: LoweredKernel, profile: TargetProfile, toolchain: dict[str, str], code_offset: int = 0) -> str:
    """The content hash a build is cached and recorded under: the lowered IR, the target, the
    toolchain (build_toolchain's) and the harness (with its code offset, where there is one)."""
    offset = (f"code offset {code_offset}",) if code_offset else ()
    return digest(
        lowered.ir_hash,
        profile.fingerprint(),
        toolchain["cc"],
        toolchain["tvm"],
        toolchain["libc"],
        str(HARNESS_VERSION),
        template_digest(),
        str(BUILD_RECIPE),
        layout(lowered),
        *offset,
    )


def build_tools(profile: TargetProfile) -> str:
    """The compiler by its bytes (not its --version: a wrapper adding flags is another compiler)
    and the variables that change what it does: what a build's marker must also hold to be reused."""
    return f"{tool_identity(profile.cc)};{tool_environment()}"


def layout(lowered: LoweredKernel) -> str:
    """The tensors as the harness sees them: `outputs` decides which ones it prints."""
    return json.dumps(
        [
            [
                t.name,
                list(t.shape),
                t.dtype,
                t.output,
                *(
                    [t.configured(), values_digest() if t.values is not None else fill_digest()]
                    if t.configured() is not None
                    else []
                ),
            ]  # configured values: their C too
            for t in lowered.tensors
        ]
    )


def plan(lowered: LoweredKernel, profile: TargetProfile, code_offset: int = 0) -> Plan:
    toolchain = build_toolchain(find_cc(profile))
    return Plan(toolchain, build_key(lowered, profile, toolchain, code_offset), build_tools(profile))


def build(
    planned: Plan,
    lowered: LoweredKernel,
    profile: TargetProfile,
    cache_dir: Path,
    where: str,
    code_offset: int = 0,
    recompute: bool = False,
    timings: dict | None = None,
) -> Build:
    """Compile and link `lowered` for `profile` as `planned` (or find it all in the cache;
    `recompute`: build it anew). `where` names the kernel in errors; `timings` gets the "compile" span."""
    cache = BuildCache(cache_dir)
    build_dir = None if recompute else cache.lookup_build(planned.key, planned.tools)
    rebuilt = build_dir is None
    with measured(timings if timings is not None else {}, "compile"):
        if build_dir is None:
            staging = cache.staging_dir()
            try:
                build_object(lowered, profile.tvm_target, staging / "kernel.o", where)
                (staging / "harness.c").write_text(render_harness(lowered.symbol, lowered.tensors))
                link_harness(
                    profile, staging / "harness.c", staging / "kernel.o", staging / "harness", where, code_offset
                )
                binary_hash = file_digest(staging / "harness")  # this build's, whichever folder is kept
                build_dir = cache.publish_build(planned.key, staging, planned.tools)
            except BaseException:  # a failed build leaves nothing behind in the cache
                shutil.rmtree(staging, ignore_errors=True)
                raise
        else:
            binary_hash = cache.built_file_sha(planned.key, "harness")
        # beside the build, not in its key; the module is made only when the nest is not recorded yet
        loops = ensure_loops(build_dir, lambda: lowered.mod, profile.tvm_target)
    return Build(build_dir, binary_hash, rebuilt, loops)
