"""Every fault code the stack derives or treats apart from the code tables, named once, with the
reference's name beside it where it has one (ascend-common devmanager/common/constants.go,
ascend-device-plugin pkg/common/fault_code.go and constants.go). The code tables themselves
(`default_fault_code_table`) say each code's level; these are the codes a rule looks for."""

from __future__ import annotations

from typing import Final

CARD_DROP_CODE: Final = "40F84E00"  # CardDropFaultCode: the chip fell off the bus
HANG_CODE: Final = "200001002"  # HangFaultCode: the exporter's own hung-job detection
RESET_FINISH_CODE: Final = "8C2FA009"  # ResetFinishFaultCode: the driver's "reset finished" event
HBM_DOUBLE_BIT_CODE: Final = "80E01801"  # HbmDoubleBitFaultCode: HBM multi-bit ECC (associated with AI-core bus)
AIC_BUS_CODE: Final = "80C98009"  # AicBusFaultCode
AIV_BUS_CODE: Final = "80CB8009"  # AivBusFaultCode
AI_CORE_BUS_CODES: Final = frozenset({AIC_BUS_CODE, AIV_BUS_CODE})

# The network plane. A lost link-down event is looked for by the exporter (RoCE on the 910, UB and
# UBoE on the 950), and these codes never count toward a chip's fault level by themselves alone.
LINK_DOWN_CODE: Final = "81078603"  # LinkDownFaultCode: a 910 RoCE link down
UBOE_PORT_DOWN_CODE: Final = "81078607"  # UBOEPortDownCode: a 950 UBoE bonding port down (parameter plane)
UB_PORT_DOWN_CODE: Final = "81B18603"  # UBPortDownCode: a 950 UB port down (hyper plane)
# The 950's codes the exporter derives from its UB / UBoE port state (ours: the reference derives them
# in its fault processing, with no named constant).
UB_SEPARATE_CODE: Final = "020001002"  # SeparateNPU: some chips' UB ports are down
UB_SUBHEALTH_CODE: Final = "020000002"  # SubHealthFault: every chip's are (the fabric, not the chips)
UBOE_SUBHEALTH_CODE: Final = "110000002"  # one bonding port down
UBOE_PRESEPARATE_CODE: Final = "110001024"  # two bonding ports down
NETWORK_CODES: Final = frozenset({LINK_DOWN_CODE, UBOE_PORT_DOWN_CODE, UBOE_SUBHEALTH_CODE, UBOE_PRESEPARATE_CODE})
