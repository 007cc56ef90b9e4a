package validate

import (
	"fmt"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	// The typed_config types envoy.yaml uses are registered by their packages' imports
	// (http_connection_manager and upstreams/http above, the router here), so that their
	// Any values decode, strictly like the rest; a type not linked in is an error. Import
	// the package of any extension the config comes to use.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
)

// The header clients set to a session's id, and the agenticd port, that routing rests on.
const sessionHeader = "agenticd-session-id"

// envoyConfig is an Envoy bootstrap under deploy/envoy/, decoded and valid.
type envoyConfig struct {
	path      string
	bootstrap *bootstrapv3.Bootstrap
}

// parseEnvoy decodes an Envoy config as Envoy does, strictly: YAML to JSON (a key twice is
// an error), then protojson into the v3 Bootstrap with unknown fields refused, every Any
// unpacked into its registered type, and protoc-gen-validate's rules (required fields,
// ranges, enums) checked on every message, those inside Any values included. A field
// the API deprecates is refused too: Envoy warns about some and fails on others.
func parseEnvoy(rel string, data []byte) (*envoyConfig, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	var b bootstrapv3.Bootstrap
	opts := protojson.UnmarshalOptions{DiscardUnknown: false, Resolver: protoregistry.GlobalTypes}
	if err := opts.Unmarshal(j, &b); err != nil {
		return nil, fmt.Errorf("%s: not an Envoy v3 Bootstrap: %w", rel, err)
	}
	if err := validateTree(b.ProtoReflect(), "bootstrap"); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return &envoyConfig{path: rel, bootstrap: &b}, nil
}

// validateTree runs a message's protoc-gen-validate rules, refuses deprecated fields, and
// goes into its fields, unpacking Any values (whose contents the rules do not reach).
func validateTree(m protoreflect.Message, where string) error {
	if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		at := where + "." + string(fd.Name())
		if o, ok := fd.Options().(*descriptorpb.FieldOptions); ok && o.GetDeprecated() {
			err = fmt.Errorf("%s is deprecated in Envoy's API", at)
			return false
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = validateValue(l.Get(i).Message(), fmt.Sprintf("%s[%d]", at, i))
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = validateValue(mv.Message(), fmt.Sprintf("%s[%s]", at, k.String()))
					return err == nil
				})
			}
		default:
			err = validateValue(v.Message(), at)
		}
		return err == nil
	})
	return err
}

func validateValue(m protoreflect.Message, where string) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return validateTree(inner.ProtoReflect(), where+"("+a.GetTypeUrl()+")")
	}
	return validateTree(m, where)
}

// checkEnvoy checks that the config routes agenticd as deploy/README.md says: a listener
// whose routes hash on the session header with no route timeout, to a RING_HASH cluster
// over HTTP/2 with gRPC health checks, of the pods of a headless Service of the manifests.
func (t *tree) checkEnvoy(e *envoyConfig) {
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range e.bootstrap.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	routed := map[string]bool{}
	listeners := e.bootstrap.GetStaticResources().GetListeners()
	if len(listeners) == 0 {
		t.addf("%s: no listener", e.path)
	}
	for _, l := range listeners {
		for _, hcm := range connectionManagers(l) {
			where := fmt.Sprintf("%s: listener %s", e.path, l.GetName())
			rc := hcm.GetRouteConfig()
			if rc == nil {
				t.addf("%s: no inline route_config", where)
				continue
			}
			for _, vh := range rc.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					a := r.GetRoute()
					if a == nil {
						continue
					}
					name := a.GetCluster()
					if clusters[name] == nil {
						t.addf("%s: a route goes to cluster %q, which is not defined", where, name)
						continue
					}
					routed[name] = true
					if a.GetTimeout() == nil || a.GetTimeout().AsDuration() != 0 {
						t.addf("%s: the route to %s needs timeout: 0s, or Envoy's default (15s) cuts Subscribe streams", where, name)
					}
					hashes := false
					for _, h := range a.GetHashPolicy() {
						hashes = hashes || h.GetHeader().GetHeaderName() == sessionHeader
					}
					if !hashes {
						t.addf("%s: the route to %s has no hash_policy on the header %s", where, name, sessionHeader)
					}
				}
			}
		}
	}
	if len(routed) == 0 {
		t.addf("%s: no route goes to a cluster", e.path)
	}
	for name := range routed {
		c := clusters[name]
		where := fmt.Sprintf("%s: cluster %s", e.path, name)
		if c.GetType() != clusterv3.Cluster_STRICT_DNS {
			t.addf("%s: type %s: use STRICT_DNS on the headless Service, so that each pod is a host", where, c.GetType())
		}
		if c.GetLbPolicy() != clusterv3.Cluster_RING_HASH {
			t.addf("%s: lb_policy %s: use RING_HASH, so that a session's calls go to one pod", where, c.GetLbPolicy())
		}
		if !http2Upstream(c) {
			t.addf("%s: agenticd's gRPC needs HTTP/2 upstream (typed_extension_protocol_options HttpProtocolOptions with explicit http2_protocol_options)", where)
		}
		grpcHealth := false
		for _, h := range c.GetHealthChecks() {
			grpcHealth = grpcHealth || h.GetGrpcHealthCheck() != nil
		}
		if !grpcHealth {
			t.addf("%s: no grpc_health_check: a stopping or dead pod must leave the ring", where)
		}
		for _, le := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range le.GetLbEndpoints() {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				t.checkEnvoyUpstream(where, sa.GetAddress(), int32(sa.GetPortValue()))
			}
		}
	}
}

// checkEnvoyUpstream finds the Service a cluster resolves (NAME.NAMESPACE.svc...) among
// the manifests: it must be headless (each pod an address) and serve the port.
func (t *tree) checkEnvoyUpstream(where, host string, port int32) {
	name, _, _ := strings.Cut(host, ".")
	for _, m := range t.manifests {
		for _, s := range m.services {
			if s.Name != name {
				continue
			}
			if s.Spec.ClusterIP != corev1.ClusterIPNone {
				t.addf("%s: Service %s (%s) is not headless (clusterIP: None): its name resolves to one virtual IP, not to each pod", where, name, m.path)
			}
			for _, p := range s.Spec.Ports {
				if p.Port == port {
					return
				}
			}
			t.addf("%s: Service %s (%s) has no port %d", where, name, m.path, port)
			return
		}
	}
	t.addf("%s: %s is no Service of deploy/kubernetes/", where, host)
}

func connectionManagers(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	var out []*hcmv3.HttpConnectionManager
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			var hcm hcmv3.HttpConnectionManager
			if f.GetTypedConfig() != nil && f.GetTypedConfig().MessageIs(&hcm) && f.GetTypedConfig().UnmarshalTo(&hcm) == nil {
				out = append(out, &hcm)
			}
		}
	}
	return out
}

func http2Upstream(c *clusterv3.Cluster) bool {
	for _, a := range c.GetTypedExtensionProtocolOptions() {
		var o upstreamhttpv3.HttpProtocolOptions
		if a.MessageIs(&o) && a.UnmarshalTo(&o) == nil && o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil {
			return true
		}
	}
	return false
}

// checkEnvoyContainer checks a container that mounts a ConfigMap made from an Envoy
// config: the config's listeners must be on its ports, or the Service reaches nothing.
func (t *tree) checkEnvoyContainer(m *manifest, w *workload, c corev1.Container, volumes map[string]volumeSource) {
	for _, vm := range c.VolumeMounts {
		v := volumes[vm.Name].volume
		if v == nil || v.ConfigMap == nil {
			continue
		}
		for _, file := range m.fromFile[v.ConfigMap.Name] {
			e := t.envoys[file]
			if e == nil {
				continue
			}
			for _, l := range e.bootstrap.GetStaticResources().GetListeners() {
				port := int32(l.GetAddress().GetSocketAddress().GetPortValue())
				if !containerHasPort(c, intstr.FromInt32(port)) {
					t.addf("%s: container %s: %s's listener %s is on port %d, which is none of the container's ports", w.where, c.Name, e.path, l.GetName(), port)
				}
			}
		}
	}
}
