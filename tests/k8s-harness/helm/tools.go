//go:build tools

// Package helmharness pins the helm CLI for chart tests. It is a separate
// module because helm needs newer k8s.io libraries than the pinned
// Kubernetes release.
package helmharness

import _ "helm.sh/helm/v4/cmd/helm"
