"""Inference hot reset on an Atlas 300I Duo node: a card's two chips are healthy or unhealthy together.

Reference pkg/device/ascendcommon.go `setHealthyIfDuoCard`: with -hotReset=0 on a node that has an
Atlas 300I Duo card (`IsContainAtlas300IDuo`: any card of the node), every 310P chip of a card with
an unhealthy chip is set Unhealthy. The card is reset as one (the reset group is the card,
ascend_common.reset_groups), so a job placed on its healthy chip would be killed by its cardmate's
reset. Only the health changes (and the reason says why): the chip's level and codes stay its own.

Pure: the exporter's chips and the verdicts in, the verdicts to publish out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ascend_common.chips import ResourceType
from ascend_common.reset_groups import ATLAS_300I_DUO
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason


def _is_duo(chip: Chip) -> bool:
    product = chip.static.product_type
    # The reference compares the DCMI product type for equality with "Atlas 300I Duo".
    return product.is_ok and product.value is not None and product.value.strip() == ATLAS_300I_DUO


def duo_card_mates(chips: Sequence[Chip]) -> dict[str, tuple[str, ...]]:
    """Each 310P chip's other chips of its card, by name, on a node with an Atlas 300I Duo card; else {}.

    The rule reads the reference's groupDevice[Ascend310P]: the whole-chip 310P devices only.
    """
    if not any(_is_duo(c) for c in chips):
        return {}
    cards: dict[int, list[str]] = {}
    for chip in chips:
        if chip.resource_type is ResourceType.ASCEND310P:
            cards.setdefault(chip.card_id, []).append(chip.name)
    return {
        name: tuple(sorted(other for other in names if other != name)) for names in cards.values() for name in names
    }


def unhealthy_cardmate(name: str, mates: Mapping[str, tuple[str, ...]], own: Mapping[str, ChipVerdict]) -> str | None:
    """The first chip of `name`'s card whose own verdict is unschedulable, if any (getUnHealthyCard)."""
    for mate in mates.get(name, ()):
        verdict = own.get(mate)
        if verdict is not None and not verdict.schedulable:
            return mate
    return None


def with_duo_rule(
    verdict: ChipVerdict, mates: Mapping[str, tuple[str, ...]], own: Mapping[str, ChipVerdict]
) -> ChipVerdict:
    """`verdict` as published: unschedulable when a chip of its Duo card is (setHealthyIfDuoCard)."""
    if not verdict.schedulable or unhealthy_cardmate(verdict.chip, mates, own) is None:
        return verdict
    return verdict.model_copy(update={"schedulable": False, "reason": VerdictReason.DUO_CARD})
