// Command hollow-node runs one kubemark hollow kubelet (the real kubelet code
// over a fake container runtime) for the kpssh test lab. Unlike the stock
// kubemark binary it lets each node report its own CPU count, memory size,
// architecture, provider ID and node IP, so that lab hosts of different
// sizes can be simulated.
//
// Test tooling only; never shipped.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/version"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
	utilflag "k8s.io/kubernetes/pkg/util/flag"
)

// sizedMachine is the fake cAdvisor with a configurable machine size.
type sizedMachine struct {
	cadvisortest.Fake
	cores    int
	memBytes uint64
}

var _ cadvisor.Interface = (*sizedMachine)(nil)

func (m *sizedMachine) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	return &cadvisorapi.MachineInfo{
		NumCores:       m.cores,
		MemoryCapacity: m.memBytes,
		InstanceID:     cadvisorapi.InstanceID(m.NodeName),
	}, nil
}

type options struct {
	kubeconfig, bootstrapKubeconfig, certDir string
	name, nodeIP, providerID, rootDir, arch  string
	cpu, maxPods, port, healthzPort          int
	memMiB                                   int64
	labels                                   map[string]string
	taints                                   []v1.Taint
}

func main() {
	o := options{labels: map[string]string{}}
	fs := pflag.NewFlagSet("hollow-node", pflag.ExitOnError)
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig the kubelet uses (written by TLS bootstrap when --bootstrap-kubeconfig is set)")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "bootstrap-token kubeconfig for TLS bootstrap")
	fs.StringVar(&o.certDir, "cert-dir", "/var/lib/kubelet/pki", "directory for the client certificate")
	fs.StringVar(&o.name, "name", "", "node name (default: hostname)")
	fs.StringVar(&o.nodeIP, "node-ip", "", "node IP reported in status")
	fs.StringVar(&o.providerID, "provider-id", "", "spec.providerID (default kubemark://<name>)")
	fs.StringVar(&o.rootDir, "root-dir", "", "kubelet root directory (default: a fresh temporary directory)")
	fs.StringVar(&o.arch, "arch", "", "architecture label at registration (amd64, arm64); NOTE: the kubelet resets kubernetes.io/arch to the binary's GOARCH on its next status update")
	fs.IntVar(&o.cpu, "cpu", 1, "CPU cores the node reports")
	fs.Int64Var(&o.memMiB, "memory-mib", 3840, "memory the node reports, MiB")
	fs.IntVar(&o.maxPods, "max-pods", 110, "pod capacity")
	fs.IntVar(&o.port, "kubelet-port", 10250, "kubelet API port")
	fs.IntVar(&o.healthzPort, "healthz-port", 10248, "kubelet healthz port (0 disables)")
	labels := cliflag.ConfigurationMap(o.labels)
	fs.Var(&labels, "node-labels", "labels to register the node with (k=v,...)")
	fs.Var(utilflag.RegisterWithTaintsVar{Value: &o.taints}, "register-with-taints", "taints to register the node with (k=v:Effect,...)")
	version := fs.Bool("version", false, "print the version and exit")
	_ = fs.Parse(os.Args[1:])
	if *version {
		fmt.Println("hollow-node", versionString())
		return
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "hollow-node failed")
		klog.Flush()
		os.Exit(1)
	}
}

func versionString() string { return version.Get().GitVersion }

func run(o options) error {
	if o.name == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		o.name = h
	}
	if o.kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	if o.cpu < 1 || o.memMiB < 64 {
		return fmt.Errorf("implausible size: --cpu=%d --memory-mib=%d", o.cpu, o.memMiB)
	}
	klog.InfoS("starting hollow kubelet", "version", versionString(), "node", o.name, "cpu", o.cpu, "memoryMiB", o.memMiB)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	if o.bootstrapKubeconfig != "" {
		if err := os.MkdirAll(o.certDir, 0o700); err != nil {
			return err
		}
		if err := bootstrap.LoadClientCert(ctx, o.kubeconfig, o.bootstrapKubeconfig, o.certDir, types.NodeName(o.name)); err != nil {
			return fmt.Errorf("TLS bootstrap: %w", err)
		}
	}
	raw, err := clientcmd.LoadFromFile(o.kubeconfig)
	if err != nil {
		return err
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return err
	}
	restCfg.UserAgent = "hollow-kubelet"
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := clientset.NewForConfig(restCfg)
	if err != nil {
		return err
	}

	if o.arch != "" {
		o.labels["kubernetes.io/arch"] = o.arch
		o.labels["beta.kubernetes.io/arch"] = o.arch
	}
	flags, cfg := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName:            o.name,
		KubeletPort:         o.port,
		KubeletReadOnlyPort: 0,
		MaxPods:             o.maxPods,
		NodeLabels:          o.labels,
		RegisterWithTaints:  o.taints,
	})
	if o.rootDir != "" {
		if err := os.MkdirAll(o.rootDir, 0o750); err != nil {
			return err
		}
		flags.RootDirectory = o.rootDir
		cfg.StaticPodPath = filepath.Join(o.rootDir, "static-pods")
		cfg.PodLogsDir = filepath.Join(o.rootDir, "pod-logs")
		for _, d := range []string{cfg.StaticPodPath, cfg.PodLogsDir} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				return err
			}
		}
	}
	flags.NodeIP = o.nodeIP
	if o.providerID != "" {
		cfg.ProviderID = o.providerID
	}
	cfg.HealthzPort = int32(o.healthzPort)

	hb := *restCfg
	hb.Timeout = cfg.NodeStatusUpdateFrequency.Duration
	if lease := time.Duration(cfg.NodeLeaseDurationSeconds) * time.Second; hb.Timeout > lease {
		hb.Timeout = lease
	}
	hb.QPS = -1
	hbClient, err := clientset.NewForConfig(&hb)
	if err != nil {
		return err
	}

	endpoint, err := fakeremote.GenerateEndpoint()
	if err != nil {
		return err
	}
	rt := fakeremote.NewFakeRemoteRuntime()
	if err := rt.Start(endpoint); err != nil {
		return fmt.Errorf("fake runtime: %w", err)
	}
	defer rt.Stop()
	runtimeSvc, err := remote.NewRemoteRuntimeService(ctx, endpoint, 15*time.Second, noop.NewTracerProvider(), false)
	if err != nil {
		return fmt.Errorf("runtime client: %w", err)
	}

	machine := &sizedMachine{Fake: cadvisortest.Fake{NodeName: o.name}, cores: o.cpu, memBytes: uint64(o.memMiB) << 20}
	hk := kubemark.NewHollowKubelet(flags, cfg, client, hbClient, machine, rt.ImageService, runtimeSvc, cm.NewStubContainerManager())
	go hk.Run(ctx)
	<-ctx.Done()
	klog.InfoS("hollow kubelet stopping on signal", "node", o.name)
	klog.Flush()
	return nil
}
