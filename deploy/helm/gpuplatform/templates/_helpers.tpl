{{- define "gpuplatform.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "gpuplatform.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuplatform.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
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

{{- define "gpuplatform.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
securityContext: {{ include "gpuplatform.podSecurityContext" . | nindent 2 }}
{{- end -}}
