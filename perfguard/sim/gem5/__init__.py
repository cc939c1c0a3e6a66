"""gem5 back end: read gem5's stats.txt and config.ini/config.json, map them to Stats, run gem5.

One module per part: stats_txt (reading stats.txt), config_ini (config.ini / config.json),
mapping (one dump to Stats, and what a run reports), verify (a run's configuration against the
target), locate (finding gem5), se_config (the SE script perfguard generates), simulator
(running it). How the counts are mapped and why some are null: docs/gem5.md.
"""

from perfguard.sim.gem5.config_ini import CacheInfo, CpuInfo, Gem5Config, config_from_sections, cpu_model, read_config
from perfguard.sim.gem5.locate import ENV_ALL, ENV_BY_ISA, find_gem5, gem5_hint
from perfguard.sim.gem5.mapping import (
    FP_ARITH_CLASSES,
    MAPPING_VERSION,
    NULL_FIELDS,
    NULL_FIELDS_ARM,
    NULL_FIELDS_X86,
    fp_arith_insts,
    gem5_stat_sources,
    mapping_version,
    reported_stats,
    stats_from_file,
    stats_from_gem5,
    subtract_stats,
    whole_line_writes,
)
from perfguard.sim.gem5.simulator import OLDEST_GEM5, Gem5Simulator
from perfguard.sim.gem5.stats_txt import BEGIN_MARK, END_MARK, Dump, Number, parse_stats
from perfguard.sim.gem5.verify import verify_config

__all__ = [
    "BEGIN_MARK",
    "END_MARK",
    "ENV_ALL",
    "ENV_BY_ISA",
    "FP_ARITH_CLASSES",
    "MAPPING_VERSION",
    "NULL_FIELDS",
    "NULL_FIELDS_ARM",
    "NULL_FIELDS_X86",
    "OLDEST_GEM5",
    "CacheInfo",
    "CpuInfo",
    "Dump",
    "Gem5Config",
    "Gem5Simulator",
    "Number",
    "config_from_sections",
    "cpu_model",
    "find_gem5",
    "fp_arith_insts",
    "gem5_hint",
    "gem5_stat_sources",
    "mapping_version",
    "parse_stats",
    "read_config",
    "reported_stats",
    "stats_from_file",
    "stats_from_gem5",
    "subtract_stats",
    "verify_config",
    "whole_line_writes",
]
