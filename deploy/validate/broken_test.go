package validate

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mutation of one file of deploy/: old is replaced by new (old must be there).
type mutation struct {
	file, old, new string
}

// The checks fail on a broken tree: each case breaks a copy of deploy/ one way and
// wants a problem that says so.
func TestBrokenDeployFails(t *testing.T) {
	const (
		replicas     = "deploy/kubernetes/replicas.yaml"
		single       = "deploy/kubernetes/single.yaml"
		envoyPods    = "deploy/kubernetes/envoy.yaml"
		envoyConfig  = "deploy/envoy/envoy.yaml"
		replicasConf = "deploy/agenticd-replicas.yaml"
	)
	tokenFromSecret := `            - name: AGENTICD_TOKEN
              valueFrom:
                secretKeyRef: {name: agenticd-token, key: token}
`
	databaseFromSecret := `            - name: AGENTICD_DATABASE
              valueFrom:
                secretKeyRef: {name: agenticd-database, key: dsn}
`
	cases := []struct {
		name      string
		mutations []mutation
		want      string
	}{
		{"misspelt field", []mutation{{replicas, "readinessProbe:", "readinesProbe:"}}, `unknown field "spec.template.spec.containers[0].readinesProbe"`},
		{"field in the wrong case", []mutation{{replicas, "periodSeconds: 5\n", "PeriodSeconds: 5\n"}}, `unknown field "spec.template.spec.containers[0].readinessProbe.PeriodSeconds"`},
		{"key twice", []mutation{{replicas, "  replicas: 3\n", "  replicas: 3\n  replicas: 2\n"}}, `"replicas" already set`},
		{"value of the wrong type", []mutation{{replicas, "  replicas: 3\n", "  replicas: three\n"}}, "cannot unmarshal string"},
		{"kind the validator does not know", []mutation{{replicas, "---\n# For clients", "---\napiVersion: v1\nkind: Secret\nmetadata: {name: x}\nstringData: {token: x}\n---\n# For clients"}}, `kind "Secret" is not one the validator knows`},
		{"token as a literal", []mutation{{replicas, tokenFromSecret, "            - {name: AGENTICD_TOKEN, value: 0123456789abcdef}\n"}}, "AGENTICD_TOKEN has a literal value"},
		{"token missing", []mutation{{single, tokenFromSecret, ""}}, "AGENTICD_TOKEN must come from a Secret"},
		{"database URL as a literal", []mutation{{replicas, databaseFromSecret, "            - {name: AGENTICD_DATABASE, value: 'postgres://u:p@db:5432/a'}\n"}}, "AGENTICD_DATABASE has a literal value"},
		{"replicas without Postgres", []mutation{{replicas, databaseFromSecret, ""}}, "SQLite cannot be shared"},
		{"workspaces not ReadWriteMany", []mutation{{replicas, "accessModes: [ReadWriteMany]", "accessModes: [ReadWriteOnce]"}}, "workspace root /workspaces must be on a ReadWriteMany claim"},
		{"selector not matching the pods", []mutation{{replicas, "    matchLabels: {app: agenticd}\n  template:", "    matchLabels: {app: agenticd-x}\n  template:"}}, "does not match the template's labels"},
		{"Service's targetPort on no container", []mutation{{replicas, "{name: grpc, containerPort: 50051}", "{name: grpc-x, containerPort: 50051}"}}, "Service agenticd: port grpc's targetPort grpc is no container port"},
		{"mount without a volume", []mutation{{replicas, "        - name: tmp\n          emptyDir: {}", "        - name: scratch\n          emptyDir: {}"}}, "mounts volume tmp, which the pod does not have"},
		{"latest without IfNotPresent", []mutation{{single, "          imagePullPolicy: IfNotPresent\n", ""}}, `image "agenticd:latest" is latest`},
		{"no liveness probe", []mutation{{single, "          livenessProbe:\n            grpc: {port: 50051}\n            periodSeconds: 20\n            failureThreshold: 3\n", ""}}, "container agenticd: no livenessProbe"},
		{"probe on another port", []mutation{{replicas, "          livenessProbe:\n            grpc: {port: 50051}", "          livenessProbe:\n            grpc: {port: 50052}"}}, "a probe checks port 50052"},
		{"no resource requests", []mutation{{single, "            requests: {cpu: 100m, memory: 256Mi}\n", ""}}, "container agenticd: no cpu request"},
		{"grace period too short", []mutation{{replicas, "terminationGracePeriodSeconds: 50", "terminationGracePeriodSeconds: 40"}}, "terminationGracePeriodSeconds 40 is not above"},
		{"config's shutdown_timeout raised", []mutation{{replicasConf, "shutdown_timeout: 20s", "shutdown_timeout: 30s"}}, "terminationGracePeriodSeconds 50 is not above"},
		{"no disruption budget", []mutation{{replicas, "  name: agenticd\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app: agenticd}\n", "  name: agenticd\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app: other}\n"}}, "3 replicas and no PodDisruptionBudget"},
		{"advertised port not the listened one", []mutation{{replicas, "$(POD_IP):50051", "$(POD_IP):50052"}}, `AGENTICD_REPLICA_ADVERTISE "$(POD_IP):50052" is not on the port`},
		{"env reference to a later variable", []mutation{{replicas, "            - name: POD_IP\n              valueFrom:\n                fieldRef: {fieldPath: status.podIP}\n", ""}}, "refers to $(POD_IP), which no variable before it defines"},
		{"ConfigMap's file missing", []mutation{{envoyPods, "=deploy/envoy/envoy.yaml", "=deploy/envoy/envoy-missing.yaml"}}, "which is no YAML file under deploy/"},
		{"stray YAML file", []mutation{{"deploy/extra.yaml", "", "a: b\n"}}, "deploy/extra.yaml: a YAML file the validator does not know"},

		{"Envoy: misspelt field", []mutation{{envoyConfig, "hash_policy:", "hash_polcy:"}}, `unknown field "hash_polcy"`},
		{"Envoy: typed_config of an unknown type", []mutation{{envoyConfig, "http.router.v3.Router", "http.router.v3.Routr"}}, "Routr"},
		{"Envoy: field of the wrong type inside a typed_config", []mutation{{envoyConfig, "codec_type: AUTO", "codec_type: SOMETIMES"}}, "SOMETIMES"},
		{"Envoy: protoc-gen-validate rule broken", []mutation{{envoyConfig, "        - timeout: 2s\n          interval: 5s", "        - interval: 5s"}}, "HealthCheck.Timeout: value is required"},
		{"Envoy: deprecated field", []mutation{{envoyConfig, "dns_lookup_family: V4_ONLY\n", "dns_lookup_family: V4_ONLY\n      respect_dns_ttl: true\n"}}, "respect_dns_ttl is deprecated"},
		{"Envoy: not ring hash", []mutation{{envoyConfig, "lb_policy: RING_HASH", "lb_policy: ROUND_ROBIN"}}, "lb_policy ROUND_ROBIN: use RING_HASH"},
		{"Envoy: no hash on the session header", []mutation{{envoyConfig, "header_name: agenticd-session-id", "header_name: x-session"}}, "no hash_policy on the header agenticd-session-id"},
		{"Envoy: route timeout", []mutation{{envoyConfig, "                            timeout: 0s\n", ""}}, "needs timeout: 0s"},
		{"Envoy: no gRPC health check", []mutation{{envoyConfig, "          grpc_health_check: {}", "          tcp_health_check: {}"}}, "no grpc_health_check"},
		{"Envoy: upstream Service not headless", []mutation{{replicas, "  clusterIP: None\n  selector: {app: agenticd}", "  selector: {app: agenticd}"}}, "Service agenticd-pods (deploy/kubernetes/replicas.yaml) is not headless"},
		{"Envoy: listener on no container port", []mutation{{envoyPods, "containerPort: 8080", "containerPort: 8081"}}, "listener agenticd is on port 8080"},
	}

	// The copy as it is passes: the cases fail for their mutation alone.
	if problems := Check(copyDeploy(t)); len(problems) > 0 {
		t.Fatalf("the unbroken copy fails: %v", problems)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copyDeploy(t)
			for _, m := range c.mutations {
				mutate(t, root, m)
			}
			problems := Check(root)
			for _, p := range problems {
				if strings.Contains(p.Error(), c.want) {
					t.Log(p)
					return
				}
			}
			t.Errorf("no problem says %q; the problems: %v", c.want, problems)
		})
	}
}

// copyDeploy copies deploy/ (less this module) into a temporary repository root.
func copyDeploy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(repoRoot, "deploy")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, "deploy", rel)
		if d.IsDir() {
			if rel == "validate" {
				return filepath.SkipDir
			}
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// mutate applies m to the copy; an empty old creates the file with new.
func mutate(t *testing.T, root string, m mutation) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(m.file))
	if m.old == "" {
		if err := os.WriteFile(p, []byte(m.new), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), m.old) {
		t.Fatalf("%s does not hold %q: the case must follow the file", m.file, m.old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), m.old, m.new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
