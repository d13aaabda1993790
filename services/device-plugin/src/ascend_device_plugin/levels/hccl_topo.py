"""The `edge_list` of a 950's HCCL topology file (/usr/local/Ascend/driver/topo/950/*.json), decoded
as the reference's json.Unmarshal into its TopoInfo decodes it.

An Atlas 350 card's level-0 rank ports come from these edges (ranklevels.card_level0). The reference
(pkg/server/npu_base_v2.go `getTopoFileInfo`, types_v2.go TopoInfo / Peer / Edge) drops the
card's level-0 addresses when the file is not JSON or does not decode into its structs, so every
case where Go's decoder reports an error is a ValueError here: keys matched as Go matches them
(exact, else case-insensitively), unknown keys ignored, null leaves a field at its zero value, a
value of the wrong kind or an integer out of range is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from ascend_common.gojson import GoNumber, GoObject, go_field, go_int, go_kind, go_loads

from ascend_device_plugin.levels.rank_levels import TopoEdge

_T = TypeVar("_T")
_INT_BITS: Final = 64  # Go's int on a 64-bit node


def _string(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: a {go_kind(value)} where Go wants a string")
    return value


def _int(value: object, where: str) -> int:
    if value is None:
        return 0
    number = go_int(value, _INT_BITS) if isinstance(value, GoNumber) else None
    if number is None:
        raise ValueError(f"{where}: {getattr(value, 'text', go_kind(value))} is not a Go int")
    return number


def _array(value: object, where: str, item: Callable[[object, str], _T]) -> list[_T]:
    if value is None:
        return []
    if not isinstance(value, list) or isinstance(value, GoObject):
        raise ValueError(f"{where}: a {go_kind(value)} where Go wants an array")
    return [item(element, f"{where}[{index}]") for index, element in enumerate(value)]


def _fields(value: object, where: str, names: tuple[str, ...]) -> dict[str, list[object]]:
    """An object's values by the struct field they decode into, every occurrence of a duplicate key
    in order: Go decodes each in turn, so the last one wins and any one of the wrong kind fails."""
    if value is None:
        return {}
    if not isinstance(value, GoObject):
        raise ValueError(f"{where}: a {go_kind(value)} where Go wants an object")
    out: dict[str, list[object]] = {}
    for key, item in value:
        name = go_field(key, names)
        if name is not None:
            out.setdefault(name, []).append(item)
    return out


def _decode(
    fields: dict[str, list[object]], name: str, where: str, decode: Callable[[object, str], _T], *, primitive: bool
) -> _T:
    """The field's value: every occurrence decoded, the last kept; a missing field is Go's zero value.
    Go ignores a null for a string or an int (an earlier value stays) but sets a slice to nil."""
    items = fields.get(name, [])
    decoded = [decode(item, where) for item in items]
    kept = [value for item, value in zip(items, decoded, strict=True) if not (primitive and item is None)]
    return kept[-1] if kept else decode(None, where)


def _strings(value: object, where: str) -> list[str]:
    return _array(value, where, _string)


_EDGE_FIELDS: Final = (
    "net_layer", "link_type", "topo_type", "topo_instance_id", "topo_attr", "local_a", "local_a_ports",
    "local_b", "local_b_ports", "protocols", "position",
)  # fmt: skip
_STRING_FIELDS: Final = ("link_type", "topo_type", "topo_attr", "position")
_INT_FIELDS: Final = ("net_layer", "topo_instance_id", "local_a", "local_b")
_LIST_FIELDS: Final = ("local_a_ports", "local_b_ports", "protocols")


def _edge(value: object, where: str) -> TopoEdge:
    fields = _fields(value, where, _EDGE_FIELDS)
    strings = {name: _decode(fields, name, f"{where}.{name}", _string, primitive=True) for name in _STRING_FIELDS}
    ints = {name: _decode(fields, name, f"{where}.{name}", _int, primitive=True) for name in _INT_FIELDS}
    lists = {name: _decode(fields, name, f"{where}.{name}", _strings, primitive=False) for name in _LIST_FIELDS}
    return TopoEdge(
        local_a=ints["local_a"], local_a_ports=tuple(lists["local_a_ports"]), net_layer=ints["net_layer"],
        link_type=strings["link_type"],
    )  # fmt: skip


def _peer(value: object, where: str) -> int:
    return _decode(_fields(value, where, ("local_id",)), "local_id", f"{where}.local_id", _int, primitive=True)


MAX_TOPO_BYTES = 50 * 1024 * 1024  # the reference reads an HCCL topology file up to 50 MiB (size50M)


def topo_edges(data: bytes) -> tuple[TopoEdge, ...]:
    """The file's edges in order; ValueError where the reference's decode fails."""
    # Go replaces invalid UTF-8 in strings with U+FFFD rather than failing.
    document = go_loads(data.decode("utf-8", errors="replace"))
    fields = _fields(document, "topology", ("version", "hardware_type", "peer_count", "peer_list", "edge_list"))
    _decode(fields, "version", "version", _string, primitive=True)
    _decode(fields, "hardware_type", "hardware_type", _string, primitive=True)
    _decode(fields, "peer_count", "peer_count", _int, primitive=True)
    _decode(fields, "peer_list", "peer_list", lambda v, w: _array(v, w, _peer), primitive=False)
    return tuple(_decode(fields, "edge_list", "edge_list", lambda v, w: _array(v, w, _edge), primitive=False))
