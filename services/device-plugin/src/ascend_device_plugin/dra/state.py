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

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ascend_device_plugin.core.dra import device_name

log = logging.getLogger(__name__)
CHECKPOINT_FILE = "checkpoint.json"  # the reference's DriverPluginCheckpointFile
SPEC_MODE = 0o644  # container runtimes read the CDI dir as root; the spec holds no secret


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


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _payload(claims: Mapping[str, list[PreparedDevice]]) -> dict[str, Any]:
    return {"preparedClaims": {uid: [asdict(d) for d in devices] for uid, devices in sorted(claims.items())}}


def _checksum(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Checkpoint:
    """The prepared claims, in `<dir>/checkpoint.json`. Blocking: call it in a thread."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CHECKPOINT_FILE

    def load(self) -> PreparedClaims:
        """The claims saved last; none when there is no checkpoint yet. CheckpointError when it is corrupt:
        starting empty would forget prepared claims whose specs the containers still use."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            doc = json.loads(raw)
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
        write_atomically(self.path, json.dumps(doc, indent=1).encode(), 0o600)


class CdiSpecs:
    """The per-claim CDI spec files under the CDI dir. Blocking: call it in a thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, spec_name: str) -> Path:
        # The CDI library's WriteSpec adds ".yaml" to a name without a known extension; JSON is
        # YAML, and the runtimes' CDI caches load both, so the reference's file name holds JSON here.
        return self.root / f"{spec_name}.yaml"

    def write(self, spec_name: str, spec: Mapping[str, Any]) -> Path:
        path = self.path(spec_name)
        write_atomically(path, json.dumps(spec, indent=1).encode(), SPEC_MODE)
        return path

    def exists(self, spec_name: str) -> bool:
        return self.path(spec_name).is_file()

    def names(self, prefix: str) -> list[str]:
        """The spec names in the CDI dir that start with `prefix` (other vendors' files are not ours)."""
        try:
            return sorted(p.stem for p in self.root.glob(f"{prefix}*.yaml") if p.is_file())
        except OSError:
            return []

    def remove(self, spec_name: str) -> None:
        """Idempotent: a spec that is not there is no error (cdi.DeleteClaimSpec)."""
        with contextlib.suppress(FileNotFoundError):
            self.path(spec_name).unlink()
