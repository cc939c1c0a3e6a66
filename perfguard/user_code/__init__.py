"""User code: importing a configuration's own modules (imports.py) and recording what they read (reads.py)."""
