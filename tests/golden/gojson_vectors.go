// Golden vectors for our Go-compatible JSON encoder (libs/common/src/ascend_common/gojson.py) and
// for the ConfigMap renderers (fault_manager.deviceinfo.configmap, fault_manager.hotreset.reset_config).
//
// Our own small program, not reference code: the structs below restate the wire format of the
// reference Ascend Device Plugin (field names, order, json tags, omitempty) as read from
// component/ascend-device-plugin/pkg/common/proto.go (NodeDeviceInfoCache, NodeDeviceInfo,
// DeviceFault, FaultTimeAndLevel, SwitchFaultInfo, TaskResetInfo, TaskDevInfo, DevFaultInfo),
// pkg/common/upgradefault.go (UpgradeFaultReason with its `json:",inline"` embedded key) and
// pkg/common/common.go (getSimpleSwitchFaultStr's event struct, MakeDataHash = hex sha256 of
// json.Marshal).
//
// Run with Go >= 1.22 (\b and \f short escapes):
//
//	go run tests/golden/gojson_vectors.go > tests/golden/gojson_vectors.jsonl
//	go version > tests/golden/gojson_vectors.goversion
//
// Output: one JSON object per line, {"name", "kind", "go_json", "sha256"}; deterministic.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type deviceInfo struct {
	DeviceList map[string]string
	UpdateTime int64
}

type deviceInfoCfg struct {
	DeviceInfo  deviceInfo
	SuperPodID  int32
	ServerIndex int32
	CheckCode   string
	RackID      *int32 `json:"RackID,omitempty"`
}

type faultTimeAndLevel struct {
	FaultTime  int64  `json:"fault_time"`
	FaultLevel string `json:"fault_level"`
}

type deviceFault struct {
	FaultType            string                       `json:"fault_type"`
	NPUName              string                       `json:"npu_name"`
	LargeModelFaultLevel string                       `json:"large_model_fault_level"`
	FaultLevel           string                       `json:"fault_level"`
	FaultHandling        string                       `json:"fault_handling"`
	FaultCode            string                       `json:"fault_code"`
	FaultTimeAndLevelMap map[string]faultTimeAndLevel `json:"fault_time_and_level_map"`
}

type switchFaultInfo struct {
	FaultCode            []string
	FaultLevel           string
	UpdateTime           int64
	NodeStatus           string
	FaultTimeAndLevelMap map[string]faultTimeAndLevel
}

type switchEvent struct {
	EventType          uint
	AssembledFaultCode string
	PeerPortDevice     uint
	PeerPortId         uint
	SwitchChipId       uint
	SwitchPortId       uint
	Severity           uint
	Assertion          uint
	AlarmRaisedTime    int64
}

// UpgradeFaultReasonKey is embedded with a `json:",inline"` tag in the reference; encoding/json
// has no inline option, but an empty name on an embedded struct flattens its fields all the same.
type UpgradeFaultReasonKey struct {
	FaultCode   string `json:"fault_code"`
	FaultLevel  string `json:"fault_level"`
	UpgradeType string `json:"upgrade_type"`
}

type upgradeFaultReason struct {
	UpgradeTime           int64 `json:"upgrade_time"`
	UpgradeFaultReasonKey `json:",inline"`
}

// DevFaultInfo is embedded in taskDevInfo as in the reference, so its fields follow RankId.
type DevFaultInfo struct {
	LogicId       int32
	Status        string
	Policy        string
	InitialPolicy string
	ErrorCode     []int64
	ErrorCodeHex  string
}

type taskDevInfo struct {
	RankId int
	DevFaultInfo
}

type taskResetInfo struct {
	RankList            []*taskDevInfo
	UpdateTime          int64
	RetryTime           int
	FaultFlushing       bool
	GracefulExit        int
	RestartFaultProcess bool
}

type vector struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	GoJSON string `json:"go_json"`
	Sha256 string `json:"sha256"`
}

func marshal(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

var out []vector

func add(name, kind string, v any) {
	data := marshal(v)
	out = append(out, vector{Name: name, Kind: kind, GoJSON: string(data), Sha256: hash(data)})
}

// trickyStrings: every escaping rule of encoding/json's appendString that differs from a naive encoder.
var trickyStrings = []struct{ name, value string }{
	{"lt", "<"},
	{"gt", ">"},
	{"amp", "&"},
	{"html", "<a href=\"x\">&amp;</a>"},
	{"u2028", "\u2028"},
	{"u2029", "\u2029"},
	{"quote", "\""},
	{"backslash", "\\"},
	{"solidus", "a/b"},
	{"short_escapes", "\b\f\n\r\t"},
	{"nul", "\x00"},
	{"x01", "\x01"},
	{"x0b", "\x0b"},
	{"x1f", "\x1f"},
	{"del", "\x7f"},
	{"chinese", "中文"},
	{"e_acute", "é"},
	{"emoji", "😀"},
	{"u0080", "\u0080"},
	{"ufeff", "\ufeff"},
	{"mixed", "Ascend910-0,<é>&\"中\"\\\u2028\t😀\x01\x7f"},
	{"empty", ""},
}

func stringVectors() {
	for _, s := range trickyStrings {
		add("string_"+s.name, "string", s.value)
	}
}

func faultsOf910() []deviceFault {
	return []deviceFault{
		{
			FaultType: "CardNetworkUnhealthy", NPUName: "Ascend910-3",
			LargeModelFaultLevel: "PreSeparateNPU", FaultLevel: "PreSeparateNPU", FaultHandling: "PreSeparateNPU",
			FaultCode: "81078603",
			FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
				"81078603": {FaultTime: 1718000000123, FaultLevel: "PreSeparateNPU"},
			},
		},
		{
			FaultType: "CardUnhealthy", NPUName: "Ascend910-3",
			LargeModelFaultLevel: "RestartNPU", FaultLevel: "RestartNPU", FaultHandling: "RestartNPU",
			FaultCode: "80E01801,8C1FA006",
			FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
				"8C1FA006": {FaultTime: 1718000000456, FaultLevel: "NotHandleFault"},
				"80E01801": {FaultTime: 1718000000001, FaultLevel: "RestartNPU"},
			},
		},
		{
			FaultType: "CardUnhealthy", NPUName: "Ascend910-10",
			LargeModelFaultLevel: "SeparateNPU", FaultLevel: "SeparateNPU", FaultHandling: "SeparateNPU",
			FaultCode: "",
			FaultTimeAndLevelMap: map[string]faultTimeAndLevel{},
		},
	}
}

func faultVectors() {
	add("faults_empty", "device_faults", make([]deviceFault, 0))
	add("faults_910", "device_faults", faultsOf910())
	add("faults_large_code", "device_faults", []deviceFault{{
		FaultType: "CardUnhealthy", NPUName: "Ascend310P-1",
		LargeModelFaultLevel: "SeparateNPU", FaultLevel: "SeparateNPU", FaultHandling: "SeparateNPU",
		FaultCode: "110001024,20001002,40F84E00",
		FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
			"110001024": {FaultTime: 0, FaultLevel: "SeparateNPU"},
			"20001002":  {FaultTime: 9007199254740993, FaultLevel: "SeparateNPU"},
			"40F84E00":  {FaultTime: 1, FaultLevel: "SeparateNPU"},
		},
	}})
}

func deviceInfoVectors() {
	add("device_info_empty_map", "device_info", deviceInfo{DeviceList: map[string]string{}, UpdateTime: 0})
	add("device_info_nil_map", "device_info", deviceInfo{UpdateTime: 1718000000})
	add("device_info_910", "device_info", deviceInfo{
		DeviceList: map[string]string{
			"huawei.com/Ascend910":                  "Ascend910-0,Ascend910-1,Ascend910-11,Ascend910-2",
			"huawei.com/Ascend910-Unhealthy":        "Ascend910-10,Ascend910-3",
			"huawei.com/Ascend910-NetworkUnhealthy": "Ascend910-3",
			"huawei.com/Ascend910-Recovering":       "",
			"huawei.com/Ascend910-Fault":            string(marshal(faultsOf910())),
		},
		UpdateTime: 1718000000,
	})
	values := map[string]string{}
	keys := map[string]string{}
	for _, s := range trickyStrings {
		values["v_"+s.name] = s.value
		keys[s.value] = s.name
	}
	add("device_info_tricky_values", "device_info", deviceInfo{DeviceList: values, UpdateTime: 1})
	add("device_info_tricky_keys", "device_info", deviceInfo{DeviceList: keys, UpdateTime: -1})
	add("device_info_key_order", "device_info", deviceInfo{
		DeviceList: map[string]string{
			"z": "1", "Z": "2", "é": "3", "中": "4", "😀": "5", "a-": "6", "a": "7", "A": "8", "_": "9", "~": "10",
			"Ascend910-10": "11", "Ascend910-2": "12", "\u2028": "13", "<": "14",
		},
		UpdateTime: 9223372036854775807,
	})
}

func cfg(info deviceInfo, superPodID, serverIndex int32, rackID *int32) deviceInfoCfg {
	return deviceInfoCfg{
		DeviceInfo:  info,
		SuperPodID:  superPodID,
		ServerIndex: serverIndex,
		CheckCode:   hash(marshal(info)),
		RackID:      rackID,
	}
}

func ptr(v int32) *int32 { return &v }

func deviceInfoCfgVectors() {
	typical := deviceInfo{
		DeviceList: map[string]string{
			"huawei.com/Ascend910":           "Ascend910-0,Ascend910-1",
			"huawei.com/Ascend910-Unhealthy": "",
			"huawei.com/Ascend910-Fault":     "[]",
		},
		UpdateTime: 1718000000,
	}
	add("cfg_defaults", "device_info_cfg", cfg(typical, -1, -1, nil))
	add("cfg_super_pod", "device_info_cfg", cfg(typical, 3, 17, nil))
	add("cfg_rack_zero", "device_info_cfg", cfg(typical, 0, 0, ptr(0)))
	add("cfg_rack", "device_info_cfg", cfg(typical, -2147483648, 2147483647, ptr(7)))
	add("cfg_empty", "device_info_cfg", cfg(deviceInfo{DeviceList: map[string]string{}, UpdateTime: 5}, -1, -1, nil))
	tricky := map[string]string{}
	for _, s := range trickyStrings {
		tricky["huawei.com/"+s.name] = s.value
	}
	add("cfg_tricky", "device_info_cfg", cfg(deviceInfo{DeviceList: tricky, UpdateTime: 42}, -1, -1, nil))
}

func eventJSON(e switchEvent) string { return string(marshal(e)) }

func switchVectors() {
	add("switch_empty", "switch_info", switchFaultInfo{
		FaultCode: []string{}, FaultLevel: "NotHandle", UpdateTime: 1718000000, NodeStatus: "Healthy",
		FaultTimeAndLevelMap: map[string]faultTimeAndLevel{},
	})
	add("switch_faults", "switch_info", switchFaultInfo{
		FaultCode: []string{
			eventJSON(switchEvent{EventType: 1, AssembledFaultCode: "[0x00f103b0,155904,na,na]", PeerPortDevice: 0,
				PeerPortId: 0, SwitchChipId: 1, SwitchPortId: 4, Severity: 2, Assertion: 1, AlarmRaisedTime: 1718000000789}),
			eventJSON(switchEvent{EventType: 2, AssembledFaultCode: "[0x08520003,na,L2,na]", PeerPortDevice: 2,
				PeerPortId: 15, SwitchChipId: 0, SwitchPortId: 15, Severity: 3, Assertion: 2, AlarmRaisedTime: 0}),
		},
		FaultLevel: "Separate", UpdateTime: 1718000001, NodeStatus: "UnHealthy",
		FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
			"[0x08520003,na,L2,na]_0_15":     {FaultTime: 0, FaultLevel: "Separate"},
			"[0x00f103b0,155904,na,na]_1_4": {FaultTime: 1718000000789, FaultLevel: "SubHealthFault"},
		},
	})
	// A 950 node's: GetSwitchFaultInfo fills the struct on A3 alone and hands back its zero value
	// elsewhere (nil slice and map).
	add("switch_unwatched", "switch_info_unwatched", switchFaultInfo{})
}

func upgradeVectors() {
	add("upgrade_empty", "upgrade_reasons", map[string][]upgradeFaultReason{})
	add("upgrade_reasons", "upgrade_reasons", map[string][]upgradeFaultReason{
		"Ascend910-3": {
			{UpgradeTime: 1718000000000, UpgradeFaultReasonKey: UpgradeFaultReasonKey{
				FaultCode: "81078603", FaultLevel: "PreSeparateNPU", UpgradeType: "FaultDuration"}},
			{UpgradeTime: 1718000000500, UpgradeFaultReasonKey: UpgradeFaultReasonKey{
				FaultCode: "AutofillFaultCode", FaultLevel: "ManuallySeparateNPU", UpgradeType: "FaultAutofill"}},
		},
		"Ascend910-10": {
			{UpgradeTime: 1, UpgradeFaultReasonKey: UpgradeFaultReasonKey{
				FaultCode: "80E01801", FaultLevel: "ManuallySeparateNPU", UpgradeType: "FaultFrequency"}},
		},
	})
}

// errorCodeHex restates the reference's setNewTaskInfoWithHexString: upper-cased, comma-joined
// strconv.FormatInt(code, 16), while ErrorCode itself is written as an empty list.
func errorCodeHex(codes []int64) string {
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%x", c))
	}
	return strings.ToUpper(strings.Join(parts, ","))
}

func rank(rankID int, logicID int32, status, policy, initial string, codes []int64) *taskDevInfo {
	return &taskDevInfo{RankId: rankID, DevFaultInfo: DevFaultInfo{
		LogicId: logicID, Status: status, Policy: policy, InitialPolicy: initial,
		ErrorCode: []int64{}, ErrorCodeHex: errorCodeHex(codes),
	}}
}

func resetVectors() {
	add("reset_empty", "reset_info", taskResetInfo{RankList: []*taskDevInfo{}, UpdateTime: 1718000000})
	add("reset_training", "reset_info", taskResetInfo{
		RankList: []*taskDevInfo{
			rank(8, 0, "unrecovered", "reset", "reset", []int64{0x80E01801, 0x8C1FA006}),
			rank(9, 1, "unrecovered", "reset", "reset", nil),
			rank(10, 2, "unrecovered", "reset", "restart", []int64{0x110001024}),
			rank(11, 3, "unrecovered", "reset", "restart_request", []int64{}),
		},
		UpdateTime: 1718000002, RetryTime: 1, FaultFlushing: true, GracefulExit: 2, RestartFaultProcess: true,
	})
	add("reset_inference", "reset_info", taskResetInfo{
		RankList: []*taskDevInfo{
			rank(-1, 4, "recovered", "free_reset", "free_reset", []int64{0x80CB8009}),
			rank(-1, 5, "failed", "isolate", "reset", []int64{0x40F84E00}),
		},
		UpdateTime: 1718000003, RetryTime: 0, FaultFlushing: false, GracefulExit: 0, RestartFaultProcess: false,
	})
}

// chipState and the two render_* vectors restate, for one fixed node, how the reference fills
// DeviceList (device/ascend910.go, ascend310.go updateDeviceInfo): sorted sets joined with ",",
// every key written even when empty, the -Fault array marshalled into a string.
type chipState struct {
	name                                          string
	healthy, inUse, networkUnhealthy, recovering bool
}

func join(names []string) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return strings.Join(sorted, ",")
}

func lists(chips []chipState) (free, unhealthy, network, recovering []string) {
	for _, c := range chips {
		if c.healthy && !c.inUse {
			free = append(free, c.name)
		}
		if !c.healthy {
			unhealthy = append(unhealthy, c.name)
		}
		if c.networkUnhealthy {
			network = append(network, c.name)
		}
		if c.recovering {
			recovering = append(recovering, c.name)
		}
	}
	return
}

func renderVectors() {
	chips910 := []chipState{
		{name: "Ascend910-0", healthy: true},
		{name: "Ascend910-1", healthy: true, inUse: true},
		{name: "Ascend910-2", healthy: true},
		{name: "Ascend910-3", healthy: false, networkUnhealthy: true},
		{name: "Ascend910-10", healthy: false, recovering: true},
		{name: "Ascend910-11", healthy: true},
	}
	free, unhealthy, network, recovering := lists(chips910)
	info := deviceInfo{
		DeviceList: map[string]string{
			"huawei.com/Ascend910":                  join(free),
			"huawei.com/Ascend910-Unhealthy":        join(unhealthy),
			"huawei.com/Ascend910-NetworkUnhealthy": join(network),
			"huawei.com/Ascend910-Recovering":       join(recovering),
			"huawei.com/Ascend910-Fault":            string(marshal(faultsOf910())),
		},
		UpdateTime: 1718000000,
	}
	add("render_910", "render_910", cfg(info, 2, 5, nil))

	chips310 := []chipState{
		{name: "Ascend310-0", healthy: true},
		{name: "Ascend310-1", healthy: false},
	}
	free, unhealthy, _, _ = lists(chips310)
	info = deviceInfo{
		DeviceList: map[string]string{
			"huawei.com/Ascend310":           join(free),
			"huawei.com/Ascend310-Unhealthy": join(unhealthy),
			// The reference's HuaweiFaultCodeAscend310 is api.HuaweiAscend310P + "-Fault".
			"huawei.com/Ascend310P-Fault": string(marshal([]deviceFault{{
				FaultType: "CardUnhealthy", NPUName: "Ascend310-1",
				LargeModelFaultLevel: "SeparateNPU", FaultLevel: "SeparateNPU", FaultHandling: "SeparateNPU",
				FaultCode: "40F84E00",
				FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
					"40F84E00": {FaultTime: 1718000000000, FaultLevel: "SeparateNPU"},
				},
			}})),
		},
		UpdateTime: 1718000000,
	}
	add("render_310", "render_310", cfg(info, -1, -1, nil))

	// A 950 node of a 2D pod, its chips enumerated as the a5-superpod-8 profile does (phy = logic + 4
	// mod 8): the 910 manager's keys under huawei.com/npu, chips named npu-<phy>, and RackID
	// (getNodeDeviceInfoCache: a 1D / 2D pod only).
	chipsA5 := []chipState{
		{name: "npu-4", healthy: true},
		{name: "npu-5", healthy: true, inUse: true},
		{name: "npu-6", healthy: false, networkUnhealthy: true},
		{name: "npu-7", healthy: true},
		{name: "npu-0", healthy: true},
		{name: "npu-1", healthy: false, recovering: true},
		{name: "npu-2", healthy: true},
		{name: "npu-3", healthy: true},
	}
	free, unhealthy, network, recovering = lists(chipsA5)
	info = deviceInfo{
		DeviceList: map[string]string{
			"huawei.com/npu":                  join(free),
			"huawei.com/npu-Unhealthy":        join(unhealthy),
			"huawei.com/npu-NetworkUnhealthy": join(network),
			"huawei.com/npu-Recovering":       join(recovering),
			"huawei.com/npu-Fault": string(marshal([]deviceFault{
				{
					FaultType: "CardNetworkUnhealthy", NPUName: "npu-6",
					LargeModelFaultLevel: "PreSeparateNPU", FaultLevel: "PreSeparateNPU", FaultHandling: "PreSeparateNPU",
					FaultCode: "81078603",
					FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
						"81078603": {FaultTime: 1718000000123, FaultLevel: "PreSeparateNPU"},
					},
				},
				{
					FaultType: "CardUnhealthy", NPUName: "npu-6",
					LargeModelFaultLevel: "RestartNPU", FaultLevel: "RestartNPU", FaultHandling: "RestartNPU",
					FaultCode: "8C1FA006",
					FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
						"8C1FA006": {FaultTime: 1718000000456, FaultLevel: "RestartNPU"},
					},
				},
				{
					FaultType: "CardUnhealthy", NPUName: "npu-1",
					LargeModelFaultLevel: "RestartNPU", FaultLevel: "RestartNPU", FaultHandling: "RestartNPU",
					FaultCode: "8C1FA006",
					FaultTimeAndLevelMap: map[string]faultTimeAndLevel{
						"8C1FA006": {FaultTime: 1718000000001, FaultLevel: "RestartNPU"},
					},
				},
			})),
		},
		UpdateTime: 1718000000,
	}
	add("render_a5", "render_a5", cfg(info, 5, 1, ptr(3)))
}

func main() {
	stringVectors()
	deviceInfoVectors()
	deviceInfoCfgVectors()
	faultVectors()
	switchVectors()
	upgradeVectors()
	resetVectors()
	renderVectors()
	for _, v := range out {
		if _, err := fmt.Fprintln(os.Stdout, string(marshal(v))); err != nil {
			panic(err)
		}
	}
}
