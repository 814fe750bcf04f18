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
spec:
  driverName: {{ $driver }}
  authenticationType: Key
  multiBucketAccess: {{ $bac.multiBucketAccess }}
  parameters:
    {{- toYaml $bac.parameters | nindent 4 }}
{{- end -}}
