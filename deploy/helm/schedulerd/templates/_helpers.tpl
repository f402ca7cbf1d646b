{{/* Chart name, shortened to the DNS label limit. */}}
{{- define "schedulerd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, or fullnameOverride. The headless Service
appends "-headless", so the name leaves room for it. */}}
{{- define "schedulerd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 54 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "schedulerd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "schedulerd.labels" -}}
helm.sh/chart: {{ include "schedulerd.chart" . }}
{{ include "schedulerd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "schedulerd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "schedulerd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "schedulerd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "schedulerd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "schedulerd.headlessName" -}}
{{- printf "%s-headless" (include "schedulerd.fullname" .) }}
{{- end }}

{{/* The Secret the pods read: the existing one, or the one the chart creates. */}}
{{- define "schedulerd.secretName" -}}
{{- default (include "schedulerd.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* Whether the pods read key k (mongoUri, adminKey, signingSecret) from the
Secret: always from an existing Secret with store=mongo, else when it has a value. */}}
{{- define "schedulerd.hasSecret" -}}
{{- $v := .root.Values -}}
{{- if $v.secrets.existingSecret -}}
{{- if or (eq $v.store "mongo") (ne .key "mongoUri") }}true{{ end -}}
{{- else if index $v.secrets .key -}}
{{- if or (eq $v.store "mongo") (ne .key "mongoUri") }}true{{ end -}}
{{- end -}}
{{- end }}

{{/* Number of pods; fails on settings that cannot work. */}}
{{- define "schedulerd.replicas" -}}
{{- $v := .Values -}}
{{- $n := $v.replicaCount -}}
{{- if kindIs "invalid" $n -}}
{{- $n = ternary 2 1 (eq $v.store "mongo") -}}
{{- end -}}
{{- $n = int $n -}}
{{- if lt $n 1 -}}
{{- fail (printf "replicaCount: %d must be at least 1" $n) -}}
{{- end -}}
{{- if and (eq $v.store "embedded") (gt $n 1) -}}
{{- fail (printf "replicaCount: %d with store=embedded; the embedded store runs exactly one pod (its data directory is locked by one process): set replicaCount=1 or store=mongo" $n) -}}
{{- end -}}
{{- $n -}}
{{- end }}

{{/* Checks values that cannot work; the message names the value. */}}
{{- define "schedulerd.validate" -}}
{{- $v := .Values -}}
{{- if not (has $v.store (list "embedded" "mongo")) -}}
{{- fail (printf "store: %q must be embedded or mongo" $v.store) -}}
{{- end -}}
{{- if and (eq $v.store "mongo") (not $v.secrets.existingSecret) -}}
{{- range $key := list "mongoUri" "adminKey" "signingSecret" -}}
{{- if not (index $v.secrets $key) -}}
{{- fail (printf "secrets.%s: required with store=mongo (or name a Secret holding it in secrets.existingSecret)" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $name := list "SCHEDULER_MONGO_URI" "SCHEDULER_ADMIN_KEY" "SCHEDULER_SIGNING_SECRET" -}}
{{- if hasKey $v.env $name -}}
{{- fail (printf "env.%s: secrets go in secrets.* or secrets.existingSecret, never in env" $name) -}}
{{- end -}}
{{- end -}}
{{- range $name := list "SCHEDULER_STORE" "SCHEDULER_LISTEN_ADDR" "SCHEDULER_DATA_DIR" "SCHEDULER_ADVERTISE_URL" "SCHEDULER_SHUTDOWN_TIMEOUT" "SCHEDULER_PUBLIC_URL" "SCHEDULER_MONGO_DATABASE" "SCHEDULER_INSTANCE_ID" -}}
{{- if hasKey $v.env $name -}}
{{- fail (printf "env.%s: set by the chart; use its value (see README.md)" $name) -}}
{{- end -}}
{{- end -}}
{{- if lt (int $v.shutdownTimeoutSeconds) 1 -}}
{{- fail (printf "shutdownTimeoutSeconds: %v must be at least 1" $v.shutdownTimeoutSeconds) -}}
{{- end -}}
{{- if lt (int $v.preStopSleepSeconds) 0 -}}
{{- fail (printf "preStopSleepSeconds: %v must not be negative" $v.preStopSleepSeconds) -}}
{{- end -}}
{{- end }}

{{/* Pod grace period: preStop wait, then -shutdown-timeout, plus 5s for the process to exit. */}}
{{- define "schedulerd.terminationGracePeriodSeconds" -}}
{{- add (int .Values.preStopSleepSeconds) (int .Values.shutdownTimeoutSeconds) 5 -}}
{{- end }}

{{- define "schedulerd.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else -}}
{{- printf "http://%s.%s.svc.%s:%d" (include "schedulerd.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.service.port) -}}
{{- end -}}
{{- end }}
