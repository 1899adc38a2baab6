package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Exporter keeps which slots each pod's containers were given, so a pod keeps its GPUs for
// its whole life while others come and go (what a device plugin's allocation does).
type Exporter struct {
	mu       sync.Mutex
	assigned map[assignKey][]int // slot indices on the pod's node, per resource
	warned   map[string]bool     // bad env values already logged, once each
	logf     func(format string, args ...any)
}

type assignKey struct {
	pod       types.UID
	node      string
	container string
	resource  string
}

func NewExporter(logf func(string, ...any)) *Exporter {
	return &Exporter{assigned: map[assignKey][]int{}, warned: map[string]bool{}, logf: logf}
}

// holdsGPUs: a pod bound to a node, not finished (a terminating pod still holds its GPUs).
func holdsGPUs(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// Write renders every GPU of `nodes` in dcgm-exporter's text format, given to `pods` by
// their containers' GPU limits, as they report at `now`.
func (e *Exporter) Write(w io.Writer, nodes []*corev1.Node, pods []*corev1.Pod, now time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()

	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var devices []*device
	slotsByNode := map[string]map[string][]slot{}
	for _, node := range nodes {
		ds, slots := devicesOf(node)
		devices = append(devices, ds...)
		slotsByNode[node.Name] = slots
	}
	e.assign(slotsByNode, pods)
	return render(w, devices, now)
}

func (e *Exporter) assign(slotsByNode map[string]map[string][]slot, pods []*corev1.Pod) {
	live := map[assignKey]bool{}
	var holding []*corev1.Pod
	for _, pod := range pods {
		if holdsGPUs(pod) {
			holding = append(holding, pod)
		}
	}
	// The oldest first, so a restart of the exporter gives the same GPUs again.
	sort.Slice(holding, func(i, j int) bool {
		a, b := holding[i], holding[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	type want struct {
		key    assignKey
		count  int
		holder holder
	}
	var wants []want
	for _, pod := range holding {
		for _, c := range pod.Spec.Containers {
			for name, q := range c.Resources.Limits {
				resource := string(name)
				if resource != gpuResource && !strings.HasPrefix(resource, migPrefix) || q.Value() <= 0 {
					continue
				}
				key := assignKey{pod.UID, pod.Spec.NodeName, c.Name, resource}
				live[key] = true
				wants = append(wants, want{key, int(q.Value()), e.holderOf(pod, c)})
			}
		}
	}
	for key := range e.assigned {
		if !live[key] {
			delete(e.assigned, key)
		}
	}
	taken := map[string]map[string]map[int]bool{} // node -> resource -> slot
	use := func(node, resource string, s int) {
		if taken[node] == nil {
			taken[node] = map[string]map[int]bool{}
		}
		if taken[node][resource] == nil {
			taken[node][resource] = map[int]bool{}
		}
		taken[node][resource][s] = true
	}
	for key, slots := range e.assigned {
		for _, s := range slots {
			use(key.node, key.resource, s)
		}
	}
	for _, w := range wants {
		slots := slotsByNode[w.key.node][w.key.resource]
		got := e.assigned[w.key]
		for s := 0; s < len(slots) && len(got) < w.count; s++ {
			if !taken[w.key.node][w.key.resource][s] {
				use(w.key.node, w.key.resource, s)
				got = append(got, s)
			}
		}
		e.assigned[w.key] = got
		seen := map[*device]bool{}
		for _, s := range got {
			if s < len(slots) && !seen[slots[s].device] {
				seen[slots[s].device] = true
				slots[s].device.holders = append(slots[s].device.holders, w.holder)
			}
		}
	}
}

func (e *Exporter) holderOf(pod *corev1.Pod, c corev1.Container) holder {
	h := holder{namespace: pod.Namespace, pod: pod.Name, container: c.Name, started: pod.CreationTimestamp.Time}
	if pod.Status.StartTime != nil {
		h.started = pod.Status.StartTime.Time
	}
	rank, known := rankOf(pod, c)
	for _, env := range c.Env {
		var limit float64
		switch env.Name {
		case "GPU_SIM_UTIL":
			limit = 100
		case "GPU_SIM_MEM_MIB":
			limit = 1 << 30
		default:
			continue
		}
		r, err := parseRanked(env.Value, limit)
		if err != nil {
			where := fmt.Sprintf("%s/%s %s=%q", pod.Namespace, pod.Name, env.Name, env.Value)
			if !e.warned[where] {
				e.warned[where] = true
				e.logf("ignoring %s: %v (the default applies)", where, err)
			}
			continue
		}
		if env.Name == "GPU_SIM_UTIL" {
			h.util = r.of(rank, known)
		} else {
			h.mem = r.of(rank, known)
		}
	}
	return h
}

// IndexAnnotation is the completion index the Job controller gives each pod of an Indexed Job.
const IndexAnnotation = "batch.kubernetes.io/job-completion-index"

// rankOf is the pod's rank in its gang (see `profile`): the container's RANK env, else the
// pod's completion index; known is false when it has neither.
func rankOf(pod *corev1.Pod, c corev1.Container) (int, bool) {
	for _, env := range c.Env {
		if env.Name == "RANK" {
			if n, err := strconv.Atoi(strings.TrimSpace(env.Value)); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	if n, err := strconv.Atoi(pod.Annotations[IndexAnnotation]); err == nil && n >= 0 {
		return n, true
	}
	return 0, false
}

type metric struct {
	name, help string
	value      func(d *device, r reading) (float64, bool)
}

// The fields of dcgm-exporter's default counters the platform reads (docs/telemetry.md).
var metrics = []metric{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", func(d *device, r reading) (float64, bool) {
		return r.util, d.migProfile == "" // not measured on MIG instances: GR_ENGINE_ACTIVE is
	}},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", func(d *device, r reading) (float64, bool) {
		return d.memMiB - r.memUsed, true
	}},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", func(d *device, r reading) (float64, bool) {
		return r.memUsed, true
	}},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", func(d *device, r reading) (float64, bool) {
		return d.model.idleW + (d.model.maxW-d.model.idleW)*r.util/100, d.migProfile == ""
	}},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", func(d *device, r reading) (float64, bool) {
		return r.util / 100, true
	}},
}

const driverVersion = "570.124.06"

func render(w io.Writer, devices []*device, now time.Time) error {
	readings := make([]reading, len(devices))
	for i, d := range devices {
		readings[i] = d.read(now)
	}
	var b strings.Builder
	for _, m := range metrics {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for i, d := range devices {
			v, ok := m.value(d, readings[i])
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "%s{%s} %s\n", m.name, labelsOf(d, readings[i].holder), formatValue(v))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// labels in dcgm-exporter's order: the device, MIG instance, host, driver, then the pod.
func labelsOf(d *device, h *holder) string {
	pairs := [][2]string{
		{"gpu", fmt.Sprint(d.gpu)}, {"UUID", d.uuid}, {"pci_bus_id", fmt.Sprintf("00000000:%02X:00.0", 0x18+d.gpu)},
		{"device", fmt.Sprintf("nvidia%d", d.gpu)}, {"modelName", d.model.name},
	}
	if d.migProfile != "" {
		pairs = append(pairs, [2]string{"GPU_I_PROFILE", d.migProfile}, [2]string{"GPU_I_ID", fmt.Sprint(d.instanceID)})
	}
	pairs = append(pairs, [2]string{"Hostname", d.node}, [2]string{"DCGM_FI_DRIVER_VERSION", driverVersion})
	if h != nil {
		pairs = append(pairs, [2]string{"container", h.container}, [2]string{"namespace", h.namespace},
			[2]string{"pod", h.pod})
	}
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p[0] + `="` + labelEscaper.Replace(p[1]) + `"`
	}
	return strings.Join(parts, ",")
}

// The text exposition format escapes these three in label values, nothing else.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func formatValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
