"""fingerprints.digest, the one digest of every key (build, simulation, record, model kernel): the
sha256 of each part's UTF-8 bytes followed by a NUL. Its bytes are in every cached result's key and
committed record, so they may not move: checked against hashlib directly and against fixed values
(the ones compile/cache.py's `digest` and fingerprints.py's `_sha` gave before they became one)."""

from __future__ import annotations

import hashlib

import pytest

from perfguard.fingerprints import digest


@pytest.mark.parametrize("parts", [(), ("",), ("build", "x86_64"), ("μ-kernel", ""), ("a\0b",), ("a", "b", "c" * 1000)])
def test_the_digest_is_sha256_of_each_part_and_a_nul(parts):
    assert digest(*parts) == hashlib.sha256(b"".join(p.encode() + b"\0" for p in parts)).hexdigest()


def test_the_digest_keeps_its_bytes():
    assert digest() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest("build", "x86_64") == "c5506b191b00bc22fd36075665296ac86c88a27f627ea0eb7d296e6d41567554"
    assert digest("μ-kernel", "") == "9bf0e0df9ab0478fe8e8af286f3012360120f6f0ebdf016d2f0c426ade3561a4"
    assert digest("ab") != digest("a", "b")  # parts are separated, not concatenated
