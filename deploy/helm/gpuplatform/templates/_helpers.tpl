{{/* nameOverride replaces the chart's name (the app.kubernetes.io/name label, and the full name
     below); fullnameOverride the whole prefix of every object's name. 50 characters leave room
     for the longest suffix a Service or Deployment takes ("-webhooks-metrics" is truncated). */}}
{{- define "gpuplatform.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuplatform.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else -}}
{{- $name := include "gpuplatform.name" . -}}
{{- if contains $name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuplatform.labels" -}}
app.kubernetes.io/name: {{ include "gpuplatform.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuplatform.selector" -}}
app.kubernetes.io/name: {{ include "gpuplatform.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpuplatform.serviceAccountName" -}}
{{- default (include "gpuplatform.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The web pods' own identity (templates/rbac.yaml: reads only). */}}
{{- define "gpuplatform.webServiceAccountName" -}}
{{- default (printf "%s-web" (include "gpuplatform.fullname" .)) .Values.serviceAccount.webName -}}
{{- end -}}

{{- define "gpuplatform.secretName" -}}
{{- default (printf "%s-secrets" (include "gpuplatform.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "gpuplatform.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The restricted Pod Security profile, for every pod and container of the chart. */}}
{{- define "gpuplatform.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "gpuplatform.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* Settings from the ConfigMap and the Secret, the same for every process. */}}
{{- define "gpuplatform.envFrom" -}}
- configMapRef: {name: {{ include "gpuplatform.fullname" . }}-config}
- secretRef: {name: {{ include "gpuplatform.secretName" . }}}
{{- with .Values.prometheus.credentialsSecret }}
- secretRef: {name: {{ . }}}   # PROMETHEUS_TOKEN, or PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD
{{- end }}
{{- with .Values.secrets.oidcExistingSecret }}
- secretRef: {name: {{ . }}}   # OIDC_CLIENT_SECRET, from a Secret of its own (listed after the chart's: it wins)
{{- end }}
{{- end -}}

{{/* GPU telemetry (docs/telemetry.md): the Prometheus CA bundle, mounted where
     PROMETHEUS_CA_FILE points, in the processes that ask Prometheus (web, worker). */}}
{{- define "gpuplatform.prometheusCaFile" -}}
/etc/gpuplatform/prometheus-ca/{{ .Values.prometheus.caConfigMap.key }}
{{- end -}}
{{- define "gpuplatform.prometheusCaMount" -}}
{{- if .Values.prometheus.caConfigMap.name }}
- {name: prometheus-ca, mountPath: /etc/gpuplatform/prometheus-ca, readOnly: true}
{{- end }}
{{- end -}}
{{- define "gpuplatform.prometheusCaVolume" -}}
{{- with .Values.prometheus.caConfigMap }}{{ if .name }}
- name: prometheus-ca
  configMap: {name: {{ .name }}, items: [{key: {{ .key }}, path: {{ .key }}}]}
{{- end }}{{ end }}
{{- end -}}

{{/* A component's pod: its labels (selector first, then the component's podLabels, then the
     chart-wide ones), annotations likewise, and placement. Called with (dict "root" . "component"
     "web"); the component's own value wins where it sets one (maps merge key by key; lists,
     affinity and priorityClassName are replaced whole), else the chart-wide value applies. */}}
{{- define "gpuplatform.podMetadata" -}}
{{- $values := .root.Values }}{{ $own := index $values .component }}
{{- $selector := include "gpuplatform.selector" . | fromYaml -}}
labels: {{- merge (dict) $selector ($own.podLabels | default dict) $values.podLabels | toYaml | nindent 2 }}
annotations: {{- merge (dict "checksum/values" (toJson $values | sha256sum | trunc 16)) ($own.podAnnotations | default dict) $values.podAnnotations | toYaml | nindent 2 }}
{{- end -}}

{{- define "gpuplatform.podSpecCommon" -}}
{{- $values := .root.Values }}{{ $own := index $values .component }}
{{- with $values.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $own.priorityClassName | default $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with merge (dict) ($own.nodeSelector | default dict) $values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $own.tolerations | default $values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $own.affinity | default $values.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with $own.topologySpreadConstraints | default $values.topologySpreadConstraints }}
{{- /* A constraint without a labelSelector spreads this component's pods (the chart-wide
       ones cannot name a component). */}}
{{- $selector := dict "matchLabels" (include "gpuplatform.selector" $ | fromYaml) }}
topologySpreadConstraints:
{{- range . }}
  - {{ toYaml (hasKey . "labelSelector" | ternary . (merge (dict "labelSelector" $selector) .)) | nindent 4 | trim }}
{{- end }}
{{- end }}
securityContext: {{ include "gpuplatform.podSecurityContext" . | nindent 2 }}
{{- end -}}

{{/* A component's PodDisruptionBudget, when it runs more than one replica (one pod alone has
     nothing to keep available): minAvailable if its podDisruptionBudget sets it (not null),
     else maxUnavailable (default 1). Called like podMetadata. */}}
{{- define "gpuplatform.podDisruptionBudget" -}}
{{- $own := index .root.Values .component }}
{{- if gt (int $own.replicas) 1 }}
{{- $budget := $own.podDisruptionBudget | default dict }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "gpuplatform.fullname" .root }}-{{ .component }}
  labels: {{- include "gpuplatform.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if not (kindIs "invalid" $budget.minAvailable) }}{{/* set, and not null */}}
  minAvailable: {{ $budget.minAvailable | toJson }}
  {{- else }}
  maxUnavailable: {{ $budget.maxUnavailable | default 1 | toJson }}
  {{- end }}
  selector:
    matchLabels: {{- include "gpuplatform.selector" . | nindent 6 }}
{{- end }}
{{- end -}}
