"""The recipes of docs/kernels.md ("Cookbook"): each kernel with its numpy reference, checked by
tests/end_to_end/test_cookbook.py through `perfguard check` on x86_64, aarch64 and riscv64."""
