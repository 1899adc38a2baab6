// gpu-exporter serves, for the local cluster's fake GPU nodes (kwok), what NVIDIA's
// dcgm-exporter serves for real ones: DCGM_FI_* gauges per GPU (or MIG instance), labelled
// gpu, UUID, device, modelName, Hostname and, for a GPU given to a pod, namespace, pod and
// container. What a pod's GPUs report comes from its container's env: GPU_SIM_UTIL (a
// percent, or SECONDS:PERCENT,... from the pod's start) and GPU_SIM_MEM_MIB (MiB, likewise);
// without them a steady 70 % (and 70 % of the memory). A fixture of deploy/local-cluster
// (tests, demo, soak), never part of the platform: the platform reads only Prometheus.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster whose nodes and pods to read")
	listen := flag.String("listen", "127.0.0.1:19400", "address of /metrics")
	flag.Parse()
	logger := log.New(os.Stderr, "gpu-exporter ", log.LstdFlags)

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Fatalf("kubeconfig: %v", err)
	}
	config.UserAgent = "gpuplatform-gpu-exporter"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// One list and one watch each for nodes and pods; /metrics reads the caches.
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	pods := factory.Core().V1().Pods()
	nodeInformer, podInformer := nodes.Informer(), pods.Informer()
	factory.Start(ctx.Done())

	exporter := NewExporter(logger.Printf)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if !nodeInformer.HasSynced() || !podInformer.HasSynced() {
			http.Error(w, "not synced with the API server yet", http.StatusServiceUnavailable)
			return
		}
		nodeList, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		podList, err := pods.Lister().List(labels.Everything())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := exporter.Write(w, copies(nodeList), podList, time.Now()); err != nil {
			logger.Printf("writing /metrics: %v", err)
		}
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if !nodeInformer.HasSynced() || !podInformer.HasSynced() {
			http.Error(w, "syncing", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	server := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	go cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced, podInformer.HasSynced)
	logger.Printf("serving /metrics on http://%s", *listen)
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		logger.Fatalf("listen: %v", err)
	}
}

// copies: the lister's slice is shared with the cache; Write sorts it.
func copies(nodes []*corev1.Node) []*corev1.Node { return append([]*corev1.Node(nil), nodes...) }
