"""Where llvm-mca's timings are cached: a folder per pair of LLVM tools, by their bytes.

sim/mca.py keys each block's timing on its bytes, the CPU and LLVM's version text. A wrapper
script on PATH with the same `--version` (one that adds `-dispatch=1`, say) would then be served
the real tool's timings. So every caller hands mca.py the folder of the tools it will run:
`<cache>/llvm/<sha256 of llvm-mca's and llvm-mc's bytes>`, and another tool fills another folder.
(mca.py's own text is part of the pipeline model's id, which calibrated models are trained
against; the folder is chosen here so that the id stays what the tools' answers make it.)
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from perfguard.fingerprints import tool_identity
from perfguard.signals import log
from perfguard.sim.mca import LLVM_MC, LLVM_MCA

_VERSION_TEXT = re.compile(r"\A[0-9][0-9A-Za-z.+~_-]*\n?\Z")


def timing_cache_dir(cache_dir: Path) -> Path:
    """The folder llvm-mca's timings of the tools on PATH now are cached in (made, and its
    remembered version texts checked: one that is not a version is removed, to be asked again)."""
    tools = ";".join(tool_identity(shutil.which(name) or name) for name in (LLVM_MCA, LLVM_MC))
    folder = Path(cache_dir) / "llvm" / hashlib.sha256(tools.encode()).hexdigest()[:20]
    for memo in (folder / "mca").glob("version-*.txt"):
        try:
            intact = bool(_VERSION_TEXT.match(memo.read_bytes().decode("ascii")))
        except (OSError, UnicodeDecodeError):
            intact = False
        if not intact:
            log(f"{memo}: damaged record ignored (not a version); asking llvm-mca again")
            memo.unlink(missing_ok=True)
    return folder
