package validate

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifest is one file of deploy/kubernetes/: a set of objects applied together, checked
// as a whole (a Service selects pods of the same file, a claim is defined beside the pods
// that mount it).
type manifest struct {
	path       string
	workloads  []*workload
	services   []*corev1.Service
	claims     map[string]*corev1.PersistentVolumeClaim
	budgets    []*policyv1.PodDisruptionBudget
	configMaps map[string]*corev1.ConfigMap
	// fromFile are the ConfigMaps the file's comments make with
	// `kubectl create configmap NAME --from-file=KEY=PATH`: name → key → path.
	fromFile map[string]map[string]string
}

// workload is a Deployment or a StatefulSet: what both have that matters here.
type workload struct {
	where          string // "deploy/kubernetes/x.yaml: Deployment agenticd"
	kind           string
	replicas       int32
	recreate       bool // a Deployment's strategy is Recreate
	selector       *metav1.LabelSelector
	template       corev1.PodTemplateSpec
	claimTemplates []corev1.PersistentVolumeClaim
}

// kinds are the objects the manifests may hold, each with its typed decoding target. A
// kind not here is refused: add it with its checks.
var kinds = map[string]func() any{
	"v1/Service":                    func() any { return &corev1.Service{} },
	"v1/PersistentVolumeClaim":      func() any { return &corev1.PersistentVolumeClaim{} },
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

var (
	documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)
	createConfigMap   = regexp.MustCompile(`kubectl create configmap ([a-z0-9.-]+) --from-file=([^=\s]+)=(\S+)`)
)

// parseManifest decodes every document of a manifest strictly: YAML with a key twice, a
// field its type does not have (in any case but the right one) or a value of the wrong
// type is an error, as in the API server's strict field validation.
func parseManifest(rel string, data []byte) (*manifest, []error) {
	m := &manifest{path: rel, claims: map[string]*corev1.PersistentVolumeClaim{}, configMaps: map[string]*corev1.ConfigMap{}, fromFile: map[string]map[string]string{}}
	for _, c := range createConfigMap.FindAllStringSubmatch(string(data), -1) {
		if m.fromFile[c[1]] == nil {
			m.fromFile[c[1]] = map[string]string{}
		}
		m.fromFile[c[1]][c[2]] = c[3]
	}
	var problems []error
	for i, doc := range documentSeparator.Split(string(data), -1) {
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: document %d: %w", rel, i+1, err))
			continue
		}
		if string(j) == "null" { // comments only
			continue
		}
		var meta metav1.TypeMeta
		if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &meta); err != nil {
			problems = append(problems, fmt.Errorf("%s: document %d: %w", rel, i+1, err))
			continue
		}
		newObject, ok := kinds[meta.APIVersion+"/"+meta.Kind]
		if !ok {
			problems = append(problems, fmt.Errorf("%s: document %d: apiVersion %q kind %q is not one the validator knows (%s): add it to kinds with its checks", rel, i+1, meta.APIVersion, meta.Kind, strings.Join(sortedKeys(kinds), ", ")))
			continue
		}
		obj := newObject()
		strict, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: document %d (%s): %w", rel, i+1, meta.Kind, err))
			continue
		}
		if len(strict) > 0 {
			for _, s := range strict {
				problems = append(problems, fmt.Errorf("%s: document %d (%s): %w", rel, i+1, meta.Kind, s))
			}
			continue
		}
		where := func(name string) string { return fmt.Sprintf("%s: %s %s", rel, meta.Kind, name) }
		switch o := obj.(type) {
		case *corev1.Service:
			m.services = append(m.services, o)
		case *corev1.PersistentVolumeClaim:
			m.claims[o.Name] = o
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			m.budgets = append(m.budgets, o)
		case *appsv1.Deployment:
			m.workloads = append(m.workloads, &workload{where: where(o.Name), kind: meta.Kind, replicas: replicasOf(o.Spec.Replicas),
				recreate: o.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType, selector: o.Spec.Selector, template: o.Spec.Template})
		case *appsv1.StatefulSet:
			m.workloads = append(m.workloads, &workload{where: where(o.Name), kind: meta.Kind, replicas: replicasOf(o.Spec.Replicas),
				selector: o.Spec.Selector, template: o.Spec.Template, claimTemplates: o.Spec.VolumeClaimTemplates})
		}
		if name := obj.(metav1.Object).GetName(); name == "" {
			problems = append(problems, fmt.Errorf("%s: document %d (%s) has no metadata.name", rel, i+1, meta.Kind))
		}
	}
	return m, problems
}

// replicasOf is spec.replicas with the API's default, 1.
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func (t *tree) checkManifest(m *manifest) {
	for name, c := range m.claims {
		if len(c.Spec.AccessModes) == 0 {
			t.addf("%s: PersistentVolumeClaim %s has no accessModes", m.path, name)
		}
		if _, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			t.addf("%s: PersistentVolumeClaim %s requests no storage", m.path, name)
		}
	}
	for _, w := range m.workloads {
		t.checkWorkload(m, w)
	}
	for _, s := range m.services {
		t.checkService(m, s)
	}
	for _, b := range m.budgets {
		where := fmt.Sprintf("%s: PodDisruptionBudget %s", m.path, b.Name)
		if (b.Spec.MinAvailable == nil) == (b.Spec.MaxUnavailable == nil) {
			t.addf("%s: set one of minAvailable and maxUnavailable", where)
		}
		matched := m.selected(b.Spec.Selector)
		if len(matched) == 0 {
			t.addf("%s: its selector matches the pods of no workload in the file", where)
		}
		for _, w := range matched {
			if b.Spec.MinAvailable != nil && b.Spec.MinAvailable.Type == intstr.Int && b.Spec.MinAvailable.IntVal >= w.replicas {
				t.addf("%s: minAvailable %d of %d replicas of %s blocks every eviction (node drains would hang)", where, b.Spec.MinAvailable.IntVal, w.replicas, w.where)
			}
			if b.Spec.MaxUnavailable != nil && b.Spec.MaxUnavailable.Type == intstr.Int && b.Spec.MaxUnavailable.IntVal < 1 {
				t.addf("%s: maxUnavailable %d blocks every eviction (node drains would hang)", where, b.Spec.MaxUnavailable.IntVal)
			}
		}
	}
	for name, keys := range m.fromFile {
		for key, file := range keys {
			if !t.files[file] {
				t.addf("%s: its comment makes ConfigMap %s (key %s) from %s, which is no YAML file under deploy/", m.path, name, key, file)
			}
		}
	}
}

// selected are the file's workloads whose pods a selector matches.
func (m *manifest) selected(sel *metav1.LabelSelector) []*workload {
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil
	}
	var matched []*workload
	for _, w := range m.workloads {
		if s.Matches(labels.Set(w.template.Labels)) {
			matched = append(matched, w)
		}
	}
	return matched
}

func (t *tree) checkService(m *manifest, s *corev1.Service) {
	where := fmt.Sprintf("%s: Service %s", m.path, s.Name)
	if len(s.Spec.Selector) == 0 {
		t.addf("%s: no selector", where)
		return
	}
	matched := m.selected(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
	if len(matched) == 0 {
		t.addf("%s: its selector %v matches the pods of no workload in the file", where, s.Spec.Selector)
	}
	if len(s.Spec.Ports) == 0 {
		t.addf("%s: no ports", where)
	}
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // the API's default
		}
		for _, w := range matched {
			if !w.hasContainerPort(target) {
				t.addf("%s: port %s's targetPort %s is no container port of %s", where, p.Name, target.String(), w.where)
			}
		}
	}
}

// hasContainerPort reports whether a port (a number or a name) is one of the pod's
// containers' ports.
func (w *workload) hasContainerPort(port intstr.IntOrString) bool {
	for _, c := range w.template.Spec.Containers {
		if containerHasPort(c, port) {
			return true
		}
	}
	return false
}

func containerHasPort(c corev1.Container, port intstr.IntOrString) bool {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return true
		}
	}
	return false
}

// volumeSource is what a pod's volume name stands for: a pod volume or a claim template.
type volumeSource struct {
	volume *corev1.Volume
	claim  *corev1.PersistentVolumeClaim // the claim of a PVC volume or a claim template
}

func (t *tree) checkWorkload(m *manifest, w *workload) {
	spec := w.template.Spec
	if w.selector == nil || (len(w.selector.MatchLabels) == 0 && len(w.selector.MatchExpressions) == 0) {
		t.addf("%s: no selector", w.where)
	} else if sel, err := metav1.LabelSelectorAsSelector(w.selector); err != nil {
		t.addf("%s: selector: %v", w.where, err)
	} else if !sel.Matches(labels.Set(w.template.Labels)) {
		t.addf("%s: selector %v does not match the template's labels %v", w.where, sel, w.template.Labels)
	}
	if spec.TerminationGracePeriodSeconds == nil {
		t.addf("%s: no terminationGracePeriodSeconds: say how long the pod has to stop", w.where)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.addf("%s: the pod's securityContext must set runAsNonRoot: true and a runAsUser other than 0", w.where)
	}
	if w.replicas > 1 && !m.hasBudgetFor(w) {
		t.addf("%s: %d replicas and no PodDisruptionBudget in the file selects them", w.where, w.replicas)
	}

	volumes := map[string]volumeSource{}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if _, dup := volumes[v.Name]; dup {
			t.addf("%s: volume %s is defined twice", w.where, v.Name)
		}
		src := volumeSource{volume: v}
		switch {
		case v.PersistentVolumeClaim != nil:
			c, ok := m.claims[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				t.addf("%s: volume %s claims %s, which the file does not define", w.where, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			src.claim = c
		case v.ConfigMap != nil:
			if _, ok := m.configMaps[v.ConfigMap.Name]; !ok && m.fromFile[v.ConfigMap.Name] == nil {
				t.addf("%s: volume %s is ConfigMap %s, which the file neither defines nor makes in a comment (kubectl create configmap %s --from-file=KEY=PATH)", w.where, v.Name, v.ConfigMap.Name, v.ConfigMap.Name)
			}
		}
		volumes[v.Name] = src
	}
	for i := range w.claimTemplates {
		c := &w.claimTemplates[i]
		if len(c.Spec.AccessModes) == 0 {
			t.addf("%s: volumeClaimTemplate %s has no accessModes", w.where, c.Name)
		}
		volumes[c.Name] = volumeSource{claim: c}
	}
	// Claims shared by every pod: with several pods, every node must be able to mount them.
	for name, src := range volumes {
		if src.volume == nil || src.claim == nil {
			continue
		}
		rwx := hasAccessMode(src.claim, corev1.ReadWriteMany)
		if w.replicas > 1 && !rwx {
			t.addf("%s: %d replicas share volume %s (claim %s), which is not ReadWriteMany: the pods could not all mount it", w.where, w.replicas, name, src.claim.Name)
		}
		if w.kind == "Deployment" && !rwx && !w.recreate {
			t.addf("%s: volume %s (claim %s) is ReadWriteOnce: use strategy Recreate, or a rolling update's new pod waits for the old one's volume (and two processes would share its files)", w.where, name, src.claim.Name)
		}
	}

	mounted := map[string]bool{}
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		for _, vm := range c.VolumeMounts {
			mounted[vm.Name] = true
			if _, ok := volumes[vm.Name]; !ok {
				t.addf("%s: container %s mounts volume %s, which the pod does not have", w.where, c.Name, vm.Name)
			}
		}
	}
	for name := range volumes {
		if !mounted[name] {
			t.addf("%s: volume %s is mounted by no container", w.where, name)
		}
	}
	for _, c := range all {
		t.checkContainer(w, c)
	}
	for _, c := range spec.Containers {
		where := fmt.Sprintf("%s: container %s", w.where, c.Name)
		if c.ReadinessProbe == nil {
			t.addf("%s: no readinessProbe", where)
		}
		if c.LivenessProbe == nil {
			t.addf("%s: no livenessProbe", where)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p == nil {
				continue
			}
			var port *intstr.IntOrString
			switch {
			case p.GRPC != nil:
				gp := intstr.FromInt32(p.GRPC.Port)
				port = &gp
			case p.TCPSocket != nil:
				port = &p.TCPSocket.Port
			case p.HTTPGet != nil:
				port = &p.HTTPGet.Port
			}
			if port != nil && !containerHasPort(c, *port) {
				t.addf("%s: a probe checks port %s, which is none of the container's ports", where, port.String())
			}
		}
		if c.Name == "agenticd" {
			t.checkAgenticd(m, w, c, volumes)
		}
		t.checkEnvoyContainer(m, w, c, volumes)
	}
}

func hasAccessMode(c *corev1.PersistentVolumeClaim, mode corev1.PersistentVolumeAccessMode) bool {
	for _, m := range c.Spec.AccessModes {
		if m == mode {
			return true
		}
	}
	return false
}

func (m *manifest) hasBudgetFor(w *workload) bool {
	for _, b := range m.budgets {
		for _, matched := range m.selected(b.Spec.Selector) {
			if matched == w {
				return true
			}
		}
	}
	return false
}

var (
	// envReference is $(NAME) in an env value, which Kubernetes expands from the
	// variables defined before it.
	envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	// secretName is a variable that holds a secret by its name.
	secretName = regexp.MustCompile(`(TOKEN|PASSWORD|SECRET|_KEY|DATABASE|DSN)$`)
)

// checkContainer checks what every container needs: resources, its image's pull policy,
// a locked-down security context, secrets from Secrets, env references that resolve.
func (t *tree) checkContainer(w *workload, c corev1.Container) {
	where := fmt.Sprintf("%s: container %s", w.where, c.Name)
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.addf("%s: no cpu request", where)
	}
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
		t.addf("%s: no memory request", where)
	}
	if tag := imageTag(c.Image); (tag == "" || tag == "latest") && c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.addf("%s: image %q is latest: set imagePullPolicy: IfNotPresent (a loaded image, as the comments say), or pin a tag", where, c.Image)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.addf("%s: its securityContext must set allowPrivilegeEscalation: false and drop ALL capabilities", where)
	}
	defined := map[string]bool{}
	for _, e := range c.Env {
		if e.Value != "" {
			if secretName.MatchString(e.Name) || (strings.Contains(e.Value, "://") && strings.Contains(e.Value, "@")) {
				t.addf("%s: %s has a literal value; a secret comes from a Secret (valueFrom.secretKeyRef)", where, e.Name)
			}
			for _, ref := range envReference.FindAllStringSubmatch(e.Value, -1) {
				if !defined[ref[1]] {
					t.addf("%s: %s refers to $(%s), which no variable before it defines (Kubernetes would leave it as it is)", where, e.Name, ref[1])
				}
			}
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef == nil && secretName.MatchString(e.Name) {
			t.addf("%s: %s must come from a Secret (valueFrom.secretKeyRef)", where, e.Name)
		}
		defined[e.Name] = true
	}
}

// imageTag is an image reference's tag: "" when it has none (Kubernetes then pulls
// latest) and "@" for a digest.
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return "@"
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// The file the image's ENTRYPOINT reads (deploy/Dockerfile) and where its volume goes.
const (
	agenticdConfigDir = "/etc/agenticd"
	agenticdConfigKey = "agenticd.yaml"
)

// checkAgenticd checks agenticd's container against the config file its ConfigMap is
// made from: the token from a Secret, gRPC probes on the port it listens on, a grace
// period its stop fits in, and with several replicas, the database URL from a Secret, an
// address to advertise, a data dir of the pod's own and workspaces every pod shares.
func (t *tree) checkAgenticd(m *manifest, w *workload, c corev1.Container, volumes map[string]volumeSource) {
	where := fmt.Sprintf("%s: container %s", w.where, c.Name)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e, ok := env["AGENTICD_TOKEN"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.addf("%s: AGENTICD_TOKEN must come from a Secret (valueFrom.secretKeyRef): agenticd listens beyond loopback", where)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p != nil && p.GRPC == nil {
			t.addf("%s: probe with no grpc: agenticd's health is grpc.health.v1", where)
		}
	}

	// The config: the ConfigMap mounted where the image reads it, made from which file.
	mountOf := func(dir string) (corev1.VolumeMount, bool) {
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == dir || strings.HasPrefix(dir, strings.TrimSuffix(vm.MountPath, "/")+"/") {
				return vm, true
			}
		}
		return corev1.VolumeMount{}, false
	}
	vm, ok := mountOf(agenticdConfigDir)
	if !ok || volumes[vm.Name].volume == nil || volumes[vm.Name].volume.ConfigMap == nil {
		t.addf("%s: no ConfigMap mounted at %s, where the image reads %s", where, agenticdConfigDir, agenticdConfigKey)
		return
	}
	cmName := volumes[vm.Name].volume.ConfigMap.Name
	file := m.fromFile[cmName][agenticdConfigKey]
	cfg := t.configs[file]
	if cfg == nil && t.files[file] {
		return // the config itself is wrong: reported already
	}
	if cfg == nil {
		t.addf("%s: the file's comment must make ConfigMap %s with `kubectl create configmap %s --from-file=%s=deploy/agenticd….yaml`, naming the config it runs", where, cmName, cmName, agenticdConfigKey)
		return
	}

	listen := intstr.FromInt32(cfg.listenPort)
	if !containerHasPort(c, listen) {
		t.addf("%s: %s listens on %d, which is none of the container's ports", where, cfg.path, cfg.listenPort)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p != nil && p.GRPC != nil && p.GRPC.Port != cfg.listenPort {
			t.addf("%s: a gRPC probe checks port %d but %s listens on %d", where, p.GRPC.Port, cfg.path, cfg.listenPort)
		}
	}
	// Stopping: the preStop pause, then RPCs drain within shutdown_timeout, then the
	// agents close within a fresh shutdown_timeout; all of it within the grace period.
	var pause time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		switch h := c.Lifecycle.PreStop; {
		case h.Sleep != nil:
			pause = time.Duration(h.Sleep.Seconds) * time.Second
		case h.Exec != nil && len(h.Exec.Command) == 2 && path.Base(h.Exec.Command[0]) == "sleep":
			s, err := strconv.Atoi(h.Exec.Command[1])
			if err != nil {
				t.addf("%s: preStop sleeps %q: give whole seconds", where, h.Exec.Command[1])
			}
			pause = time.Duration(s) * time.Second
		default:
			t.addf("%s: a preStop hook other than a sleep: the validator cannot tell how long it takes", where)
		}
	}
	if g := w.template.Spec.TerminationGracePeriodSeconds; g != nil {
		need := pause + 2*cfg.shutdownTimeout
		if grace := time.Duration(*g) * time.Second; grace <= need {
			t.addf("%s: terminationGracePeriodSeconds %d is not above the preStop pause (%s) plus twice %s's shutdown_timeout (%s): agents would be killed mid-close", where, *g, pause, cfg.path, cfg.shutdownTimeout)
		}
	}

	// Where the files go: data dir and workspaces on volumes (the root file system is
	// read-only), shared or not as the replicas need.
	if vm, ok := mountOf(cfg.dataDir); !ok {
		t.addf("%s: %s's data_dir %s is on no volume", where, cfg.path, cfg.dataDir)
	} else if w.replicas > 1 && volumes[vm.Name].claim != nil {
		t.addf("%s: %d replicas would share the data dir on claim %s: each replica's data dir is its own (an emptyDir: the state is in Postgres)", where, w.replicas, volumes[vm.Name].claim.Name)
	}
	for _, root := range cfg.workspaceRoots {
		vm, ok := mountOf(root)
		if !ok {
			t.addf("%s: %s's workspace root %s is on no volume", where, cfg.path, root)
			continue
		}
		if w.replicas > 1 {
			if cl := volumes[vm.Name].claim; cl == nil || !hasAccessMode(cl, corev1.ReadWriteMany) {
				t.addf("%s: workspace root %s must be on a ReadWriteMany claim that every replica mounts: a session moves to another replica when its owner dies, and its files must be there", where, root)
			}
		}
	}

	if w.replicas <= 1 {
		return
	}
	// Several replicas: one Postgres, and addresses for forwarding.
	if e, ok := env["AGENTICD_DATABASE"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.addf("%s: %d replicas need one Postgres: AGENTICD_DATABASE from a Secret (valueFrom.secretKeyRef); SQLite cannot be shared", where, w.replicas)
	}
	if !cfg.hasReplica {
		t.addf("%s: %d replicas run %s, which has no replica: settings", where, w.replicas, cfg.path)
	}
	adv, ok := env["AGENTICD_REPLICA_ADVERTISE"]
	if !ok || adv.Value == "" {
		t.addf("%s: %d replicas need AGENTICD_REPLICA_ADVERTISE (e.g. $(POD_IP):%d): the pod's host name does not resolve for the others", where, w.replicas, cfg.listenPort)
		return
	}
	if i := strings.LastIndex(adv.Value, ":"); i < 0 || adv.Value[i+1:] != strconv.Itoa(int(cfg.listenPort)) {
		t.addf("%s: AGENTICD_REPLICA_ADVERTISE %q is not on the port %s listens on (%d)", where, adv.Value, cfg.path, cfg.listenPort)
	}
	for _, ref := range envReference.FindAllStringSubmatch(adv.Value, -1) {
		if e, ok := env[ref[1]]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.addf("%s: AGENTICD_REPLICA_ADVERTISE uses $(%s), which is not the pod's IP (valueFrom.fieldRef status.podIP)", where, ref[1])
		}
	}
}
