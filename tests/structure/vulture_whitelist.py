# Names vulture (tests/structure/test_lint.py) reports as unused that are used from outside the
# package's Python: by name through a registry, by pytest, by a template, by dataclass
# serialisation. vulture reads this file as code that "uses" each name; it is never imported.
# A name that is really dead is removed from the package, not added here.

# Registered by name (perfguard.registry, the kernels' and predictors' FAMILY/NAME tables).
DaskExecutor
CachegrindSimulator
QemuSimulator
NeuralNetwork
GaussianProcess
MultipleLinearRegression
XGBoostPredictor
FAMILY
extracted  # kernels.models.ENTRY, the entry every [[model]] kernel names

# pytest calls these (perfguard.shells.pytest_plugin is a pytest11 entry point).
pytest_addoption
pytest_configure
pytest_runtest_setup
perfguard_check  # a fixture
_.pytest_collection_modifyitems
_.pytest_deselected
_.pytest_runtest_logreport
_.pytest_sessionfinish
_.pytest_terminal_summary
_.runtest
_.reportinfo

# Dataclass fields: written to and read from JSON (reports, baselines, gem5's config) by name.
core_j
l1_j
l2_j
dram_j
vector_fp_share_pct
_.vector_fp_share_pct
phase_model
paired
folded
ridge_intensity
improvement
merged_from
samples
cache_line_size
vec_fp
branches
cond_branches
indirect_branches
returns
fp_insts
vec_insts
l1i_accesses
l1d_accesses
l1d_writebacks
l2_writebacks

# Read by the Jinja templates (compile/templates/harness.c.j2, report/templates/charts/*.j2).
_.dl_code
dash
tip
lx
ly
_.lx
_.ly

# Read by scripts/docs_reference.py (the configuration reference page).
KEY_DOCS

# The vocabulary a field takes, named in the fields' comments and checked by the tests.
BOUNDS
SCHEDULES
REFERENCE_KINDS

# Fitted diagnostics, scikit-learn style (read when a model is inspected, and by benchmarks/).
_.cv_rmse_
_.inner_spearman_
_.last_run_dir  # gem5's last run folder, for benchmarks/verdicts.py and tests/sim/test_gem5.py

# The interval calibration's own fitting and its check (benchmarks/verdicts.py writes
# perfguard/predict/intervals.json with them; tests/predict/test_intervals.py checks them).
calibrate
coverage

# tvm.s_tir.tensor_intrin, set as a module attribute by tune.metaschedule's fast import.
_.tensor_intrin

# runs/bisect.py: used only by a test; removed with bisect's rework (issue 39, items 1-2).
max_visits

# report/disassembly.py: a row's cycles in words, read by templates/kernel.html.j2 (a tooltip).
_.baseline_title
_.current_title

# perfguard.machines: a profile's name and how it names a model file, for the scripts that write
# profiles (benchmarks/machine_profile.py, benchmarks/verdicts.py --machine-profile).
profile_name
model_entry
