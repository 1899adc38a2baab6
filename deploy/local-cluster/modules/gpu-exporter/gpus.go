package main

import (
	"crypto/sha256"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	gpuResource    = "nvidia.com/gpu"
	migPrefix      = "nvidia.com/mig-"
	defaultUtil    = 70.0 // percent, when a pod's env says nothing
	defaultMemFrac = 0.70 // of the device's memory, likewise
)

// model: what NVIDIA's GPU feature discovery label nvidia.com/gpu.product names.
type model struct {
	name        string  // modelName as dcgm-exporter reports it
	memMiB      float64 // framebuffer
	idleW, maxW float64
}

var models = map[string]model{
	"NVIDIA-H100-80GB-HBM3": {"NVIDIA H100 80GB HBM3", 81559, 70, 700},
	"NVIDIA-A100-SXM4-80GB": {"NVIDIA A100-SXM4-80GB", 81920, 50, 400},
	"Tesla-T4":              {"Tesla T4", 15360, 10, 70},
}

var (
	gbInName  = regexp.MustCompile(`(\d+)GB`)
	migMemory = regexp.MustCompile(`\.(\d+)gb$`)
)

func modelOf(product string) model {
	product = strings.TrimSuffix(product, "-SHARED") // how GPU feature discovery names time-sliced GPUs
	if i := strings.Index(product, "-MIG-"); i >= 0 {
		product = product[:i]
	}
	if m, ok := models[product]; ok {
		return m
	}
	mem := 16384.0
	if g := gbInName.FindStringSubmatch(product); g != nil {
		n, _ := strconv.Atoi(g[1])
		mem = float64(n) * 1024
	}
	return model{strings.ReplaceAll(product, "-", " "), mem, 50, 300}
}

// A slot is what one unit of a node's GPU resource is: a whole GPU, a time slice of one, or a
// MIG instance. Pods are given slots; series are per device (GPU or MIG instance).
type slot struct {
	resource string
	device   *device
}

// A device is one series set: a physical GPU, or one MIG instance of one.
type device struct {
	node       string
	gpu        int
	uuid       string
	model      model
	memMiB     float64
	migProfile string // "1g.10gb" for a MIG instance
	instanceID int
	slices     int // time slices (1: not shared)
	holders    []holder
}

type holder struct {
	namespace, pod, container string
	util, mem                 profile
	started                   time.Time
}

// devicesOf is what a node's allocatable GPU resources become, in a stable order, and the
// slots per resource name.
func devicesOf(node *corev1.Node) ([]*device, map[string][]slot) {
	var devices []*device
	slots := map[string][]slot{}
	m := modelOf(node.Labels["nvidia.com/gpu.product"])
	names := make([]string, 0)
	for name := range node.Status.Allocatable {
		names = append(names, string(name))
	}
	sort.Strings(names)
	gpuIndex := 0
	for _, name := range names {
		q := node.Status.Allocatable[corev1.ResourceName(name)]
		count := int(q.Value())
		switch {
		case name == gpuResource && count > 0:
			replicas := 1
			if node.Labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing" {
				replicas = atoiOr(node.Labels["nvidia.com/gpu.replicas"], 1)
			}
			physical := atoiOr(node.Labels["nvidia.com/gpu.count"], (count+replicas-1)/replicas)
			var gpus []*device
			for i := 0; i < physical; i++ {
				d := &device{node: node.Name, gpu: gpuIndex, uuid: uuidOf(node.Name, gpuIndex), model: m,
					memMiB: m.memMiB, slices: replicas}
				gpuIndex++
				gpus = append(gpus, d)
				devices = append(devices, d)
			}
			for s := 0; s < count && len(gpus) > 0; s++ {
				slots[name] = append(slots[name], slot{name, gpus[(s/replicas)%len(gpus)]})
			}
		case strings.HasPrefix(name, migPrefix) && count > 0:
			profileName := strings.TrimPrefix(name, migPrefix) // e.g. 1g.10gb
			perGPU := 7 / max(1, atoiOr(strings.SplitN(profileName, "g", 2)[0], 1))
			memMiB := m.memMiB / 8
			if g := migMemory.FindStringSubmatch(profileName); g != nil {
				n, _ := strconv.Atoi(g[1])
				memMiB = float64(n) * 1024
			}
			parent := -1
			for s := 0; s < count; s++ {
				if s%perGPU == 0 {
					parent = gpuIndex
					gpuIndex++
				}
				d := &device{node: node.Name, gpu: parent, uuid: uuidOf(node.Name, parent), model: m,
					memMiB: memMiB, migProfile: profileName, instanceID: s%perGPU + 1, slices: 1}
				devices = append(devices, d)
				slots[name] = append(slots[name], slot{name, d})
			}
		}
	}
	return devices, slots
}

func atoiOr(text string, fallback int) int {
	if n, err := strconv.Atoi(text); err == nil && n > 0 {
		return n
	}
	return fallback
}

// uuidOf: a stable GPU UUID per node and index, shaped as NVIDIA's (GPU-8-4-4-4-12 hex).
func uuidOf(node string, gpu int) string {
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%s/%d", node, gpu))))
	return fmt.Sprintf("GPU-%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// reading is what one device reports now.
type reading struct {
	util, memUsed float64
	holder        *holder // the pod it is attributed to, nil when unassigned
}

// read: what a device reports at `now`. A whole GPU or MIG instance reports its one holder's
// profile. A time-sliced GPU reports the sum of its holders' (at most 100 % and its memory),
// attributed to the last of them, as dcgm-exporter without --kubernetes-virtual-gpus does:
// it maps each device to one pod, so a shared GPU's use is never told apart per pod.
func (d *device) read(now time.Time) reading {
	if len(d.holders) == 0 {
		return reading{}
	}
	var r reading
	for i := range d.holders {
		h := &d.holders[i]
		elapsed := now.Sub(h.started)
		util := defaultUtil
		if h.util != nil {
			util = h.util.at(elapsed)
		}
		mem := d.memMiB * defaultMemFrac
		if h.mem != nil {
			mem = h.mem.at(elapsed)
		}
		r.util += util
		r.memUsed += mem
		r.holder = h
	}
	r.util = math.Min(r.util, 100)
	r.memUsed = math.Min(r.memUsed, d.memMiB)
	return r
}
