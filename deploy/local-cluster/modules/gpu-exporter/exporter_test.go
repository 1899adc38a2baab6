package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func node(name string, labels map[string]string, allocatable map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Allocatable = corev1.ResourceList{}
	for k, v := range allocatable {
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return n
}

func pod(name, nodeName string, created time.Time, resourceName string, count int64, env ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(created)}}
	p.Spec.NodeName = nodeName
	c := corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceName(resourceName): *resource.NewQuantity(count, resource.DecimalSI)}}}
	for i := 0; i+1 < len(env); i += 2 {
		c.Env = append(c.Env, corev1.EnvVar{Name: env[i], Value: env[i+1]})
	}
	p.Spec.Containers = []corev1.Container{c}
	p.Status.Phase = corev1.PodRunning
	start := metav1.NewTime(created)
	p.Status.StartTime = &start
	return p
}

func scrape(t *testing.T, e *Exporter, nodes []*corev1.Node, pods []*corev1.Pod, at time.Time) []string {
	t.Helper()
	var b strings.Builder
	if err := e.Write(&b, nodes, pods, at); err != nil {
		t.Fatal(err)
	}
	return strings.Split(b.String(), "\n")
}

func lines(all []string, parts ...string) []string {
	var out []string
	for _, l := range all {
		ok := !strings.HasPrefix(l, "#")
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

var h100 = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

func TestEveryGPUOfANodeHasItsSeriesUnassignedAtZero(t *testing.T) {
	out := scrape(t, NewExporter(t.Logf), []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "8", "cpu": "96"})}, nil, t0)
	util := lines(out, "DCGM_FI_DEV_GPU_UTIL{")
	if len(util) != 8 {
		t.Fatalf("want 8 GPU series, got %d: %v", len(util), util)
	}
	for _, l := range util {
		if !strings.HasSuffix(l, "} 0") || strings.Contains(l, "pod=") {
			t.Errorf("unassigned GPU should report 0 and no pod: %s", l)
		}
	}
	if !strings.Contains(util[0], `gpu="0",UUID="GPU-`) || !strings.Contains(util[0], `device="nvidia0",modelName="NVIDIA H100 80GB HBM3"`) ||
		!strings.Contains(util[0], `Hostname="h100-0"`) {
		t.Errorf("labels: %s", util[0])
	}
	for _, help := range []string{"# TYPE DCGM_FI_DEV_GPU_UTIL gauge", "# TYPE DCGM_FI_DEV_FB_USED gauge", "# TYPE DCGM_FI_DEV_FB_FREE gauge",
		"# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge", "# TYPE DCGM_FI_DEV_POWER_USAGE gauge"} {
		if !strings.Contains(strings.Join(out, "\n"), help) {
			t.Errorf("missing %q", help)
		}
	}
}

func TestAPodsGPUsReportItsProfileFromItsStart(t *testing.T) {
	e := NewExporter(t.Logf)
	nodes := []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "8"})}
	p := pod("train-1-0-abcde", "h100-0", t0, "nvidia.com/gpu", 2, "GPU_SIM_UTIL", "0:90,20:5", "GPU_SIM_MEM_MIB", "4096")
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{5 * time.Second, "} 90"}, {25 * time.Second, "} 5"}} {
		out := scrape(t, e, nodes, []*corev1.Pod{p}, t0.Add(c.at))
		mine := lines(out, "DCGM_FI_DEV_GPU_UTIL{", `pod="train-1-0-abcde"`)
		if len(mine) != 2 {
			t.Fatalf("want the pod's 2 GPUs, got %v", mine)
		}
		for _, l := range mine {
			if !strings.HasSuffix(l, c.want) || !strings.Contains(l, `container="main",namespace="team-a",pod="train-1-0-abcde"`) {
				t.Errorf("at %v: %s", c.at, l)
			}
		}
		if got := lines(out, "DCGM_FI_DEV_FB_USED{", `pod="train-1-0-abcde"`); !strings.HasSuffix(got[0], "} 4096") {
			t.Errorf("memory: %v", got)
		}
	}
}

func TestWithoutEnvASteadySeventyPercent(t *testing.T) {
	out := scrape(t, NewExporter(t.Logf), []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "8"})},
		[]*corev1.Pod{pod("p", "h100-0", t0, "nvidia.com/gpu", 1)}, t0.Add(time.Hour))
	if got := lines(out, "DCGM_FI_DEV_GPU_UTIL{", `pod="p"`); len(got) != 1 || !strings.HasSuffix(got[0], "} 70") {
		t.Fatalf("got %v", got)
	}
	if got := lines(out, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{", `pod="p"`); !strings.HasSuffix(got[0], "} 0.7") {
		t.Fatalf("got %v", got)
	}
}

func TestAPodKeepsItsGPUsWhileAnOlderOneEnds(t *testing.T) {
	e := NewExporter(t.Logf)
	nodes := []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "8"})}
	first := pod("first", "h100-0", t0, "nvidia.com/gpu", 2)
	second := pod("second", "h100-0", t0.Add(time.Second), "nvidia.com/gpu", 2)
	before := lines(scrape(t, e, nodes, []*corev1.Pod{first, second}, t0), "DCGM_FI_DEV_GPU_UTIL{", `pod="second"`)
	first.Status.Phase = corev1.PodSucceeded
	after := lines(scrape(t, e, nodes, []*corev1.Pod{first, second}, t0), "DCGM_FI_DEV_GPU_UTIL{", `pod="second"`)
	if strings.Join(before, "\n") != strings.Join(after, "\n") || !strings.Contains(before[0], `gpu="2"`) {
		t.Fatalf("second moved: %v -> %v", before, after)
	}
	if got := lines(scrape(t, e, nodes, []*corev1.Pod{first, second}, t0), `pod="first"`); len(got) != 0 {
		t.Fatalf("a finished pod holds no GPU: %v", got)
	}
}

func TestMIGInstancesAreSeriesOfTheirOwnWithEngineActivityNotUtil(t *testing.T) {
	mig := node("mig-0", map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
		map[string]string{"nvidia.com/mig-1g.10gb": "14"})
	out := scrape(t, NewExporter(t.Logf), []*corev1.Node{mig},
		[]*corev1.Pod{pod("m", "mig-0", t0, "nvidia.com/mig-1g.10gb", 1, "GPU_SIM_UTIL", "40")}, t0)
	engines := lines(out, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{")
	if len(engines) != 14 {
		t.Fatalf("want 14 MIG instances, got %d", len(engines))
	}
	mine := lines(out, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{", `pod="m"`)
	if len(mine) != 1 || !strings.Contains(mine[0], `GPU_I_PROFILE="1g.10gb",GPU_I_ID="1"`) || !strings.HasSuffix(mine[0], "} 0.4") {
		t.Fatalf("got %v", mine)
	}
	if got := lines(out, "DCGM_FI_DEV_GPU_UTIL{"); len(got) != 0 {
		t.Fatalf("MIG instances have no GPU_UTIL: %v", got)
	}
	if got := lines(out, `gpu="1"`, "GR_ENGINE"); len(got) != 7 {
		t.Fatalf("two A100s of 7 instances each: %d on the second", len(got))
	}
}

func TestATimeSlicedGPUReportsItsHoldersTogetherUnderOneOfThem(t *testing.T) {
	ts := node("ts-0", map[string]string{"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.replicas": "4",
		"nvidia.com/gpu.count": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}, map[string]string{"nvidia.com/gpu": "16"})
	pods := []*corev1.Pod{pod("a", "ts-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", "30"),
		pod("b", "ts-0", t0.Add(time.Second), "nvidia.com/gpu", 1, "GPU_SIM_UTIL", "50")}
	out := scrape(t, NewExporter(t.Logf), []*corev1.Node{ts}, pods, t0)
	util := lines(out, "DCGM_FI_DEV_GPU_UTIL{")
	if len(util) != 4 {
		t.Fatalf("one series per physical GPU, got %d", len(util))
	}
	if !strings.Contains(util[0], `pod="b"`) || !strings.HasSuffix(util[0], "} 80") || !strings.Contains(util[0], `modelName="Tesla T4"`) {
		t.Fatalf("got %s", util[0])
	}
}

func TestBadEnvFallsBackToTheDefault(t *testing.T) {
	out := scrape(t, NewExporter(t.Logf), []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "1"})},
		[]*corev1.Pod{pod("p", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", "busy")}, t0)
	if got := lines(out, "DCGM_FI_DEV_GPU_UTIL{", `pod="p"`); !strings.HasSuffix(got[0], "} 70") {
		t.Fatalf("got %v", got)
	}
}

func TestAGangsRanksReportTheirOwnProfile(t *testing.T) {
	// One env for the whole gang (a Volcano Job's tasks share their template): rank 0 busy,
	// the others idle. RANK is what Volcano's pytorch plugin gives each pod.
	e := NewExporter(t.Logf)
	nodes := []*corev1.Node{node("h100-0", h100, map[string]string{"nvidia.com/gpu": "8"})}
	profile := "rank0=90;*=1"
	pods := []*corev1.Pod{
		pod("gang-master-0", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", profile, "RANK", "0"),
		pod("gang-worker-0", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", profile, "RANK", "1"),
		pod("gang-worker-1", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", profile, "RANK", "2"),
		pod("indexed-0-abcde", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", profile),
		pod("indexed-1-fghij", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", profile),
		pod("no-rank", "h100-0", t0, "nvidia.com/gpu", 1, "GPU_SIM_UTIL", "rank0=90"),
	}
	pods[3].Annotations = map[string]string{IndexAnnotation: "0"}
	pods[4].Annotations = map[string]string{IndexAnnotation: "1"}
	out := scrape(t, e, nodes, pods, t0.Add(time.Minute))
	for name, want := range map[string]string{"gang-master-0": "} 90", "gang-worker-0": "} 1", "gang-worker-1": "} 1",
		"indexed-0-abcde": "} 90", "indexed-1-fghij": "} 1", "no-rank": "} 70"} {
		got := lines(out, "DCGM_FI_DEV_GPU_UTIL{", `pod="`+name+`"`)
		if len(got) != 1 || !strings.HasSuffix(got[0], want) {
			t.Errorf("%s: got %v, want %q", name, got, want)
		}
	}
	if got := lines(out, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{", `pod="gang-worker-1"`); !strings.HasSuffix(got[0], "} 0.01") {
		t.Errorf("the engine's activity follows: %v", got)
	}
}
