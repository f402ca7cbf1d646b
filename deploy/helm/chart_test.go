// Package helm_test checks the Helm chart in ./schedulerd without a cluster:
// helm lint and helm template (Helm v3 built from the Go module proxy), every
// rendered object decoded strictly into its Kubernetes API type, and what
// the deployment depends on asserted on the decoded objects.
package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/schedulerd/schedulerd/app"
)

// helmModule is the Helm release the test builds; SCHEDULERD_HELM names a helm v3
// binary to use instead.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// kubeVersion is the cluster version templates are rendered for (the chart
// needs 1.30 or later for its preStop sleep).
const kubeVersion = "1.34.0"

const chartDir = "schedulerd"

// The secret values of the created-Secret case, which must appear in no
// object but the Secret.
const (
	testMongoURI      = "mongodb://user:pw-7f3a@mongo-0.mongo:27017/sched?replicaSet=rs0"
	testAdminKey      = "sk_admin_test_4b1c9e2d7a"
	testSigningSecret = "whsec_test_8e2f6a1d3c"
)

// secretEnv are the settings that may reach the container only through a
// Secret reference.
var secretEnv = []string{"SCHEDULER_MONGO_URI", "SCHEDULER_ADMIN_KEY", "SCHEDULER_SIGNING_SECRET"}

func TestChart(t *testing.T) {
	h := helmBinary(t)

	t.Run("EmbeddedDefaults", func(t *testing.T) {
		m := render(t, h)
		d := m.deployment(t)
		checkDeployment(t, m, nil)
		if got := *d.Spec.Replicas; got != 1 {
			t.Errorf("replicas = %d, want 1", got)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("strategy = %q, want Recreate (one process owns the data directory)", d.Spec.Strategy.Type)
		}
		cfg := m.config(t, nil)
		if cfg.Store != "embedded" {
			t.Errorf("store = %q, want embedded", cfg.Store)
		}
		claims := objectsOf[*corev1.PersistentVolumeClaim](m)
		if len(claims) != 1 {
			t.Fatalf("%d PersistentVolumeClaims, want 1", len(claims))
		}
		c := container(t, d)
		mount := volumeMountAt(c, cfg.DataDir)
		if mount == nil {
			t.Fatalf("no volume mounted at the data directory %q", cfg.DataDir)
		}
		v := podVolume(d, mount.Name)
		if v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claims[0].Name {
			t.Errorf("data directory volume %+v, want the claim %q", v, claims[0].Name)
		}
		if mount.ReadOnly {
			t.Error("data directory mounted read-only")
		}
		if n := len(objectsOf[*corev1.Secret](m)); n != 0 {
			t.Errorf("%d Secrets without secret values, want 0", n)
		}
		for _, name := range secretEnv {
			if envVar(c, name) != nil {
				t.Errorf("env %s set without a secret value; the embedded store generates it", name)
			}
		}
		if n := len(objectsOf[*monitoringv1.ServiceMonitor](m)) + len(objectsOf[*networkingv1.NetworkPolicy](m)); n != 0 {
			t.Errorf("%d ServiceMonitors and NetworkPolicies by default, want none", n)
		}
		if n := len(objectsOf[*policyv1.PodDisruptionBudget](m)); n != 1 {
			t.Errorf("%d PodDisruptionBudgets, want 1", n)
		}
	})

	t.Run("MongoExistingSecretThreeReplicas", func(t *testing.T) {
		m := render(t, h, "--set", "store=mongo", "--set", "replicaCount=3",
			"--set", "secrets.existingSecret=sched-secrets", "--set", "mongo.database=sched")
		d := m.deployment(t)
		existing := map[string]string{"mongo-uri": testMongoURI, "admin-key": testAdminKey, "signing-secret": testSigningSecret}
		checkDeployment(t, m, existing)
		if got := *d.Spec.Replicas; got != 3 {
			t.Errorf("replicas = %d, want 3", got)
		}
		if u := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || u == nil || u.MaxUnavailable.IntValue() != 0 {
			t.Errorf("strategy %+v, want a rolling update that keeps every pod until its replacement is ready", d.Spec.Strategy)
		}
		if n := len(objectsOf[*corev1.Secret](m)); n != 0 {
			t.Errorf("%d Secrets created next to secrets.existingSecret, want 0", n)
		}
		if n := len(objectsOf[*corev1.PersistentVolumeClaim](m)); n != 0 {
			t.Errorf("%d PersistentVolumeClaims with store=mongo, want 0", n)
		}
		c := container(t, d)
		for _, name := range secretEnv {
			ref := envVar(c, name).ValueFrom.SecretKeyRef
			if ref.Name != "sched-secrets" {
				t.Errorf("env %s reads Secret %q, want sched-secrets", name, ref.Name)
			}
			if isTrue(ref.Optional) {
				t.Errorf("env %s: optional Secret key with store=mongo; a missing key must keep the pod from starting", name)
			}
		}
		cfg := m.config(t, existing)
		if cfg.Store != "mongo" || cfg.MongoURI != testMongoURI || cfg.MongoDatabase != "sched" {
			t.Errorf("store %q, uri %q, database %q; want mongo, the Secret's URI, sched", cfg.Store, cfg.MongoURI, cfg.MongoDatabase)
		}
		if cfg.InstanceID != "r-schedulerd-5d9c7-x2x4q" {
			t.Errorf("instance id = %q, want the pod's name", cfg.InstanceID)
		}
	})

	t.Run("EmbeddedExistingSecret", func(t *testing.T) {
		m := render(t, h, "--set", "secrets.existingSecret=sched-secrets")
		existing := map[string]string{"admin-key": testAdminKey, "signing-secret": testSigningSecret}
		checkDeployment(t, m, existing)
		c := container(t, m.deployment(t))
		if envVar(c, "SCHEDULER_MONGO_URI") != nil {
			t.Error("env SCHEDULER_MONGO_URI with store=embedded")
		}
		for _, name := range []string{"SCHEDULER_ADMIN_KEY", "SCHEDULER_SIGNING_SECRET"} {
			e := envVar(c, name)
			if e == nil || !isTrue(e.ValueFrom.SecretKeyRef.Optional) {
				t.Errorf("env %s = %+v, want an optional reference: schedulerd generates what the Secret lacks", name, e)
			}
		}
		if cfg := m.config(t, existing); cfg.AdminKey != testAdminKey {
			t.Errorf("admin key %q, want the Secret's", cfg.AdminKey)
		}
	})

	t.Run("MongoCreatedSecret", func(t *testing.T) {
		m := render(t, h, "--set", "store=mongo",
			"--set-string", "secrets.mongoUri="+testMongoURI,
			"--set-string", "secrets.adminKey="+testAdminKey,
			"--set-string", "secrets.signingSecret="+testSigningSecret,
			"--set", "shutdownTimeoutSeconds=90", "--set", "preStopSleepSeconds=10")
		d := m.deployment(t)
		checkDeployment(t, m, nil)
		if got := *d.Spec.Replicas; got != 2 {
			t.Errorf("replicas = %d, want 2 by default with store=mongo", got)
		}
		secrets := objectsOf[*corev1.Secret](m)
		if len(secrets) != 1 {
			t.Fatalf("%d Secrets, want 1", len(secrets))
		}
		want := map[string]string{"mongo-uri": testMongoURI, "admin-key": testAdminKey, "signing-secret": testSigningSecret}
		for k, v := range want {
			if got := string(secrets[0].Data[k]); got != v {
				t.Errorf("Secret key %s = %q, want %q", k, got, v)
			}
		}
		// A changed Secret changes the pods' template, which restarts them.
		again := render(t, h, "--set", "store=mongo",
			"--set-string", "secrets.mongoUri="+testMongoURI,
			"--set-string", "secrets.adminKey="+testAdminKey+"-rotated",
			"--set-string", "secrets.signingSecret="+testSigningSecret)
		sum, sumAgain := d.Spec.Template.Annotations["checksum/secret"], again.deployment(t).Spec.Template.Annotations["checksum/secret"]
		if sum == "" || sum == sumAgain {
			t.Errorf("pod annotation checksum/secret %q, then %q after the admin key changed; want two different checksums", sum, sumAgain)
		}
		cfg := m.config(t, nil)
		if cfg.MongoURI != testMongoURI || cfg.AdminKey != testAdminKey || cfg.SigningSecret != testSigningSecret {
			t.Errorf("config from the Secret: uri %q, admin key %q, signing secret %q", cfg.MongoURI, cfg.AdminKey, cfg.SigningSecret)
		}
		if cfg.ShutdownTimeout != 90*time.Second {
			t.Errorf("shutdown timeout = %s, want 90s", cfg.ShutdownTimeout)
		}
		for _, obj := range m.objects {
			if _, ok := obj.(*corev1.Secret); ok {
				continue
			}
			b, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{testMongoURI, testAdminKey, testSigningSecret} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%T holds the secret %q", obj, s)
				}
			}
		}
	})

	t.Run("ServiceMonitorAndNetworkPolicy", func(t *testing.T) {
		m := render(t, h, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom",
			"--set", "networkPolicy.enabled=true",
			"--set", "networkPolicy.ingressFrom[0].namespaceSelector.matchLabels.team=payments")
		d := m.deployment(t)
		checkDeployment(t, m, nil)
		pod := d.Spec.Template.Labels

		sms := objectsOf[*monitoringv1.ServiceMonitor](m)
		if len(sms) != 1 {
			t.Fatalf("%d ServiceMonitors, want 1", len(sms))
		}
		sm := sms[0]
		if sm.Labels["release"] != "prom" {
			t.Errorf("ServiceMonitor labels %v, want release=prom", sm.Labels)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v, want port http path /metrics", sm.Spec.Endpoints)
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var scraped []string
		for _, s := range objectsOf[*corev1.Service](m) {
			if sel.Matches(labels.Set(s.Labels)) {
				scraped = append(scraped, s.Name)
			}
		}
		if api := m.apiService(t); !slices.Equal(scraped, []string{api.Name}) {
			t.Errorf("ServiceMonitor selects Services %v, want only the API Service %q (each pod scraped once)", scraped, api.Name)
		}

		nps := objectsOf[*networkingv1.NetworkPolicy](m)
		if len(nps) != 1 {
			t.Fatalf("%d NetworkPolicies, want 1", len(nps))
		}
		np := nps[0]
		psel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !psel.Matches(labels.Set(pod)) {
			t.Errorf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector, pod)
		}
		if len(np.Spec.Ingress) != 1 {
			t.Fatalf("NetworkPolicy ingress %+v, want one rule", np.Spec.Ingress)
		}
		rule := np.Spec.Ingress[0]
		if len(rule.Ports) != 1 || rule.Ports[0].Port.String() != "http" {
			t.Errorf("NetworkPolicy ports %+v, want the http port", rule.Ports)
		}
		var peers, team bool
		for _, from := range rule.From {
			if from.PodSelector != nil && from.NamespaceSelector == nil {
				s, err := metav1.LabelSelectorAsSelector(from.PodSelector)
				peers = peers || (err == nil && s.Matches(labels.Set(pod)))
			}
			if from.NamespaceSelector != nil && from.NamespaceSelector.MatchLabels["team"] == "payments" {
				team = true
			}
		}
		if !peers || !team {
			t.Errorf("NetworkPolicy from %+v: the pods reach each other %v, ingressFrom kept %v; want both", rule.From, peers, team)
		}
	})

	// The values files of docs/operating.md render and hold up.
	t.Run("OperatingGuideExamples", func(t *testing.T) {
		guide, err := os.ReadFile("../../docs/operating.md")
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := bytes.Cut(guide, []byte("\n## Kubernetes (Helm chart)\n"))
		if !ok {
			t.Fatal("docs/operating.md has no Kubernetes (Helm chart) section")
		}
		section, _, _ = bytes.Cut(section, []byte("\n## "))
		blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(section, -1)
		stores := map[string]bool{}
		for i, b := range blocks {
			f := filepath.Join(t.TempDir(), fmt.Sprintf("values-%d.yaml", i))
			if err := os.WriteFile(f, b[1], 0o600); err != nil {
				t.Fatal(err)
			}
			m := render(t, h, "-f", f)
			existing := map[string]string{"mongo-uri": testMongoURI, "admin-key": testAdminKey, "signing-secret": testSigningSecret}
			checkDeployment(t, m, existing)
			stores[m.config(t, existing).Store] = true
		}
		if !stores["embedded"] || !stores["mongo"] {
			t.Errorf("the guide's values examples cover stores %v, want embedded and mongo", stores)
		}
	})

	t.Run("RefusesValuesThatCannotWork", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			args  []string
			names string // the value the message must name
		}{
			{"EmbeddedWithTwoReplicas", []string{"--set", "replicaCount=2"}, "replicaCount"},
			{"MongoWithoutURI", []string{"--set", "store=mongo"}, "secrets.mongoUri"},
			{"MongoWithoutAdminKey", []string{"--set", "store=mongo", "--set", "secrets.mongoUri=mongodb://m"}, "secrets.adminKey"},
			{"MongoWithoutSigningSecret", []string{"--set", "store=mongo", "--set", "secrets.mongoUri=mongodb://m", "--set", "secrets.adminKey=k"}, "secrets.signingSecret"},
			{"SecretInEnv", []string{"--set", "env.SCHEDULER_ADMIN_KEY=k"}, "env.SCHEDULER_ADMIN_KEY"},
			{"UnknownStore", []string{"--set", "store=postgres"}, "store"},
			{"ZeroShutdownTimeout", []string{"--set", "shutdownTimeoutSeconds=0"}, "shutdownTimeoutSeconds"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := h.run(templateArgs(tc.args)...)
				if err == nil {
					t.Fatalf("helm template %v succeeded, want a failure naming %s", tc.args, tc.names)
				}
				if msg := err.Error(); !strings.Contains(msg, "execution error") || !strings.Contains(msg, ": "+tc.names+":") {
					t.Errorf("helm template %v: %v\nwant a message naming %s", tc.args, err, tc.names)
				}
			})
		}
	})
}

// TestValuesDocumented checks that the chart's README has a row for every
// value in values.yaml (a value or one of its parents) and names no value
// that does not exist.
func TestValuesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := bytes.Cut(readme, []byte("\n## Values\n"))
	if !ok {
		t.Fatal("README.md has no Values section")
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(table, -1) {
		rows[string(m[1])] = true
	}
	exists := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		exists[prefix] = true
		documented := false
		for p := prefix; p != ""; p = p[:max(strings.LastIndex(p, "."), 0)] {
			documented = documented || rows[p]
		}
		m, isMap := v.(map[string]any)
		if !isMap || len(m) == 0 || rows[prefix] {
			if !documented {
				t.Errorf("value %s is not in the README's table", prefix)
			}
			return
		}
		for k, child := range m {
			walk(prefix+"."+k, child)
		}
	}
	for k, v := range values {
		walk(k, v)
	}
	for row := range rows {
		if !exists[row] {
			t.Errorf("the README documents %s, which values.yaml does not have", row)
		}
	}
}

// manifest is one rendering of the chart, each object decoded into its type.
type manifest struct {
	objects []any
}

// kinds maps apiVersion/kind to a new value of its Go type. An object of a
// kind not listed here fails the test.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/Secret":                               func() any { return new(corev1.Secret) },
	"v1/ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"v1/PersistentVolumeClaim":                func() any { return new(corev1.PersistentVolumeClaim) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(monitoringv1.ServiceMonitor) },
}

// render lints the chart with args, renders it and decodes every object
// strictly: duplicate keys, unknown fields and fields in the wrong case fail.
func render(t *testing.T, h helm, args ...string) *manifest {
	t.Helper()
	lint := append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, args...)
	if out, err := h.run(lint...); err != nil {
		t.Fatalf("helm %v: %v\n%s", lint, err, out)
	}
	out, err := h.run(templateArgs(args)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	m := &manifest{}
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read rendered YAML: %v", err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // a template that rendered nothing
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(js, &tm); err != nil {
			t.Fatalf("object without apiVersion and kind: %v\n%s", err, doc)
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			t.Fatalf("unexpected object %s %s\n%s", tm.APIVersion, tm.Kind, doc)
		}
		obj := newObj()
		strict, err := sigsjson.UnmarshalStrict(js, obj)
		if err = errors.Join(append(strict, err)...); err != nil {
			t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
		}
		m.objects = append(m.objects, obj)
	}
	return m
}

func templateArgs(args []string) []string {
	return append([]string{"template", "r", chartDir, "--namespace", "sched", "--kube-version", kubeVersion}, args...)
}

func objectsOf[T any](m *manifest) []T {
	var out []T
	for _, o := range m.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (m *manifest) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	ds := objectsOf[*appsv1.Deployment](m)
	if len(ds) != 1 {
		t.Fatalf("%d Deployments, want 1", len(ds))
	}
	return ds[0]
}

func (m *manifest) apiService(t *testing.T) *corev1.Service {
	t.Helper()
	var out []*corev1.Service
	for _, s := range objectsOf[*corev1.Service](m) {
		if s.Spec.ClusterIP != corev1.ClusterIPNone {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d API Services, want 1", len(out))
	}
	return out[0]
}

// Pod fields as the kubelet would fill them in.
const (
	testPodIP   = "10.12.3.4"
	testPodName = "r-schedulerd-5d9c7-x2x4q"
)

// config resolves the container's environment as the kubelet would (field
// references, Secret references into the rendered Secret or existing,
// $(VAR) references to variables defined before) and parses it with
// schedulerd's own configuration parser, which also validates it.
func (m *manifest) config(t *testing.T, existing map[string]string) app.Config {
	t.Helper()
	c := container(t, m.deployment(t))
	secretData := map[string]string{}
	for _, s := range objectsOf[*corev1.Secret](m) {
		for k, v := range s.Data {
			secretData[s.Name+"/"+k] = string(v)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandEnvRefs(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = map[string]string{"status.podIP": testPodIP, "metadata.name": testPodName}[e.ValueFrom.FieldRef.FieldPath]
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secretData[ref.Name+"/"+ref.Key]
			if !ok {
				v, ok = existing[ref.Key]
			}
			switch {
			case ok:
				env[e.Name] = v
			case !isTrue(ref.Optional):
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
		}
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("schedulerd refuses the rendered environment: %v", err)
	}
	return cfg
}

// checkDeployment asserts what every rendering must hold: probes, security
// context, secrets by reference only, the grace period against the shutdown
// timeout, the advertise URL and the Services.
func checkDeployment(t *testing.T, m *manifest, existing map[string]string) {
	t.Helper()
	d := m.deployment(t)
	c := container(t, d)
	pod := d.Spec.Template.Spec

	if !selectorMatches(d.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("Deployment selector %v does not match its pod labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "http" {
			port = &c.Ports[i]
		}
	}
	if port == nil {
		t.Fatalf("container has no port named http: %+v", c.Ports)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v, want an HTTP GET of %s", p.name, p.probe, p.path)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port.String() != port.Name {
			t.Errorf("%s probe gets %s on port %s, want %s on %s", p.name, g.Path, g.Port.String(), p.path, port.Name)
		}
	}
	if r := c.ReadinessProbe; r != nil && r.TimeoutSeconds <= 2 {
		t.Errorf("readiness timeout %ds, want more than /readyz's own 2s bound", r.TimeoutSeconds)
	}

	// Security context: the pod's and the container's.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatalf("security contexts pod %+v container %+v", psc, sc)
	}
	if !isTrue(psc.RunAsNonRoot) || !isTrue(sc.RunAsNonRoot) {
		t.Error("runAsNonRoot not set on the pod and the container")
	}
	for _, uid := range []*int64{psc.RunAsUser, sc.RunAsUser} {
		if uid == nil || *uid != 65532 {
			t.Errorf("runAsUser %v, want 65532 (the image's nonroot user)", uid)
		}
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp profile %+v, want RuntimeDefault", psc.SeccompProfile)
	}
	if psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("fsGroup %v, want 65532 so that the data volume is writable", psc.FSGroup)
	}
	if volumeMountAt(c, "/tmp") == nil {
		t.Error("no writable volume at /tmp under the read-only root filesystem")
	}
	if isTrue(pod.AutomountServiceAccountToken) || pod.AutomountServiceAccountToken == nil {
		t.Error("the service account token is mounted; schedulerd does not call the Kubernetes API")
	}

	// Every SCHEDULER_* variable is a setting schedulerd reads.
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "SCHEDULER_") && !slices.Contains(app.EnvVars(), e.Name) {
			t.Errorf("env %s is no setting of schedulerd", e.Name)
		}
	}

	// Secrets reach the container only by reference.
	if len(c.EnvFrom) != 0 {
		t.Errorf("envFrom %+v: every variable must be listed", c.EnvFrom)
	}
	for _, e := range c.Env {
		if slices.Contains(secretEnv, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("env %s = %+v, want only valueFrom.secretKeyRef", e.Name, e)
		}
	}

	cfg := m.config(t, existing)

	// Grace period: the preStop wait, then the whole -shutdown-timeout, then 5s to exit.
	var preStop int64
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("lifecycle %+v, want a preStop sleep (the image has no shell)", c.Lifecycle)
	} else {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	want := preStop + int64(cfg.ShutdownTimeout/time.Second) + 5
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != want {
		t.Errorf("terminationGracePeriodSeconds %s, want %d (preStop %ds + shutdown timeout %s + 5s)", ptrString(g), want, preStop, cfg.ShutdownTimeout)
	}

	// The API listens on the container port, and the other instances reach
	// this pod at its own address.
	if cfg.ListenAddr != fmt.Sprintf(":%d", port.ContainerPort) {
		t.Errorf("listen address %q, want :%d", cfg.ListenAddr, port.ContainerPort)
	}
	if podIP := envVar(c, "POD_IP"); podIP == nil || podIP.ValueFrom == nil || podIP.ValueFrom.FieldRef == nil || podIP.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env POD_IP = %+v, want the downward API's status.podIP", podIP)
	}
	if want := fmt.Sprintf("http://%s:%d", testPodIP, port.ContainerPort); cfg.AdvertiseURL != want {
		t.Errorf("advertise URL %q, want %q (the pod's address, defined before it is referred to)", cfg.AdvertiseURL, want)
	}

	api := m.apiService(t)
	var headless *corev1.Service
	for _, s := range objectsOf[*corev1.Service](m) {
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = s
		}
	}
	if headless == nil {
		t.Fatal("no headless Service")
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("headless Service leaves out pods that are not ready")
	}
	if pod.Subdomain != headless.Name {
		t.Errorf("pod subdomain %q, want the headless Service %q", pod.Subdomain, headless.Name)
	}
	for _, s := range []*corev1.Service{api, headless} {
		if !selectorMatches(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, d.Spec.Template.Labels) || len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, d.Spec.Template.Labels)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != port.Name {
			t.Errorf("Service %s ports %+v, want one to the http port", s.Name, s.Spec.Ports)
		}
	}
	if want := fmt.Sprintf("http://%s.sched.svc.cluster.local:%d", api.Name, api.Spec.Ports[0].Port); cfg.PublicURL != want {
		t.Errorf("public URL %q, want the API Service %q", cfg.PublicURL, want)
	}

	for _, p := range objectsOf[*policyv1.PodDisruptionBudget](m) {
		if !selectorMatches(p.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("PodDisruptionBudget selects %v, not the pods", p.Spec.Selector)
		}
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() < 1 {
			t.Errorf("PodDisruptionBudget maxUnavailable %v: a node drain could never evict the pod", p.Spec.MaxUnavailable)
		}
	}
}

func container(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	return &cs[0]
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func volumeMountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if filepath.Clean(c.VolumeMounts[i].MountPath) == filepath.Clean(path) {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func podVolume(d *appsv1.Deployment, name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

func selectorMatches(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && sel != nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

// envRef is a $(VAR) reference in a container's env value.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandEnvRefs replaces $(VAR) references to variables defined before, as
// the kubelet does; a reference to an undefined variable stays as it is.
func expandEnvRefs(v string, defined map[string]string) string {
	return envRef.ReplaceAllStringFunc(v, func(ref string) string {
		if val, ok := defined[envRef.FindStringSubmatch(ref)[1]]; ok {
			return val
		}
		return ref
	})
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func isTrue(b *bool) bool { return b != nil && *b }

// helmBinary returns a helm v3 binary: $SCHEDULERD_HELM, else helmModule
// built by the go command. go run keeps the executables it builds in the
// build cache (a build of helm takes minutes, a cached one a second); with
// -exec cp it copies the executable into a temporary directory instead of
// running it, before go run removes its own.
func helmBinary(t *testing.T) helm {
	t.Helper()
	home := t.TempDir()
	if p := os.Getenv("SCHEDULERD_HELM"); p != "" {
		return helm{path: p, home: home}
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build %s with: %v", helmModule, err)
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		t.Fatalf("no cp command to take the built helm with: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "helm")
	cmd := exec.Command(gocmd, "run", "-exec", cp, helmModule, path)
	cmd.Dir = dir // outside this module: helm's own go.mod decides its dependencies
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run %s: %v\n%s", helmModule, err, out)
	}
	h := helm{path: path, home: home}
	if v, err := h.run("version", "--short"); err != nil || !strings.HasPrefix(v, "v3.") {
		t.Fatalf("%s version: %q, %v", h.path, v, err)
	}
	return h
}

// helm runs a helm binary with its configuration, cache and data in home, so
// that the machine's repositories and plugins stay out.
type helm struct {
	path, home string
}

// run returns helm's standard output; its error carries the standard error.
func (h helm) run(args ...string) (string, error) {
	cmd := exec.Command(h.path, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+h.home, "HELM_CACHE_HOME="+h.home, "HELM_DATA_HOME="+h.home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", args[0], err, stderr.String())
	}
	return string(out), nil
}
