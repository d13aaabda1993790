"""vNPU templates: DCMI template names, resource suffixes and the templates each chip allows."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascend_common.chip_traits import TRAITS
from ascend_common.chips import ChipFamily


@dataclass(frozen=True)
class VnpuTemplate:
    name: str  # the DCMI template name, e.g. "vir02_1c"
    suffix: str  # the resource suffix, e.g. "2c.1cpu"

    @property
    def aicore(self) -> int:
        """AI cores = the number after `vir`."""
        m = re.match(r"vir(\d+)", self.name)
        assert m is not None
        return int(m.group(1))


TEMPLATES: dict[str, VnpuTemplate] = {
    t.name: t
    for t in (
        VnpuTemplate("vir01", "1c"),
        VnpuTemplate("vir02", "2c"),
        VnpuTemplate("vir02_1c", "2c.1cpu"),
        VnpuTemplate("vir03_1c_8g", "3c.1cpu.8g"),
        VnpuTemplate("vir04", "4c"),
        VnpuTemplate("vir04_3c", "4c.3cpu"),
        VnpuTemplate("vir04_3c_ndvpp", "4c.3cpu.ndvpp"),
        VnpuTemplate("vir04_4c_dvpp", "4c.4cpu.dvpp"),
        VnpuTemplate("vir05_1c_8g", "5c.1cpu.8g"),
        VnpuTemplate("vir05_1c_16g", "5c.1cpu.16g"),
        VnpuTemplate("vir06_1c_16g", "6c.1cpu.16g"),
        VnpuTemplate("vir08", "8c"),
        VnpuTemplate("vir10_3c_16g", "10c.3cpu.16g"),
        VnpuTemplate("vir10_3c_16g_nm", "10c.3cpu.16g.ndvpp"),
        VnpuTemplate("vir10_3c_32g", "10c.3cpu.32g"),
        VnpuTemplate("vir10_4c_16g_m", "10c.4cpu.16g.dvpp"),
        VnpuTemplate("vir12_3c_32g", "12c.3cpu.32g"),
        VnpuTemplate("vir16", "16c"),
    )
}

TEMPLATE_BY_SUFFIX: dict[str, VnpuTemplate] = {t.suffix: t for t in TEMPLATES.values()}

# The families that can create vNPUs and their templates, from the family table (no row: no vNPU).
ALLOWED_TEMPLATES: dict[ChipFamily, tuple[str, ...]] = {
    family: row.vnpu_templates for family, row in TRAITS.items() if row.vnpu_templates
}


def template_allowed(family: ChipFamily, template: str) -> bool:
    return template in ALLOWED_TEMPLATES.get(family, ())
