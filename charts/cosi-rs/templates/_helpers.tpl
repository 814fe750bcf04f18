{{/* The image reference of a cosi-rs binary: [imageRegistry/]cosi-rs/<name>:<tag>. */}}
{{- define "cosi.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $tag := default $root.Chart.AppVersion $root.Values.imageTag -}}
{{- if $root.Values.imageRegistry -}}
{{- printf "%s/cosi-rs/%s:%s" (trimSuffix "/" $root.Values.imageRegistry) $name $tag -}}
{{- else -}}
{{- printf "cosi-rs/%s:%s" $name $tag -}}
{{- end -}}
{{- end -}}

{{/* Labels of a component. */}}
{{- define "cosi.labels" -}}
app.kubernetes.io/name: {{ . }}
app.kubernetes.io/part-of: cosi
{{- end -}}

{{/* Pod security context shared by every Pod. */}}
{{- define "cosi.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container security context shared by every container. */}}
{{- define "cosi.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The liveness probe of a driver that listens only on its socket: the
sidecar in the Pod calls DriverGetInfo on each probe (port 8081 by number:
kubelet looks port names up in the probed container only). */}}
{{- define "cosi.driverLivenessProbe" -}}
httpGet:
  path: /healthz/driver
  port: 8081
initialDelaySeconds: 10
periodSeconds: 20
timeoutSeconds: 10
failureThreshold: 3
{{- end -}}

{{/* The sidecar container of a driver Pod. */}}
{{- define "cosi.sidecar" -}}
- name: sidecar
  image: {{ include "cosi.image" (list . "cosi-sidecar") }}
  imagePullPolicy: {{ .Values.imagePullPolicy }}
  args:
    - --leader-election
    - --log-format=json
  env:
    - name: COSI_ENDPOINT
      value: unix:///var/lib/cosi/cosi.sock
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  ports:
    - name: metrics
      containerPort: 8080
      protocol: TCP
    - name: health
      containerPort: 8081
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: health
    periodSeconds: 20
  readinessProbe:
    httpGet:
      path: /readyz
      port: health
    periodSeconds: 10
  resources:
    {{- toYaml .Values.sidecar.resources | nindent 4 }}
  volumeMounts:
    - name: socket
      mountPath: /var/lib/cosi
  securityContext:
    {{- include "cosi.containerSecurityContext" . | nindent 4 }}
{{- end -}}

{{/* A driver's BucketClass and BucketAccessClass: (list driverName bucketClass bucketAccessClass). */}}
{{- define "cosi.classes" -}}
{{- $driver := index . 0 -}}
{{- $bc := index . 1 -}}
{{- $bac := index . 2 }}
---
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketClass
metadata:
  name: {{ $bc.name }}
spec:
  driverName: {{ $driver }}
  deletionPolicy: {{ $bc.deletionPolicy }}
  parameters:
    {{- toYaml $bc.parameters | nindent 4 }}
---
apiVersion: objectstorage.k8s.io/v1alpha2
kind: BucketAccessClass
metadata:
  name: {{ $bac.name }}
  {{- with $bac.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  driverName: {{ $driver }}
  authenticationType: Key
  multiBucketAccess: {{ $bac.multiBucketAccess }}
  parameters:
    {{- toYaml $bac.parameters | nindent 4 }}
{{- end -}}

{{/* The leader-election Lease of a driver's sidecars: cosi-sidecar-<driver name with dots as dashes>, as the sidecar names it. */}}
{{- define "cosi.sidecarLease" -}}
cosi-sidecar-{{ . | lower | replace "." "-" }}
{{- end -}}

{{/*
A driver sidecar's identity: (list $ name driverName). Its own ServiceAccount
<name> bound to the shared cosi-sidecar ClusterRole, its Lease, and a Role
allowing get and patch on that Lease alone. No sidecar may create Leases:
RBAC cannot limit a create to one name (a create request names no object),
so a sidecar allowed to create could take the controller's or another
driver's Lease; the Lease is shipped instead.
*/}}
{{- define "cosi.driverIdentity" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $lease := include "cosi.sidecarLease" (index . 2) }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "cosi.labels" $name | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "cosi.labels" $name | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cosi-sidecar
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: {{ $lease }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "cosi.labels" $name | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "cosi.labels" $name | nindent 4 }}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: [{{ $lease | quote }}]
    verbs: ["get", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "cosi.labels" $name | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
{{- end -}}
