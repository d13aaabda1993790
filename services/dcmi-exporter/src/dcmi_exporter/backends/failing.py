"""A chip's reading that fails round after round is logged when it starts failing and when it is
back, not every round (a tool missing on a node would otherwise log once a round per chip)."""

from __future__ import annotations

import logging

from ascend_common.schemas.exporter import Chip


class FailingChips:
    def __init__(self, log: logging.Logger, failing: str, back: str) -> None:
        self._log = log
        self._failing_message, self._back_message = failing, back
        self._chips: set[int] = set()

    def failed(self, chip: Chip, error: str) -> None:
        if chip.logic_id not in self._chips:
            self._chips.add(chip.logic_id)
            extra = {"logic_id": chip.logic_id, "chip": chip.name, "error": error}
            self._log.warning(self._failing_message, extra=extra)

    def succeeded(self, chip: Chip) -> None:
        if chip.logic_id in self._chips:
            self._chips.discard(chip.logic_id)
            self._log.info(self._back_message, extra={"logic_id": chip.logic_id, "chip": chip.name})
