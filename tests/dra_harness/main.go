// Command kubelet_dra runs the kubelet's own DRA manager (k8s.io/kubernetes pkg/kubelet/cm/dra,
// v1.32, as vendored by kubeedge/kubeedge) behind the kubelet's own plugin manager
// (pkg/kubelet/pluginmanager: the plugin watcher on plugins_registry/ and its reconciler), so a
// DRA driver meets the code a 1.32 kubelet runs, not our model of it.
//
// It is built inside an extracted kubeedge tree (cmd/kubelet_dra/), with that tree's vendor
// directory, by tests/dra_harness/harness.py; its source is kept here, never the tree or a
// binary.
//
//	kubelet_dra -registry DIR -state DIR -node NAME
//
// The manager's client is client-go's fake clientset (k8s.io/client-go/kubernetes/fake): the
// test puts the ResourceClaims in it, and reads back every call the manager made to it (the
// ResourceSlice wipes of the registration handler among them). Commands arrive on stdin, one
// JSON object a line; every answer and every registration event leaves on stdout, one JSON
// object a line:
//
//	{"op":"claim","claim":{ResourceClaim, resource.k8s.io/v1beta1}} -> {"event":"claim","name":N}
//	{"op":"prepare","pod":{Pod}}   -> {"event":"prepare","error":E,"cdi":{container:[ids]}}
//	{"op":"unprepare","pod":{Pod}} -> {"event":"unprepare","error":E}
//	{"op":"actions"}               -> {"event":"actions","actions":[{verb,resource,namespace,fieldSelector}]}
//
//	unprompted: {"event":"ready"} once the plugin manager runs, then
//	{"event":"validate"|"register"|"deregister","driver":D,"endpoint":P,"services":[S],"error":E}
//	as the plugin manager calls the DRA registration handler.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

// out serialises the JSON lines: registration events come from the plugin manager's goroutines.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) emit(event string, fields map[string]any) {
	line := map[string]any{"event": event}
	for k, v := range fields {
		line[k] = v
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enc.Encode(line); err != nil {
		klog.ErrorS(err, "writing to stdout")
		os.Exit(1)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// reporting is the DRA registration handler as the plugin manager sees it, telling the test each
// call and its outcome; the calls themselves are the real handler's.
type reporting struct {
	inner cache.PluginHandler
	out   *out
}

func (r reporting) ValidatePlugin(name, endpoint string, versions []string) error {
	err := r.inner.ValidatePlugin(name, endpoint, versions)
	r.out.emit("validate", map[string]any{"driver": name, "endpoint": endpoint, "services": versions, "error": errText(err)})
	return err
}

func (r reporting) RegisterPlugin(name, endpoint string, versions []string, timeout *time.Duration) error {
	err := r.inner.RegisterPlugin(name, endpoint, versions, timeout)
	r.out.emit("register", map[string]any{"driver": name, "endpoint": endpoint, "services": versions, "error": errText(err)})
	return err
}

func (r reporting) DeRegisterPlugin(name string) {
	r.inner.DeRegisterPlugin(name)
	r.out.emit("deregister", map[string]any{"driver": name})
}

// pods are the pods the test prepared and has not unprepared: the manager's reconcile loop
// unprepares the claims of any other pod it holds.
type pods struct {
	mu  sync.Mutex
	set map[types.UID]*v1.Pod
}

func (p *pods) active() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := make([]*v1.Pod, 0, len(p.set))
	for _, pod := range p.set {
		list = append(list, pod)
	}
	return list
}

type command struct {
	Op    string                     `json:"op"`
	Claim *resourceapi.ResourceClaim `json:"claim,omitempty"`
	Pod   *v1.Pod                    `json:"pod,omitempty"`
}

func main() {
	klog.InitFlags(nil)
	registry := flag.String("registry", "", "the plugin watcher's directory (the kubelet's plugins_registry)")
	stateDir := flag.String("state", "", "where the DRA manager keeps its checkpoint")
	nodeName := flag.String("node", "node-a", "the node's name")
	flag.Parse()
	if *registry == "" || *stateDir == "" {
		fmt.Fprintln(os.Stderr, "usage: kubelet_dra -registry DIR -state DIR [-node NAME]")
		os.Exit(2)
	}
	if err := run(*registry, *stateDir, *nodeName); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet_dra:", err)
		os.Exit(1)
	}
}

func run(registry, stateDir, nodeName string) error {
	o := &out{enc: json.NewEncoder(os.Stdout)}
	client := fake.NewSimpleClientset()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	active := &pods{set: map[types.UID]*v1.Pod{}}
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })

	manager, err := dra.NewManagerImpl(client, stateDir, types.NodeName(nodeName))
	if err != nil {
		return fmt.Errorf("the DRA manager: %w", err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	defer cancel()
	// The kubelet starts its container manager (and with it the DRA manager) before it hands the
	// DRA handler to the plugin manager; the handler reads the node through the getter Start sets.
	getNode := func() (*v1.Node, error) { return node, nil }
	if err := manager.Start(ctx, active.active, getNode, ready); err != nil {
		return fmt.Errorf("starting the DRA manager: %w", err)
	}
	plugins := pluginmanager.NewPluginManager(registry, record.NewFakeRecorder(100))
	plugins.AddHandler(registerapi.DRAPlugin, reporting{inner: manager.GetWatcherHandler(), out: o})
	go plugins.Run(ready, ctx.Done())
	o.emit("ready", nil)

	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<24)
	for lines.Scan() {
		var cmd command
		if err := json.Unmarshal(lines.Bytes(), &cmd); err != nil {
			return fmt.Errorf("command %q: %w", lines.Text(), err)
		}
		switch cmd.Op {
		case "claim":
			created, err := client.ResourceV1beta1().ResourceClaims(cmd.Claim.Namespace).Create(ctx, cmd.Claim, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating claim %s/%s: %w", cmd.Claim.Namespace, cmd.Claim.Name, err)
			}
			o.emit("claim", map[string]any{"name": created.Name, "uid": created.UID})
		case "prepare":
			active.mu.Lock()
			active.set[cmd.Pod.UID] = cmd.Pod
			active.mu.Unlock()
			err := manager.PrepareResources(ctx, cmd.Pod)
			cdi := map[string][]string{}
			if err == nil {
				for i := range cmd.Pod.Spec.Containers {
					container := &cmd.Pod.Spec.Containers[i]
					info, gerr := manager.GetResources(cmd.Pod, container)
					if gerr != nil {
						err = gerr
						break
					}
					ids := []string{}
					for _, d := range info.CDIDevices {
						ids = append(ids, d.Name)
					}
					cdi[container.Name] = ids
				}
			}
			o.emit("prepare", map[string]any{"error": errText(err), "cdi": cdi})
		case "unprepare":
			err := manager.UnprepareResources(ctx, cmd.Pod)
			if err == nil {
				active.mu.Lock()
				delete(active.set, cmd.Pod.UID)
				active.mu.Unlock()
			}
			o.emit("unprepare", map[string]any{"error": errText(err)})
		case "actions":
			list := []map[string]string{}
			for _, a := range client.Actions() {
				entry := map[string]string{
					"verb": a.GetVerb(), "resource": a.GetResource().Resource,
					"version": a.GetResource().Version, "namespace": a.GetNamespace(),
				}
				if dc, ok := a.(k8stesting.DeleteCollectionAction); ok {
					entry["fieldSelector"] = dc.GetListRestrictions().Fields.String()
				}
				if g, ok := a.(k8stesting.GetAction); ok {
					entry["name"] = g.GetName()
				}
				list = append(list, entry)
			}
			o.emit("actions", map[string]any{"actions": list})
		default:
			return fmt.Errorf("unknown op %q", cmd.Op)
		}
	}
	return lines.Err()
}
