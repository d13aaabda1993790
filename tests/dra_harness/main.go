// A harness around the real kubelet's DRA manager (k8s.io/kubernetes/pkg/kubelet/cm/dra, v1.32)
// and its plugin watcher (pkg/kubelet/pluginmanager), with a fake clientset holding the node, the
// ResourceClaims and one pod. It is built inside the kubeedge source tree, whose vendor directory
// carries those packages (see tests/plugin/test_dra_real_kubelet.py: `go build -mod=vendor` with an
// overlay, so nothing is written into that tree and nothing vendored is copied here).
//
// Usage: harness CONFIG.json; then one command per line on stdin, one JSON reply per line on stdout:
//   registered  the driver is in the kubelet's list of registered DRA plugins
//   prepare     PrepareResources(pod)
//   resources   GetResources(pod, first container): the CDI device ids the runtime would get
//   unprepare   UnprepareResources(pod)
//   quit
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
)

type harnessConfig struct {
	RegistryDir string                      `json:"registryDir"`
	StateDir    string                      `json:"stateDir"`
	Node        string                      `json:"node"`
	Driver      string                      `json:"driver"`
	Claims      []resourceapi.ResourceClaim `json:"claims"`
	Pod         v1.Pod                      `json:"pod"`
}

type reply struct {
	OK     bool     `json:"ok"`
	Error  string   `json:"error,omitempty"`
	CDI    []string `json:"cdi,omitempty"`
	Slices int      `json:"slices"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	var cfg harnessConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.Node}}
	objects := []runtime.Object{node}
	for i := range cfg.Claims {
		objects = append(objects, &cfg.Claims[i])
	}
	client := fake.NewSimpleClientset(objects...)
	manager, err := dra.NewManagerImpl(client, cfg.StateDir, types.NodeName(cfg.Node))
	if err != nil {
		return err
	}
	ctx := context.Background()
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })
	getNode := func() (*v1.Node, error) { return node, nil }
	activePods := func() []*v1.Pod { return []*v1.Pod{&cfg.Pod} }
	if err := manager.Start(ctx, activePods, getNode, ready); err != nil {
		return err
	}
	plugins := pluginmanager.NewPluginManager(cfg.RegistryDir, &record.FakeRecorder{})
	plugins.AddHandler(pluginwatcherapi.DRAPlugin, manager.GetWatcherHandler())
	stop := make(chan struct{})
	go plugins.Run(ready, stop)

	out := json.NewEncoder(os.Stdout)
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		answer := reply{OK: true}
		var err error
		switch lines.Text() {
		case "registered":
			_, err = draplugin.NewDRAPluginClient(cfg.Driver)
		case "prepare":
			err = manager.PrepareResources(ctx, &cfg.Pod)
		case "resources":
			var info *dra.ContainerInfo
			info, err = manager.GetResources(&cfg.Pod, &cfg.Pod.Spec.Containers[0])
			if err == nil {
				for _, device := range info.CDIDevices {
					answer.CDI = append(answer.CDI, device.Name)
				}
			}
		case "unprepare":
			err = manager.UnprepareResources(ctx, &cfg.Pod)
		case "quit":
			close(stop)
			return nil
		default:
			err = fmt.Errorf("unknown command %q", lines.Text())
		}
		if err != nil {
			answer.OK, answer.Error = false, err.Error()
		}
		if slices, err := client.ResourceV1beta1().ResourceSlices().List(ctx, metav1.ListOptions{}); err == nil {
			answer.Slices = len(slices.Items)
		}
		if err := out.Encode(answer); err != nil {
			return err
		}
	}
	close(stop)
	return lines.Err()
}
