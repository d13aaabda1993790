"""The HCCL topology file's edges, decoded as the reference's json.Unmarshal into TopoInfo
(npu_base_v2_test.go TestGetTopoFileInfoCheckJson, TestGetPortsList's edges)."""

from __future__ import annotations

import pytest
from ascend_device_plugin.levels.hccl_topo import topo_edges
from ascend_device_plugin.levels.rank_levels import TopoEdge

FILE = b"""{"version": "1.0", "hardware_type": "Atlas 350", "peer_count": 4,
 "peer_list": [{"local_id": 0}, {"local_id": 1}],
 "edge_list": [
  {"net_layer": 0, "link_type": "PEER2NET", "topo_type": "1DMESH", "topo_instance_id": 0, "topo_attr": "",
   "local_a": 1, "local_a_ports": ["0/1", "0/2"], "local_b": 2, "local_b_ports": ["0/3"],
   "protocols": ["UB_CTP"], "position": "DEVICE"},
  {"net_layer": 2, "link_type": "PEER2PEER", "local_a": 1, "local_a_ports": ["123", "345"]}
 ]}"""


def test_get_topo_file_info_check_json() -> None:  # the edges, in order, with the fields the builders read
    assert topo_edges(FILE) == (
        TopoEdge(1, ("0/1", "0/2"), 0, "PEER2NET"),
        TopoEdge(1, ("123", "345"), 2, "PEER2PEER"),
    )


@pytest.mark.parametrize(
    ("text", "edges"),
    [
        (b"{}", ()),
        (b"null", ()),  # Go: a null document leaves TopoInfo zero
        (b'{"edge_list": null}', ()),
        (b'{"edge_list": [null]}', (TopoEdge(0, (), 0, ""),)),
        (b'{"EDGE_LIST": [{"Local_A": 3, "LOCAL_A_PORTS": ["0/1", null], "extra": {}}]}',
         (TopoEdge(3, ("0/1", ""), 0, ""),)),
        (b'{"edge_list": [{"local_a": 1}], "edge_list": [{"local_a": 2}]}', (TopoEdge(2, (), 0, ""),)),
        (b'{"edge_list": [{"local_a": 1, "local_a": null}]}', (TopoEdge(1, (), 0, ""),)),  # null leaves the 1
        (b'{"unknown": [1, "x"], "edge_list": []}', ()),
        (b'{"edge_list": [{"local_a_ports": ["0/1"], "local_a_ports": null}]}', (TopoEdge(0, (), 0, ""),)),  # nil
    ],
)  # fmt: skip
def test_go_decoding_rules(text: bytes, edges: tuple[TopoEdge, ...]) -> None:
    assert topo_edges(text) == edges


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"not json", "invalid JSON"),
        (b"[]", "topology: a array where Go wants an object"),
        (b'{"edge_list": {}}', "edge_list: a object where Go wants an array"),
        (b'{"edge_list": [1]}', r"edge_list\[0\]: a number where Go wants an object"),
        (b'{"edge_list": [{"local_a": "1"}]}', r"edge_list\[0\].local_a: string is not a Go int"),
        (b'{"edge_list": [{"net_layer": 1.5}]}', r"net_layer: 1.5 is not a Go int"),
        (b'{"edge_list": [{"local_a": 1e2}]}', r"local_a: 1e2 is not a Go int"),
        (b'{"edge_list": [{"local_a": 9223372036854775808}]}', "is not a Go int"),
        (b'{"edge_list": [{"link_type": 7}]}', r"link_type: a number where Go wants a string"),
        (b'{"edge_list": [{"local_a_ports": ["0/1", 2]}]}', r"local_a_ports\[1\]: a number"),
        (b'{"peer_list": [{"local_id": "x"}]}', r"peer_list\[0\].local_id"),  # a field the builders never read
        (b'{"version": 1}', "version: a number"),
        (b'{"edge_list": [{"local_a": "x", "local_a": 1}]}', "local_a"),  # Go keeps the first error
    ],
)  # fmt: skip
def test_what_go_refuses_is_refused(text: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        topo_edges(text)
