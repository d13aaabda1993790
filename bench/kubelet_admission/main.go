// Command kubelet_admission drives the kubelet's own device manager (k8s.io/kubernetes
// pkg/kubelet/cm/devicemanager, from Debian's kubernetes source package) the way the kubelet admits a
// pod: Allocate(pod, container), which calls the plugin's GetPreferredAllocation when the plugin
// advertises it and then its Allocate, followed by GetDeviceRunContainerOptions (the run options
// the kubelet hands to the runtime). It times each admission.
//
// It is built inside the Debian source tree the cluster tier builds Kubernetes from
// (tests/cluster/scripts/build-kubernetes.sh; cmd/kubelet_admission/), with that tree's vendor
// directory and Go, by `python -m bench.run --only admission` (bench/admission.py); its source is
// kept here, never the tree or a binary. The tree's go.mod says go 1.15: no generics, no `any`.
//
//	kubelet_admission manager -dir D -resources R1,R2 -devices 8 -count 2 -rounds N -warmup W -gap 50ms
//	    serves D/kubelet.sock, waits until every resource has -devices healthy devices, then
//	    admits one pod per resource per round (the resources alternate which goes first) and
//	    prints one JSON object: resource -> admission latencies in milliseconds. With
//	    -probe N -sockets R1=F1,R2=F2 it then calls each plugin directly (socket F in D), N
//	    rounds of GetDevicePluginOptions, GetPreferredAllocation and Allocate, alternating between
//	    the plugins, and adds resource -> method -> latencies: each call's share of an admission.
//	kubelet_admission stub -dir D -resource R -devices 8
//	    the kubelet's stub plugin (devicemanager.NewDevicePluginStub), advertising
//	    GetPreferredAllocation, registered with D/kubelet.sock; runs until killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	_ "unsafe" // go:linkname

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

// The exported NewManagerImpl is fixed to /var/lib/kubelet/device-plugins/kubelet.sock; the
// unexported constructor takes the socket path, which a benchmark needs.
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(socketPath string, topology []cadvisorapi.Node, store topologymanager.Store) (*devicemanager.ManagerImpl, error)

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet_admission manager|stub [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "manager":
		err = runManager(os.Args[2:])
	case "stub":
		err = runStub(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q (manager or stub)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet_admission:", err)
		os.Exit(1)
	}
}

func emit(v interface{}) {
	line, _ := json.Marshal(v)
	fmt.Println(string(line))
}

func runManager(args []string) error {
	fs := flag.NewFlagSet("manager", flag.ExitOnError)
	dir := fs.String("dir", "", "device-plugin directory (kubelet.sock and the checkpoint go there)")
	resources := fs.String("resources", "", "comma-separated resource names to admit pods for")
	devices := fs.Int("devices", 8, "healthy devices each resource must list before admissions start")
	count := fs.Int("count", 2, "devices each pod's container asks for")
	rounds := fs.Int("rounds", 200, "timed admissions per resource")
	warmup := fs.Int("warmup", 20, "untimed admissions per resource first")
	gap := fs.Duration("gap", 50*time.Millisecond, "pause after every admission (0: back to back)")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for the plugins' devices")
	probe := fs.Int("probe", 0, "direct calls per method and plugin after the admissions (0: none)")
	sockets := fs.String("sockets", "", "resource=socket file name in -dir, comma-separated, for -probe")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := strings.Split(*resources, ",")
	if *dir == "" || *resources == "" {
		return fmt.Errorf("-dir and -resources are required")
	}

	m, err := newManagerImpl(filepath.Join(*dir, "kubelet.sock"), nil, topologymanager.NewFakeManager())
	if err != nil {
		return err
	}
	// The pod being admitted is the only active one: the manager frees the previous pod's
	// devices at the next admission (UpdateAllocatedDevices), as after a pod is deleted.
	var active []*v1.Pod
	activePods := func() []*v1.Pod { return active }
	if err := m.Start(activePods, sourcesReady{}); err != nil {
		return err
	}
	defer m.Stop()
	emit(map[string]interface{}{"event": "listening"})

	deadline := time.Now().Add(*wait)
	for {
		_, allocatable, _ := m.GetCapacity()
		ready := true
		for _, name := range names {
			q := allocatable[v1.ResourceName(name)]
			if int(q.Value()) < *devices {
				ready = false
			}
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every resource of %v listed %d healthy devices within %s: %v", names, *devices, *wait, allocatable)
		}
		time.Sleep(20 * time.Millisecond)
	}
	emit(map[string]interface{}{"event": "ready"})

	samples := map[string][]float64{}
	serial := 0
	for round := 0; round < *warmup+*rounds; round++ {
		order := append([]string(nil), names...)
		if round%2 == 1 {
			sort.Sort(sort.Reverse(sort.StringSlice(order)))
		}
		for _, name := range order {
			serial++
			pod, container := podFor(name, serial, *count)
			active = []*v1.Pod{pod}
			started := time.Now()
			if err := m.Allocate(pod, container); err != nil {
				return fmt.Errorf("admission %d of %s: Allocate: %w", serial, name, err)
			}
			opts, err := m.GetDeviceRunContainerOptions(pod, container)
			took := time.Since(started)
			if err != nil {
				return fmt.Errorf("admission %d of %s: run options: %w", serial, name, err)
			}
			if err := check(m, pod, name, *count, opts); err != nil {
				return fmt.Errorf("admission %d of %s: %w", serial, name, err)
			}
			if round >= *warmup {
				samples[name] = append(samples[name], float64(took.Microseconds())/1000)
			}
			if *gap > 0 {
				time.Sleep(*gap)
			}
		}
	}
	calls := map[string]map[string][]float64{}
	if *probe > 0 {
		if calls, err = probeAll(m, *dir, *sockets, *count, *probe, *gap); err != nil {
			return err
		}
	}
	emit(map[string]interface{}{"event": "done", "samples_ms": samples, "calls_ms": calls})
	return nil
}

// probeAll calls every plugin of `sockets` directly, as the manager's endpoint does (one client
// connection per plugin, a 10 s deadline per call), alternating between the plugins.
func probeAll(m *devicemanager.ManagerImpl, dir, sockets string, count, rounds int, gap time.Duration) (map[string]map[string][]float64, error) {
	type target struct {
		name   string
		client pluginapi.DevicePluginClient
		ids    []string
	}
	var targets []target
	for _, pair := range strings.Split(sockets, ",") {
		parts := strings.SplitN(pair, "=", 2)
		if len(parts) != 2 {
			return nil, fmt.Errorf("-sockets: %q is not resource=file", pair)
		}
		name, file := parts[0], parts[1]
		// grpc 1.27 (this tree's) has no unix:// resolver: dial the socket path as the manager's
		// endpoint does.
		conn, err := grpc.Dial(filepath.Join(dir, file), grpc.WithInsecure(),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", addr)
			}))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		client := pluginapi.NewDevicePluginClient(conn)
		ids, err := listed(client)
		if err != nil {
			return nil, fmt.Errorf("ListAndWatch of %s: %w", name, err)
		}
		targets = append(targets, target{name, client, ids})
	}
	out := map[string]map[string][]float64{}
	for round := 0; round < rounds; round++ {
		for i := range targets {
			t := targets[(i+round)%len(targets)]
			if out[t.name] == nil {
				out[t.name] = map[string][]float64{}
			}
			calls := []struct {
				method string
				call   func(ctx context.Context) error
			}{
				{"GetDevicePluginOptions", func(ctx context.Context) error {
					_, err := t.client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
					return err
				}},
				{"GetPreferredAllocation", func(ctx context.Context) error {
					_, err := t.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
						ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: t.ids, AllocationSize: int32(count)}},
					})
					return err
				}},
				{"Allocate", func(ctx context.Context) error {
					_, err := t.client.Allocate(ctx, &pluginapi.AllocateRequest{
						ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: t.ids[:count]}},
					})
					return err
				}},
			}
			for _, c := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				started := time.Now()
				err := c.call(ctx)
				took := time.Since(started)
				cancel()
				if err != nil {
					return nil, fmt.Errorf("%s of %s: %w", c.method, t.name, err)
				}
				out[t.name][c.method] = append(out[t.name][c.method], float64(took.Microseconds())/1000)
				if gap > 0 {
					time.Sleep(gap)
				}
			}
		}
	}
	return out, nil
}

// listed: the device ids of the plugin's first ListAndWatch answer, sorted (the 1.20 manager
// has no GetAllocatableDevices).
func listed(client pluginapi.DevicePluginClient) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(first.Devices))
	for _, d := range first.Devices {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids, nil
}

func podFor(name string, serial, count int) (*v1.Pod, *v1.Container) {
	limits := v1.ResourceList{v1.ResourceName(name): *resource.NewQuantity(int64(count), resource.DecimalSI)}
	container := v1.Container{Name: "main", Resources: v1.ResourceRequirements{Limits: limits, Requests: limits}}
	pod := &v1.Pod{}
	pod.Name = fmt.Sprintf("bench-%d", serial)
	pod.Namespace = "default"
	pod.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", serial))
	pod.Spec.Containers = []v1.Container{container}
	return pod, &pod.Spec.Containers[0]
}

// check: the pod got `count` devices of the resource and run options that carry them.
func check(m *devicemanager.ManagerImpl, pod *v1.Pod, name string, count int, opts *devicemanager.DeviceRunContainerOptions) error {
	got := 0
	for _, devices := range m.GetDevices(string(pod.UID), "main") {
		if devices.ResourceName == name {
			got += len(devices.DeviceIds)
		}
	}
	if got != count {
		return fmt.Errorf("%d devices allocated, want %d", got, count)
	}
	if opts == nil || len(opts.Envs)+len(opts.Devices)+len(opts.Mounts)+len(opts.Annotations) == 0 {
		return fmt.Errorf("empty run options: %+v", opts)
	}
	return nil
}

func runStub(args []string) error {
	fs := flag.NewFlagSet("stub", flag.ExitOnError)
	dir := fs.String("dir", "", "device-plugin directory holding kubelet.sock")
	name := fs.String("resource", "example.com/stub", "resource name")
	devices := fs.Int("devices", 8, "devices to list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	devs := make([]*pluginapi.Device, *devices)
	for i := range devs {
		devs[i] = &pluginapi.Device{ID: fmt.Sprintf("Stub-%d", i), Health: pluginapi.Healthy}
	}
	socket := filepath.Join(*dir, "stub.sock")
	stub := devicemanager.NewDevicePluginStub(devs, socket, *name, false, true)
	stub.SetGetPreferredAllocFunc(preferred)
	stub.SetAllocFunc(allocate)
	if err := stub.Start(); err != nil {
		return err
	}
	defer stub.Stop()
	if err := stub.Register(filepath.Join(*dir, "kubelet.sock"), *name, ""); err != nil {
		return err
	}
	klog.InfoS("stub registered", "resource", *name)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}

// preferred: the must-include devices, then the lowest-numbered available ones (the stub's
// default answers with none, which would leave the choice to the manager).
func preferred(r *pluginapi.PreferredAllocationRequest, _ map[string]pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
	out := &pluginapi.PreferredAllocationResponse{}
	for _, c := range r.ContainerRequests {
		chosen := append([]string(nil), c.MustIncludeDeviceIDs...)
		have := sets.NewString(chosen...)
		avail := append([]string(nil), c.AvailableDeviceIDs...)
		sort.Strings(avail)
		for _, id := range avail {
			if len(chosen) >= int(c.AllocationSize) {
				break
			}
			if !have.Has(id) {
				chosen = append(chosen, id)
				have.Insert(id)
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return out, nil
}

// allocate: run options shaped like an Ascend plugin's (the visible-devices variable, one
// device node per chip and the shared management nodes); the stub's default answers with no
// container response, which the manager refuses.
func allocate(r *pluginapi.AllocateRequest, _ map[string]pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		ids := make([]string, 0, len(c.DevicesIDs))
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		for _, id := range c.DevicesIDs {
			n := strings.TrimPrefix(id, "Stub-")
			ids = append(ids, n)
			path := "/dev/davinci" + n
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: path, HostPath: path, Permissions: "rw"})
		}
		for _, path := range []string{"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} {
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: path, HostPath: path, Permissions: "rw"})
		}
		resp.Envs["ASCEND_VISIBLE_DEVICES"] = strings.Join(ids, ",")
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}
