{{/* Names, labels and shared fragments of the kpssh chart. */}}

{{- define "kpssh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: also the leader-election Lease, so two releases never share one. */}}
{{- define "kpssh.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kpssh.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kpssh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kpssh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kpssh.labels" -}}
helm.sh/chart: {{ include "kpssh.chart" . }}
{{ include "kpssh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kpssh
{{- end }}

{{- define "kpssh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kpssh.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The pool namespace: where SSHHosts and their key Secrets live. */}}
{{- define "kpssh.poolNamespace" -}}
{{- default .Release.Namespace .Values.poolNamespace }}
{{- end }}

{{/* The leader-election Lease name. */}}
{{- define "kpssh.leaseName" -}}
{{- include "kpssh.fullname" . }}
{{- end }}

{{- define "kpssh.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
CRD documents of one API group from files/crds (a symbolic link to deploy/crds, the single
source of truth), re-emitted with the chart's labels and helm.sh/resource-policy: keep (an
uninstall must never delete a CRD: that would delete every SSHHost, NodePool and NodeClaim). A
file may hold several documents separated by "---"; selecting by spec.group instead of by file
name keeps the chart independent of how the files are named.
Argument: (list $ "<group>").
*/}}
{{- define "kpssh.crdsOfGroup" -}}
{{- $root := index . 0 }}
{{- $group := index . 1 }}
{{- range $path, $_ := $root.Files.Glob "files/crds/*.yaml" }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get $path) -1 }}
{{- $obj := fromYaml $doc }}
{{- if and $obj (eq (default "" $obj.kind) "CustomResourceDefinition") (eq (dig "spec" "group" "" $obj) $group) }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (default dict $meta.labels) (fromYaml (include "kpssh.labels" $root))) }}
{{- $_ := set $meta "annotations" (merge (default dict $meta.annotations) (dict "helm.sh/resource-policy" "keep")) }}
---
# Source: deploy/crds/{{ base $path }}
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Whether this release renders the karpenter.sh CRDs: "install" or a reason to skip them.
crds.karpenter=auto installs them only when no karpenter.sh CRD exists, or when every one that
exists belongs to this release (so helm upgrade keeps upgrading its own copy). lookup returns
nothing under helm template and a client-side dry run, so those render them.
*/}}
{{- define "kpssh.karpenterCRDDecision" -}}
{{- $mode := .Values.crds.karpenter }}
{{- if eq $mode "always" }}install
{{- else if eq $mode "never" }}skip: crds.karpenter=never
{{- else }}
{{- $foreign := list }}
{{- range $name := list "nodepools.karpenter.sh" "nodeclaims.karpenter.sh" "nodeoverlays.karpenter.sh" }}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name }}
{{- if $crd }}
{{- $ann := default dict $crd.metadata.annotations }}
{{- if not (and (eq (get $ann "meta.helm.sh/release-name") $.Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") $.Release.Namespace)) }}
{{- $foreign = append $foreign $name }}
{{- end }}
{{- end }}
{{- end }}
{{- if $foreign }}skip: owned by someone else ({{ join ", " $foreign }})
{{- else }}install
{{- end }}
{{- end }}
{{- end }}
