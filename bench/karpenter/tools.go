//go:build tools

// Package benchkarpenter pins Karpenter's scheduling package and what its
// test_performance benchmarks import, so that `go mod tidy` keeps the test
// dependencies of a package outside this module. Test tooling only: nothing
// here is built into kpssh.
package benchkarpenter

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "sigs.k8s.io/controller-runtime/pkg/client/fake"
	_ "sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	_ "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	_ "sigs.k8s.io/karpenter/pkg/test"
	_ "sigs.k8s.io/karpenter/pkg/test/expectations"
)
