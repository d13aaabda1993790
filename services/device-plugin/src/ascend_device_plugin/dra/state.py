"""What the DRA driver keeps on disk: the per-claim CDI specs and the checkpoint of prepared claims.

Reference: internal/plugin/state.go and checkpoint.go (a checkpoint `{"checksum", "v1":
{"preparedClaims": {uid: [device...]}}}` in the driver's plugin dir), ascend-common/cdi (one spec
file per claim in the CDI dir). Both files are written whole to a temporary file and renamed into
place, so a crash leaves the old or the new content, never a torn one. The checksum is a sha256 of
the payload (the reference's is the kubelet checkpoint manager's FNV hash of Go's printing of the
struct, which only Go reproduces; nothing but this driver reads the file).

Order, so that a restart at any point neither loses nor doubles a claim: Prepare writes the spec,
then the checkpoint (a spec without its entry is re-written by the kubelet's next Prepare, under
the same name); Unprepare removes the spec, then the entry (an entry without its spec is removed
again by the next Unprepare, a missing spec being no error).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ascend_common.adapters import hostfs
from ascend_common.jsonin import loads_bounded

from ascend_device_plugin.dra.slice_devices import device_name

log = logging.getLogger(__name__)
CHECKPOINT_FILE = "checkpoint.json"  # the reference's DriverPluginCheckpointFile
SPEC_MODE = 0o644  # container runtimes read the CDI dir as root; the spec holds no secret
DIR_MODE = 0o755  # a directory made for the checkpoint or the CDI specs (mkdir's default under umask 022)
MAX_CHECKPOINT_BYTES = 64 << 20  # far above any node's claims; a bigger file is not ours


class CheckpointError(Exception):
    """The checkpoint exists but cannot be trusted (bad JSON, checksum mismatch)."""


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as the kubelet was answered (the proto's Device, camelCase on disk)."""

    requestNames: list[str]
    poolName: str
    deviceName: str
    cdiDeviceIds: list[str] = field(default_factory=list)


PreparedClaims = dict[str, list[PreparedDevice]]  # by claim uid


def _renamed(device: PreparedDevice) -> PreparedDevice:
    # The previous release named a 910's device after its chip (`Ascend910-3`), a name the API
    # refuses: its checkpoint holds those, and the claim is the same chip under `ascend910-3`.
    return replace(device, deviceName=device_name(device.deviceName))


def _payload(claims: Mapping[str, list[PreparedDevice]]) -> dict[str, Any]:
    return {"preparedClaims": {uid: [asdict(d) for d in devices] for uid, devices in sorted(claims.items())}}


def _checksum(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Checkpoint:
    """The prepared claims, in `<dir>/checkpoint.json`. Blocking: call it in a thread."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / CHECKPOINT_FILE

    def load(self) -> PreparedClaims:
        """The claims saved last; none when there is no checkpoint yet. CheckpointError when it is corrupt:
        starting empty would forget prepared claims whose specs the containers still use."""
        try:
            raw = hostfs.read_file(self.directory, CHECKPOINT_FILE, MAX_CHECKPOINT_BYTES)
        except FileNotFoundError:
            return {}
        except hostfs.UnsafePath as exc:
            raise CheckpointError(f"{self.path}: {exc}") from exc
        if len(raw) > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{self.path}: larger than {MAX_CHECKPOINT_BYTES} bytes")
        try:
            # InputError (a ValueError): too deep, not UTF-8 or not JSON
            doc = loads_bounded(raw, what=str(self.path), max_bytes=MAX_CHECKPOINT_BYTES)
            payload = doc["v1"]
            if doc["checksum"] != _checksum(payload):
                raise CheckpointError(f"{self.path}: checksum mismatch")
            claims = payload["preparedClaims"].items()
            return {uid: [_renamed(PreparedDevice(**d)) for d in devices] for uid, devices in claims}
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{self.path}: {exc}") from exc

    def save(self, claims: Mapping[str, list[PreparedDevice]]) -> None:
        payload = _payload(claims)
        doc = {"checksum": _checksum(payload), "v1": payload}
        hostfs.write_file(self.directory, CHECKPOINT_FILE, json.dumps(doc, indent=1).encode(), 0o600, dir_mode=DIR_MODE)


class CdiSpecs:
    """The per-claim CDI spec files under the CDI dir. Blocking: call it in a thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file_name(self, spec_name: str) -> str:
        # The CDI library's WriteSpec adds ".yaml" to a name without a known extension; JSON is
        # YAML, and the runtimes' CDI caches load both, so the reference's file name holds JSON here.
        return hostfs.check_name(f"{spec_name}.yaml")

    def write(self, spec_name: str, spec: Mapping[str, Any]) -> Path:
        """UnsafePath (an OSError) when the name is not one file name or the file is a symlink."""
        name = self.file_name(spec_name)
        hostfs.write_file(self.root, name, json.dumps(spec, indent=1).encode(), SPEC_MODE, dir_mode=DIR_MODE)
        return self.root / name

    def exists(self, spec_name: str) -> bool:
        try:
            with hostfs.HostDir.root(self.root) as d:
                mode = os.stat(self.file_name(spec_name), dir_fd=d.fd, follow_symlinks=False).st_mode
        except OSError:
            return False
        return stat.S_ISREG(mode)

    def names(self, prefix: str) -> list[str]:
        """The spec names in the CDI dir that start with `prefix` (other vendors' files are not ours)."""
        try:
            with hostfs.HostDir.root(self.root) as d:
                entries = list(d.entries())
        except OSError:
            return []
        return sorted(
            name.removesuffix(".yaml")
            for name, is_dir in entries
            if not is_dir and name.startswith(prefix) and name.endswith(".yaml")
        )

    def remove(self, spec_name: str) -> None:
        """Idempotent: a spec that is not there is no error (cdi.DeleteClaimSpec). UnsafePath when
        the name is not one file name: nothing outside the CDI dir is ever removed."""
        hostfs.remove_file(self.root, self.file_name(spec_name))
