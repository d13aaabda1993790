// Golden vectors for the plugin's rank configuration, the pod annotations
// ascend.kubectl.kubernetes.io/ascend-910-configuration and ascend-npu-configuration
// (services/device-plugin/src/ascend_device_plugin/allocation/annotations.py `device_configuration`).
//
// Our own small program, not reference code: the structs below restate the wire format of the
// reference Ascend Device Plugin as read from component/ascend-device-plugin/pkg/common/proto.go
// (Instance, Device: field names, order, json tags, omitempty) and component/ascend-common/api/
// superpoddevice_v2.go (RankLevel, LevelElement: the 950's levelList, which the plugin writes
// empty, so omitted, until it has rank levels).
//
// Any Go >= 1.18 gives the same output (no string here needs the \b / \f escapes of Go 1.22):
//
//	go run tests/golden/rank_config_vectors.go > tests/golden/rank_config_vectors.jsonl
//	go version > tests/golden/rank_config_vectors.goversion
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

type instance struct {
	PodName     string   `json:"pod_name"`
	ServerID    string   `json:"server_id"`
	HostIP      string   `json:"host_ip"`
	SuperPodId  int32    `json:"super_pod_id"`
	Devices     []device `json:"devices"`
	RackId      int32    `json:"rack_id"`
	ServerIndex string   `json:"server_index"`
	ServerIP    string   `json:"server_ip"`
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

func add(name string, v instance) {
	data := marshal(v)
	sum := sha256.Sum256(data)
	out = append(out, vector{Name: name, Kind: "rank_config", GoJSON: string(data), Sha256: hex.EncodeToString(sum[:])})
}

func main() {
	// A 910B node: RoCE IPs, SDIDs never read ("0"), one phy id not on the node ("-2").
	add("ascend910_physical", instance{
		PodName: "train-0", ServerID: "7b1c-uid", HostIP: "10.0.0.5", SuperPodId: -1,
		Devices: []device{
			{DeviceID: "0", DeviceIP: "192.168.100.1", SuperDeviceID: "0"},
			{DeviceID: "1", DeviceIP: "-1", SuperDeviceID: "0"},
			{DeviceID: "9", DeviceIP: "-1", SuperDeviceID: "-2"},
		},
		RackId: -1, ServerIndex: "-1", ServerIP: "10.0.0.5",
	})
	// An A3 super-pod node: each chip's SDID.
	add("a3_super_pod", instance{
		PodName: "job-w-1", ServerID: "u", HostIP: "10.0.0.6", SuperPodId: 3,
		Devices: []device{
			{DeviceID: "2", DeviceIP: "10.2.0.2", SuperDeviceID: "4194306"},
			{DeviceID: "10", DeviceIP: "10.2.0.10", SuperDeviceID: "4194314"},
		},
		RackId: -1, ServerIndex: "1", ServerIP: "10.0.0.6",
	})
	// A vNPU: 127.0.0.1, no super_device_id.
	add("vnpu", instance{
		PodName: "infer", ServerID: "u", HostIP: "h", SuperPodId: -1,
		Devices: []device{{DeviceID: "0", DeviceIP: "127.0.0.1"}},
		RackId:  -1, ServerIndex: "", ServerIP: "",
	})
	// No devices: a nil slice.
	add("no_devices", instance{PodName: "p", ServerID: "u", HostIP: "h", SuperPodId: -1, RackId: -1})
	// The 950 (ascend-npu-configuration) in a 2D pod: no device IP, the SDIDs, the rack; no rank
	// levels yet, written as the reference writes a device without level data (nil or empty: omitted).
	add("a5_super_pod", instance{
		PodName: "job-0", ServerID: "uid-0", HostIP: "10.0.0.5", SuperPodId: 5,
		Devices: []device{
			{DeviceID: "4", DeviceIP: "", SuperDeviceID: "4194308"},
			{DeviceID: "5", DeviceIP: "", SuperDeviceID: "4194309", LevelList: []rankLevel{}},
		},
		RackId: 3, ServerIndex: "1", ServerIP: "10.0.0.5",
	})
	// A 950 server outside a super pod.
	add("a5_server", instance{
		PodName: "job-1", ServerID: "uid-1", HostIP: "10.0.0.7", SuperPodId: -1,
		Devices: []device{{DeviceID: "0", DeviceIP: "", SuperDeviceID: "0"}},
		RackId:  -1, ServerIndex: "-1", ServerIP: "10.0.0.7",
	})
	// Strings that Go escapes for HTML, and int32 bounds.
	add("escaping_and_bounds", instance{
		PodName: "a<b>&c\u2028é", ServerID: "\"quoted\"\\", HostIP: "", SuperPodId: -2147483648,
		Devices: []device{{DeviceID: "7", DeviceIP: "", SuperDeviceID: "4294967295"}},
		RackId:  2147483647, ServerIndex: "-2", ServerIP: "",
	})
	for _, v := range out {
		if _, err := fmt.Fprintln(os.Stdout, string(marshal(v))); err != nil {
			panic(err)
		}
	}
}
