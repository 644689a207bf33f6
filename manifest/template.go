package manifest

// podTemplate is the shadow pod. Every string from the options goes through
// q (a double-quoted scalar); names, ports and CIDRs are validated first.
// The sub-templates keep the two variants (plain and native sidecar) from
// repeating the container.
const podTemplate = `
{{- define "securityContext"}}
          securityContext:
            runAsNonRoot: true
            runAsUser: {{.Runs}}
            runAsGroup: {{.Runs}}
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            privileged: false
            capabilities:
              drop:
                - "ALL"
            seccompProfile:
              type: "RuntimeDefault"
{{- end}}

{{- define "probe"}}
            httpGet:
              path: {{q .}}
              port: "mesh"
{{- end}}

{{- define "sidecar"}}
          image: {{q .Image}}
          imagePullPolicy: "IfNotPresent"
          args:
{{- range .Args}}
            - {{q .}}
{{- end}}
          env:
            # The pod IP, which the job takes.
            - name: "POD_IP"
              valueFrom:
                fieldRef:
                  fieldPath: "status.podIP"
            # Below the memory limit, so the Go runtime collects before the kernel kills.
            - name: "GOMEMLIMIT"
              value: {{q .GoMemLimit}}
          ports:
            - name: "mesh"
              containerPort: {{.MeshPort}}
              protocol: "TCP"
{{- range .Exposed}}
            - name: {{q .Name}}
              containerPort: {{.Num}}
              protocol: {{q .Protocol}}
{{- end}}
{{- if .NativeSidecar}}
          # Main containers start once the mesh is up.
          startupProbe:
{{- template "probe" "/readyz"}}
            periodSeconds: 1
            failureThreshold: 60
{{- end}}
          readinessProbe:
{{- template "probe" "/readyz"}}
            periodSeconds: 5
            failureThreshold: 2
          livenessProbe:
{{- template "probe" "/healthz"}}
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            requests:
              cpu: "50m"
              memory: "32Mi"
            limits:
              memory: "256Mi"
{{- template "securityContext" .}}
          volumeMounts:
            - name: "token"
              mountPath: {{q .TokenDir}}
              readOnly: true
{{- end -}}

# meshlaunch shadow pod {{q .Name}} in namespace {{q .Namespace}}: a Secret, a
# Deployment, a Service and an Ingress (docs/kubernetes.md explains each).
#
# The Secret holds the shared secret, and the job on the remote node needs
# the same one. After kubectl apply, copy it to the job's user there:
#   kubectl -n {{.Namespace}} get secret {{.SecretName}} -o jsonpath='{.data.{{.TokenKey}}}' | base64 -d > {{.Name}}.token
#   chmod 600 {{.Name}}.token
# and start the job with:
#   meshlaunch run --server {{.ServerURL}} --token-file {{.Name}}.token -- CMD ARGS...
# Whoever holds the secret can join this pod's network: keep it like a password.
{{- if not .TLSSecretName}}
#
# No TLS is configured here (--tls-secret, --cluster-issuer), so the
# websocket's credential would cross the network in clear text; use TLS, or
# wss:// if the Ingress controller's default certificate covers this host.
{{- end}}
{{- if .Placeholder}}
#
# This is an example: its secret is a placeholder that the sidecar refuses
# (shorter than 16 bytes). Render your own with meshlaunch manifest, or
# replace the placeholder with the output of meshlaunch token.
{{- end}}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{q .SecretName}}
  namespace: {{q .Namespace}}
  labels:
{{.Labels 4}}
type: Opaque
stringData:
  {{.TokenKey}}: {{q .Token}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
{{.Labels 4}}
spec:
  # One shadow pod. On an update the replacement is ready before the old
  # pod drains; launchers reconnect to it through the Service.
  replicas: 1
  strategy:
    type: "RollingUpdate"
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  selector:
    matchLabels:
{{.Selector 6}}
  template:
    metadata:
      labels:
{{.Labels 8}}
      annotations:
        kubectl.kubernetes.io/default-container: "meshlaunch"
    spec:
      # The sidecar never talks to the API server.
      automountServiceAccountToken: false
      # Service links would put MESHLAUNCH_SERVICE_* variables, which look
      # like sidecar configuration, into the environment of a pod whose
      # namespace has a Service named meshlaunch.
      enableServiceLinks: false
      # Above the sidecar's --shutdown-grace, so flows drain before SIGKILL.
      terminationGracePeriodSeconds: {{.Termination}}
      securityContext:
        runAsNonRoot: true
        runAsUser: {{.Runs}}
        runAsGroup: {{.Runs}}
        # Lets the non-root sidecar read the token (mode 0440, group {{.Runs}}).
        fsGroup: {{.Runs}}
        seccompProfile:
          type: "RuntimeDefault"
{{- if .LowPort}}
        # A port below 1024 is bound without NET_BIND_SERVICE: this sysctl
        # is namespaced to the pod and on Kubernetes' list of safe sysctls.
        sysctls:
          - name: "net.ipv4.ip_unprivileged_port_start"
            value: "0"
{{- end}}
{{- if .NativeSidecar}}
      initContainers:
        # A native sidecar (Kubernetes 1.29+): started before and stopped
        # after the main containers.
        - name: "meshlaunch"
          restartPolicy: "Always"
{{- template "sidecar" .}}
      containers:
        # A pod needs a main container; the meshlaunch image has nothing but
        # meshlaunch, so this one is pause, the image of every pod sandbox.
        - name: "pause"
          image: {{q .PauseImage}}
          imagePullPolicy: "IfNotPresent"
          resources:
            requests:
              cpu: "1m"
              memory: "4Mi"
            limits:
              memory: "16Mi"
{{- template "securityContext" .}}
{{- else}}
      containers:
        - name: "meshlaunch"
{{- template "sidecar" .}}
{{- end}}
      volumes:
        - name: "token"
          secret:
            secretName: {{q .SecretName}}
            defaultMode: 288 # 0440
            items:
              - key: {{q .TokenKey}}
                path: {{q .TokenKey}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
{{.Labels 4}}
spec:
  type: "ClusterIP"
  selector:
{{.Selector 4}}
  ports:
    - name: "mesh"
      port: {{.MeshPort}}
      targetPort: "mesh"
      protocol: "TCP"
{{- range .Exposed}}
    - name: {{q .Name}}
      port: {{.Num}}
      targetPort: {{q .Name}}
      protocol: {{q .Protocol}}
{{- end}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
{{.Labels 4}}
  annotations:
    # The tunnel is one long-lived websocket: nginx's default 60 s timeouts
    # would cut it.
    nginx.ingress.kubernetes.io/proxy-read-timeout: {{q .WSTimeout}}
    nginx.ingress.kubernetes.io/proxy-send-timeout: {{q .WSTimeout}}
    # Websocket upgrades need HTTP/1.1 to the sidecar, which serves plain HTTP.
    nginx.ingress.kubernetes.io/proxy-http-version: "1.1"
    nginx.ingress.kubernetes.io/backend-protocol: "HTTP"
    # nginx copies an upgraded connection through buffers of this size
    # (default 4k): 64k lets a 64 KiB websocket message through in one
    # read and one write instead of sixteen (docs/benchmarks.md).
    nginx.ingress.kubernetes.io/proxy-buffer-size: "64k"
{{- if .ClusterIssuer}}
    cert-manager.io/cluster-issuer: {{q .ClusterIssuer}}
{{- end}}
spec:
  ingressClassName: "nginx"
{{- if .TLSSecretName}}
  tls:
    - hosts:
        - {{q .Host}}
      secretName: {{q .TLSSecretName}}
{{- end}}
  rules:
    - host: {{q .Host}}
      http:
        paths:
          - path: {{q .PathPrefix}}
            pathType: "Prefix"
            backend:
              service:
                name: {{q .Name}}
                port:
                  name: "mesh"
`
