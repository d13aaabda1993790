"""Hung-job detection, the pure core: the reference's rule (`hangdetection/hang_detector.go`,
`common/hang_config.go`) as a function of (state, sample, config), with our fixes.

A chip looks hung when, for `DetectDuration` rounds in a row, it runs processes, its AI core is
below a threshold, and its HBM utilisation, network traffic and the processes' CPU time have
barely moved since the round before. The task that samples the chips is `hang_task.py`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from ascend_common.jsonin import InputError, loads_bounded

log = logging.getLogger(__name__)
T = TypeVar("T")


Transition = Literal["occur", "recover"]

# The reference's defaults (hang_config.go), also the content of the shipped config file.
DEFAULT_AICORE = 5  # %
DEFAULT_HBM_DELTA = 0  # % points
DEFAULT_TRAFFIC_DELTA = 100  # packets (flits on the 950) per round
DEFAULT_CPU_DELTA = 5  # s per round
DEFAULT_DURATION = 5  # rounds


@dataclass(frozen=True)
class HangConfig:
    enabled: bool = True
    aicore_utilization: int = DEFAULT_AICORE
    hbm_memory_delta: int = DEFAULT_HBM_DELTA
    traffic_delta: int = DEFAULT_TRAFFIC_DELTA
    cpu_time_delta: int = DEFAULT_CPU_DELTA
    detect_duration: int = DEFAULT_DURATION

    @classmethod
    def load(cls, data: bytes, what: str = "hang detection config") -> HangConfig:
        """The config of a `hangDetectionConfig.json`. Never raises: a refused file gives the
        defaults (logged; `parse` says why)."""
        try:
            return cls.parse(data, what)
        except InputError as exc:
            log.error(REFUSED, extra={"input": "hang_config", "error": str(exc)})
            return cls()

    @classmethod
    def parse(cls, data: bytes, what: str) -> HangConfig:
        """The config, or `InputError` naming `what`: not bounded JSON, not an object, or a
        threshold past its upper bound (`MAXIMA`). Unlike the reference, a missing field is its
        default, not Go's zero (a file without `Enabled` would switch detection off), with a
        warning; a field of the wrong type or below 0 is its default too, as in the reference."""
        doc = loads_bounded(data, what=what)
        if not isinstance(doc, dict):
            raise InputError(f"{what}: not a JSON object")
        section = _object(doc, "HangDetection")
        threshold = _object(section, "Threshold", "HangDetection.")
        enabled = _field(section, "Enabled", bool, True, "HangDetection.")
        values = {
            name: _field(threshold, key, int, default, "HangDetection.Threshold.") for name, key, default in _THRESHOLDS
        }
        for name, key, default in _THRESHOLDS:
            if values[name] > MAXIMA[name]:
                raise InputError(
                    f"{what}: HangDetection.Threshold.{key} {values[name]} is over the limit of {MAXIMA[name]}"
                )
            if name == "detect_duration":
                if values[name] <= 0:
                    log.warning("hang detection DetectDuration <= 0; using the default", extra={"default": default})
                    values[name] = default
            elif values[name] < 0:
                log.warning(f"hang detection threshold {key} < 0; using the default", extra={"default": default})
                values[name] = default
        cfg = cls(enabled=enabled, **values)
        log.info("hang detection config loaded", extra={"config": cfg.__dict__})
        return cfg


REFUSED = "hang detection config refused; using the defaults"

# Past these a threshold no longer tunes detection but switches it off or makes it meaningless
# (a DetectDuration of 1e22 rounds never ends): a day of rounds at the default 60 s interval,
# percentages up to 100, and the rest far beyond what one round can count.
MAXIMA = {
    "aicore_utilization": 100,
    "hbm_memory_delta": 100,
    "traffic_delta": 1 << 40,
    "cpu_time_delta": 86_400 * 1024,
    "detect_duration": 1440,
}


_THRESHOLDS: tuple[tuple[str, str, int], ...] = (
    ("aicore_utilization", "AICoreUtilization", DEFAULT_AICORE),
    ("hbm_memory_delta", "HbmMemoryDelta", DEFAULT_HBM_DELTA),
    ("traffic_delta", "TrafficDelta", DEFAULT_TRAFFIC_DELTA),
    ("cpu_time_delta", "CPUTimeDelta", DEFAULT_CPU_DELTA),
    ("detect_duration", "DetectDuration", DEFAULT_DURATION),
)


def _object(doc: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
    value = doc.get(key)
    if isinstance(value, dict):
        return value
    if value is None:
        log.warning(f"hang detection config has no {where}{key}; using its defaults")
    else:
        log.warning(f"hang detection config: {where}{key} is not an object; using its defaults")
    return {}


def _field(doc: dict[str, Any], key: str, kind: type[T], default: T, where: str) -> T:
    value = doc.get(key)
    # bool is an int in Python; a threshold of `true` is as wrong as one of "5".
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    if value is None:
        log.warning(f"hang detection config has no {where}{key}; using the default", extra={"default": default})
    else:
        log.warning(
            f"hang detection config: {where}{key} is not a {kind.__name__}; using the default",
            extra={"default": default, "value": repr(value)},
        )
    return default


@dataclass(frozen=True)
class Sample:
    """One round's reading of a chip. `traffic` None: the tool could not tell."""

    pids: tuple[int, ...]  # sorted
    aicore: int  # %
    hbm: int  # %, DCMI utilisation type 6
    traffic: tuple[int, int] | None  # (tx, rx) counters
    cpu: int  # s, summed over the pids
    # Each pid's start time (in the order of `pids`; None unknown, () not read): with the pid, the
    # process. A reused pid is another process, whose CPU time is no delta from the last one's.
    starts: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class HangState:
    pids: tuple[int, ...] | None = None  # the last round's process list
    starts: tuple[int | None, ...] = ()  # and their start times
    baseline: Sample | None = None
    count: int = 0  # rounds in a row that met the rule
    faulted: bool = False


def step(state: HangState, sample: Sample | None, cfg: HangConfig) -> tuple[HangState, Transition | None]:
    """One round for one chip (`detectNPU`). `sample` None: AI core, HBM or the process list could
    not be read; the reference would read that as 0 % (idle). Ours counts nothing, keeps no
    baseline, and leaves a raised fault as it is: an unreadable chip says nothing about the job."""
    if sample is None:
        return replace(state, baseline=None, count=0), None
    if not cfg.enabled or not sample.pids:
        return _not_met(state, None, sample)
    baseline = state.baseline
    if state.pids is not None and (state.pids, state.starts) != (sample.pids, sample.starts):
        # another job (refreHangStateIfProcessChanged), or a pid the kernel gave another process:
        # its numbers are no baseline
        baseline = None
    elif baseline is None and state.faulted:
        # The same job after an unreadable round: nothing says it moved, so the fault stays and
        # this round is the new baseline.
        return HangState(sample.pids, sample.starts, sample, 0, faulted=True), None
    if baseline is None or not condition_met(baseline, sample, cfg):
        return _not_met(state, sample, sample)
    count = state.count + 1
    if count >= cfg.detect_duration and not state.faulted:
        return HangState(sample.pids, sample.starts, sample, count, faulted=True), "occur"
    return HangState(sample.pids, sample.starts, sample, count, state.faulted), None


def _not_met(state: HangState, baseline: Sample | None, sample: Sample) -> tuple[HangState, Transition | None]:
    return HangState(sample.pids, sample.starts, baseline, 0, faulted=False), ("recover" if state.faulted else None)


def condition_met(before: Sample, now: Sample, cfg: HangConfig) -> bool:
    """`isHangConditionMet` over two rounds. HBM and CPU deltas are signed (a drop counts towards a
    hang, as in the reference); a traffic counter that went down (a reset counter) does not: the
    reference's unsigned sum would wrap a -10 and a +20 into a flat 10."""
    return (
        len(now.pids) > 0
        and now.aicore < cfg.aicore_utilization
        and now.hbm - before.hbm <= cfg.hbm_memory_delta
        and _traffic_flat(before.traffic, now.traffic, cfg.traffic_delta)
        and now.cpu - before.cpu < cfg.cpu_time_delta
    )


def _traffic_flat(before: tuple[int, int] | None, now: tuple[int, int] | None, limit: int) -> bool:
    if before is None and now is None:
        return True  # no tool (310P, or none installed): AI core, HBM and CPU decide, as in the reference
    if before is None or now is None:
        return False  # nothing to compare: the reference's 0-filled read would give a huge delta too
    dtx, drx = now[0] - before[0], now[1] - before[1]
    return dtx >= 0 and drx >= 0 and dtx + drx < limit
