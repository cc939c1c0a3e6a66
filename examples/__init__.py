"""Example models this repository's perfguard.toml guards ([[model]] entries)."""
