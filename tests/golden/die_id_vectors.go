// Golden vectors for a chip's die id as text: ChipStatic.vdie_id / ddie_id of the dcmi-exporter
// (services/dcmi-exporter/src/dcmi_exporter/backends/dieid.py `format_die_id`), which the
// soft-share plugin writes as `shm-id=` and the exporter as the metrics label `vdie_id`.
//
// Our own small program, not reference code: dieID below restates the loop of the reference's
// DcGetDieID (component/ascend-common/devmanager/dcmi/dcmi.go and dcmi_v2.go, identical in both):
// strconv.FormatUint(word, 16), fmt.Sprintf("%08s", ...), strings.Join(..., "-"), strings.ToUpper.
//
// The point is `%08s`: the 0 flag on a string verb. Go 1.19 pads with zeros; golang/go#56486
// concerns that flag for strings. The reference builds with go 1.26 (go.mod of npu-exporter and
// ascend-device-plugin); the Go that wrote the committed vectors is in die_id_vectors.goversion,
// and the test re-runs this program with the workspace's Go. The "minus_flag" line shows the
// one case where a string's 0 flag does not give zeros (left-justified pads with spaces), which
// the reference does not use.
//
//	go run tests/golden/die_id_vectors.go > tests/golden/die_id_vectors.jsonl
//	go version > tests/golden/die_id_vectors.goversion
//
// Output: one JSON object per line, {"name", "words", "go_text"}; deterministic.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

const dieIDCount = 5

func dieID(words [dieIDCount]uint32) string {
	parts := make([]string, dieIDCount)
	for i := 0; i < dieIDCount; i++ {
		s := strconv.FormatUint(uint64(words[i]), 16)
		parts[i] = fmt.Sprintf("%08s", s)
	}
	return strings.ToUpper(strings.Join(parts, "-"))
}

type vector struct {
	Name   string   `json:"name"`
	Words  []uint32 `json:"words"`
	GoText string   `json:"go_text"`
}

func main() {
	cases := []struct {
		name  string
		words [dieIDCount]uint32
	}{
		{"issue_example", [dieIDCount]uint32{0x1, 0xABCD, 0, 0, 0x12}},
		{"all_zero", [dieIDCount]uint32{}},
		{"all_max", [dieIDCount]uint32{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}},
		{"every_width", [dieIDCount]uint32{0xF, 0xFFF, 0xFFFFF, 0xFFFFFFF, 0x10000000}},
		{"hex_letters", [dieIDCount]uint32{0xDEADBEEF, 0xCAFE, 0xA, 0xB0B, 0x7FFFFFFF}},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range cases {
		if err := enc.Encode(vector{c.name, c.words[:], dieID(c.words)}); err != nil {
			panic(err)
		}
	}
	// Not the reference's format: the left-justified 0 flag, to show what the padding question is about.
	minus := fmt.Sprintf("%-08s", strconv.FormatUint(0xabcd, 16))
	if err := enc.Encode(vector{"minus_flag", []uint32{0xabcd}, minus}); err != nil {
		panic(err)
	}
}
