"""Kubernetes name rules, for names that become host path components (a claim uid, a job, a
namespace): checked where they enter, so a path is only ever built from a name the API server
itself would have accepted.

Ported from k8s.io/apimachinery/pkg/util/validation (IsDNS1123Label, IsDNS1123Subdomain). A uid
is what the API server generates for metadata.uid (a random UUID, types.UID): accepted in its
canonical 36-character form, lowercase hex, `8-4-4-4-12`; anything else is refused.
"""

from __future__ import annotations

import re
from typing import Final

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_UID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def dns1123_label(value: str) -> bool:
    """RFC 1123 label: at most 63 characters, lowercase alphanumerics and `-`, alphanumeric at both ends."""
    return len(value) <= DNS1123_LABEL_MAX and _LABEL.fullmatch(value) is not None


def dns1123_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: at most 253 characters, dot-separated labels."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX and _SUBDOMAIN.fullmatch(value) is not None


def is_uid(value: str) -> bool:
    """A metadata.uid as the API server generates it: a canonical lowercase UUID string."""
    return _UID.fullmatch(value) is not None
