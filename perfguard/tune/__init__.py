"""Autotuning on simulators: MetaSchedule with perfguard's builder and runner, or a search
over a kernel family's knobs, each candidate scored by its predicted run time."""
