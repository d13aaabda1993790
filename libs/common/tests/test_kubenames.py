"""The name rules of ascend_common.kubenames, table-driven after apimachinery's validation tests."""

from __future__ import annotations

import pytest
from ascend_common.kubenames import dns1123_label, dns1123_subdomain, is_uid

LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63]
LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
    "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64,
    "..", "../x", "a/b", "a\0b", "\u0430",
]  # fmt: skip
SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a.a", "ab.a",
    "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1", "0.a",
    "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2", "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55", "a" * 253,
]  # fmt: skip
SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
    "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "A.a",
    "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b", "a:b", "a%b",
    "a?b", "a$b", "a" * 254, "..", "a/../b", "/a", "a\0b",
]  # fmt: skip


@pytest.mark.parametrize("value", LABEL_GOOD)
def test_is_dns1123_label_accepts(value: str) -> None:  # TestIsDNS1123Label
    assert dns1123_label(value)


@pytest.mark.parametrize("value", LABEL_BAD)
def test_is_dns1123_label_refuses(value: str) -> None:  # TestIsDNS1123Label
    assert not dns1123_label(value)


@pytest.mark.parametrize("value", SUBDOMAIN_GOOD)
def test_is_dns1123_subdomain_accepts(value: str) -> None:  # TestIsDNS1123Subdomain
    assert dns1123_subdomain(value)


@pytest.mark.parametrize("value", SUBDOMAIN_BAD)
def test_is_dns1123_subdomain_refuses(value: str) -> None:  # TestIsDNS1123Subdomain
    assert not dns1123_subdomain(value)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", True),
        ("00000000-0000-0000-0000-000000000000", True),
        ("6F1C2D3E-4B5A-4C7D-8E9F-0A1B2C3D4E5F", False),  # the API server writes lowercase
        ("6f1c2d3e4b5a4c7d8e9f0a1b2c3d4e5f", False),
        ("{6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f}", False),
        ("6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f\n", False),
        ("6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5", False),
        ("/../../escape", False),
        ("../victim", False),
        ("", False),
        ("uid-1", False),
    ],
)
def test_is_uid(value: str, ok: bool) -> None:
    assert is_uid(value) is ok
