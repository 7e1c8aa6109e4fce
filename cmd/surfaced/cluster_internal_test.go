package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/membership"
)

// The providers the flags name are the ones the daemon builds; the
// Kubernetes provider is absent from a default build and says how to get it.
func TestClusterConfigProviders(t *testing.T) {
	f := &config.File{Cluster: config.ClusterSection{Provider: config.ProviderKubernetes, BindAddr: "0.0.0.0:7900"}}
	cc, err := clusterConfig(f, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if cc.Host != "0.0.0.0" || cc.Port != 7900 {
		t.Fatalf("bind: %s:%d", cc.Host, cc.Port)
	}
	if !membership.KubernetesBuilt {
		if _, err := cc.Provider(); err == nil || !strings.Contains(err.Error(), "-tags k8s") {
			t.Fatalf("k8s in a default build: %v", err)
		}
	}
	f.Cluster = config.ClusterSection{Provider: config.ProviderEtcd, EtcdEndpoints: []string{"127.0.0.1:1"}}
	cc, err = clusterConfig(f, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cc.Provider(); err != nil || p == nil {
		t.Fatalf("etcd provider: %v", err)
	}
	if cc, _ := clusterConfig(&config.File{}, slog.Default()); cc != nil {
		t.Fatalf("no provider is one node, got %+v", cc)
	}
}
