// Golden vectors for a 950 chip's rank levels, the `levelList` of baseDeviceInfos and of the pod
// annotation ascend-npu-configuration (libs/common/src/ascend_common/ranklevels.py).
//
// Our own small program, not reference code: the structs below restate the wire format of the
// reference as read from component/ascend-common/api/superpoddevice_v2.go (RankLevel,
// LevelElement, RankAddrItem: field names, order, json tags) and component/ascend-device-plugin/
// pkg/common/proto.go (Device: levelList is omitempty). The values are issue 25's "Must show"
// cases, written out by hand from the reference's rules (manager_v2.go getLevelList,
// npu_base_v2.go, eid.go); the test rebuilds each one from the EIDs and node facts.
//
// Any Go >= 1.18 gives the same output (no string here needs the \b / \f escapes of Go 1.22):
//
//	go run tests/golden/rank_levels_vectors.go > tests/golden/rank_levels_vectors.jsonl
//	go version > tests/golden/rank_levels_vectors.goversion
//
// Output: one JSON object per line, {"name", "kind", "go_json", "sha256"}; deterministic.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
)

type rankAddr struct {
	AddrType string   `json:"addr_type"`
	Addr     string   `json:"addr"`
	Ports    []string `json:"ports"`
	PlaneID  string   `json:"plane_id"`
}

type levelElement struct {
	NetLayer      int        `json:"net_layer"`
	NetInstanceID string     `json:"net_instance_id"`
	NetType       string     `json:"net_type"`
	NetAttr       string     `json:"net_attr"`
	RankAddrList  []rankAddr `json:"rank_addr_list"`
}

type rankLevel struct {
	Level int                     `json:"level"`
	Info  map[string]levelElement `json:"info"`
}

type device struct {
	DeviceID      string      `json:"device_id"`
	DeviceIP      string      `json:"device_ip"`
	SuperDeviceID string      `json:"super_device_id,omitempty"`
	LevelList     []rankLevel `json:"levelList,omitempty"`
}

type vector struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	GoJSON string `json:"go_json"`
	Sha256 string `json:"sha256"`
}

func marshal(v interface{}) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

var out []vector

func add(name, kind string, v interface{}) {
	data := marshal(v)
	sum := sha256.Sum256(data)
	out = append(out, vector{Name: name, Kind: kind, GoJSON: string(data), Sha256: hex.EncodeToString(sum[:])})
}

func level(l int, key, id, netType string, addrs ...rankAddr) rankLevel {
	return rankLevel{Level: l, Info: map[string]levelElement{
		key: {NetLayer: l, NetInstanceID: id, NetType: netType, NetAttr: "", RankAddrList: addrs},
	}}
}

func main() {
	// A 1D pod (super pod 5, server index 2, main board 0x03): phy 1, lower half, die 0's mesh.
	// Its URMA devices: {fe 1, die 0: ports 1, 2, PG}, {fe 2, die 0: port 5, PG}, {fe 2, die 1: port 7, PG}.
	add("pod_1d_phy1", "level_list", []rankLevel{
		level(0, "UB", "5_2", "TOPO_FILE_DESC",
			rankAddr{"EID", "00000000000502000000000000000000", []string{"0/5"}, "0"}),
		level(1, "UB", "5", "CLOS",
			rankAddr{"EID", "00000000007f02000000000000000000", []string{"1/0", "1/1", "1/2", "1/3", "1/5", "1/6"}, "0"},
			rankAddr{"EID", "00000000003f02000000000000000000", []string{"0/1", "0/2"}, "1"}),
	})
	// The same devices at phy 5, the upper half: die 1's mesh, and the upper half's level-1 ports.
	add("pod_1d_phy5", "level_list", []rankLevel{
		level(0, "UB", "5_2", "TOPO_FILE_DESC",
			rankAddr{"EID", "00000000004702000000000000000000", []string{"1/7"}, "1"}),
		level(1, "UB", "5", "CLOS",
			rankAddr{"EID", "00000000003f02000000000000000000", []string{"0/0", "0/1", "0/2", "0/3", "0/4", "0/5"}, "0"},
			rankAddr{"EID", "00000000007f02000000000000000000", []string{"1/1", "1/2"}, "1"}),
	})
	// A plain server (no super pod, main board 0x23): level 0 on die 1's mesh, level 2 on the UBoE
	// device 10.20.0.1, level 3 through ens1f2 (npu-nic-mapping 1 -> ens1f0, ens1f2; phy 9 of 8 chips).
	add("plain_server", "level_list", []rankLevel{
		level(0, "UB", "10.0.0.5", "TOPO_FILE_DESC",
			rankAddr{"EID", "00000000004103000000000000000000", []string{"1/1"}, "1"}),
		level(2, "UBOE", "CLUSTER1", "CLOS",
			rankAddr{"IPV4", "10.20.0.1", []string{"1/8"}, "CLUSTER"}),
		level(3, "ROCE", "CLUSTER1", "CLOS",
			rankAddr{"IPV4", "10.0.0.7", []string{"d2h"}, "CLUSTER"}),
	})
	// A server in a super pod (super pod 7, server index 1, size 16, main board 0x25): level 1 from the
	// PG EID of its (die 0, fe 3) device, ports 1..8; no npu-nic-mapping, so no level 3.
	add("super_server", "level_list", []rankLevel{
		level(0, "UB", "7_1", "TOPO_FILE_DESC",
			rankAddr{"EID", "00000000004103000000000000000000", []string{"1/1"}, "1"}),
		level(1, "UB", "7", "CLOS",
			rankAddr{"EID", "00000000003f03000000000000000000",
				[]string{"0/1", "0/2", "0/3", "0/4", "0/5", "0/6", "0/7", "0/8"}, "0"}),
		level(2, "UBOE", "CLUSTER1", "CLOS",
			rankAddr{"IPV4", "10.20.0.1", []string{"1/8"}, "CLUSTER"}),
	})
	// An Atlas 350 4P card, phy 1 (the card reading): its fe-0 EID ending 0a is die 0, port 1, plane 1
	// (byte 10: physical port 10, the second die's); the topology file's PEER2NET level-0 edge of
	// chip 1 adds 0/2 and 0/3 (1/3 is the other die's). Level 3 through eth0.
	add("card_4p", "level_list", []rankLevel{
		level(0, "UB", "10.0.0.9", "TOPO_FILE_DESC",
			rankAddr{"EID", "0000000000000000000000000000000a", []string{"0/1", "0/2", "0/3"}, "1"}),
		level(3, "ROCE", "CLUSTER1", "CLOS",
			rankAddr{"IPV4", "10.0.1.9", []string{"d2h"}, "CLUSTER"}),
	})
	// An Atlas 350 1P card with an IPv6-only mapped NIC: only level 3.
	add("card_1p_ipv6", "level_list", []rankLevel{
		level(3, "ROCE", "CLUSTER1", "CLOS",
			rankAddr{"IPV6", "2001:db8::7", []string{"d2h"}, "CLUSTER"}),
	})
	// A 1P card without npu-nic-mapping.json: no level at all, so the device has no levelList key.
	add("card_1p_no_mapping", "device", device{DeviceID: "0", DeviceIP: "", SuperDeviceID: "0"})
	// The same device with the plain server's list, as ascend-npu-configuration carries it.
	add("device_with_levels", "device", device{DeviceID: "9", DeviceIP: "", LevelList: []rankLevel{
		level(3, "ROCE", "CLUSTER1", "CLOS",
			rankAddr{"IPV4", "10.0.0.7", []string{"d2h"}, "CLUSTER"}),
	}})
	for _, v := range out {
		if _, err := fmt.Fprintln(os.Stdout, string(marshal(v))); err != nil {
			panic(err)
		}
	}
}
