package app_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/schedulerd/schedulerd/app"
)

// TestDockerCompose keeps docker-compose.yml honest without a Docker engine:
// every variable it gives a schedulerd instance is one the binary reads (or
// one the AWS SDK's default credential chain reads), and together they make
// a configuration the binary accepts.
func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build       any               `yaml:"build"`
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			DependsOn   any               `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	known := app.EnvVars()
	instances := 0
	for name, svc := range compose.Services {
		if svc.Build == nil && svc.Image == "" {
			t.Errorf("service %s has neither build nor image", name)
		}
		if !strings.HasPrefix(name, "schedulerd") {
			continue
		}
		instances++
		t.Run(name, func(t *testing.T) {
			for k := range svc.Environment {
				if strings.HasPrefix(k, "AWS_") {
					continue // read by the AWS SDK's default credential chain
				}
				if !slices.Contains(known, k) {
					t.Errorf("sets %s, which schedulerd does not read (known: %s)", k, strings.Join(known, ", "))
				}
			}
			if svc.Environment["SCHEDULER_STORE"] != "mongo" {
				t.Errorf("SCHEDULER_STORE = %q; instances sharing data must use mongo", svc.Environment["SCHEDULER_STORE"])
			}
			if _, err := app.ParseConfig(nil, func(k string) string { return svc.Environment[k] }); err != nil {
				t.Errorf("its environment is rejected: %v", err)
			}
		})
	}
	if instances < 2 {
		t.Errorf("%d schedulerd instances, want at least 2", instances)
	}
	for _, want := range []string{"mongo", "sqs", "consumer"} {
		if _, ok := compose.Services[want]; !ok {
			t.Errorf("no %s service", want)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "examples", "consumer", "main.go")); err != nil {
		t.Errorf("the consumer service builds ./examples/consumer: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	t.Run("DefaultsStartEmbedded", func(t *testing.T) {
		c, err := app.ParseConfig(nil, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Store != "embedded" || c.DataDir != "./data" || c.ListenAddr != "127.0.0.1:8080" {
			t.Errorf("defaults: store %q dir %q listen %q", c.Store, c.DataDir, c.ListenAddr)
		}
	})
	t.Run("FlagsWinOverEnvironment", func(t *testing.T) {
		c, err := app.ParseConfig([]string{"-shards", "8"}, env(map[string]string{"SCHEDULER_SHARDS": "4", "SCHEDULER_PARTITIONS": "2"}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Shards != 8 || c.Partitions != 2 {
			t.Errorf("shards %d partitions %d", c.Shards, c.Partitions)
		}
	})
	t.Run("EmitBackgroundAbove", func(t *testing.T) {
		c, err := app.ParseConfig(nil, env(nil))
		if err != nil || c.BackgroundAbove != 10000 {
			t.Fatalf("default background threshold %d, err %v; want 10000", c.BackgroundAbove, err)
		}
		c, err = app.ParseConfig(nil, env(map[string]string{"SCHEDULER_EMIT_BACKGROUND_ABOVE": "500"}))
		if err != nil || c.BackgroundAbove != 500 {
			t.Fatalf("background threshold from the environment %d, err %v; want 500", c.BackgroundAbove, err)
		}
	})
	t.Run("EmitBackgroundChunk", func(t *testing.T) {
		c, err := app.ParseConfig(nil, env(nil))
		if err != nil || c.BackgroundChunk != 5000 {
			t.Fatalf("default background chunk %d, err %v; want 5000", c.BackgroundChunk, err)
		}
		c, err = app.ParseConfig([]string{"-emit-background-chunk", "250"}, env(nil))
		if err != nil || c.BackgroundChunk != 250 {
			t.Fatalf("background chunk from the flag %d, err %v; want 250", c.BackgroundChunk, err)
		}
	})
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"RejectsUnknownStore":        {env: map[string]string{"SCHEDULER_STORE": "redis"}, want: "store:"},
		"MongoNeedsURI":              {env: map[string]string{"SCHEDULER_STORE": "mongo"}, want: "mongo-uri:"},
		"MongoNeedsAdminKey":         {env: map[string]string{"SCHEDULER_STORE": "mongo", "SCHEDULER_MONGO_URI": "mongodb://x"}, want: "admin-key:"},
		"RejectsBadDuration":         {args: []string{"-lead", "soon"}, want: "lead:"},
		"RejectsLeadBelowWindow":     {args: []string{"-window", "2m", "-lead", "1m"}, want: "lead:"},
		"RejectsZeroShards":          {args: []string{"-shards", "0"}, want: "shards:"},
		"RejectsBadCIDR":             {env: map[string]string{"SCHEDULER_HTTP_DENY_CIDRS": "10.0.0.0/8,nope"}, want: "http-deny-cidrs:"},
		"RejectsBadLogLevel":         {args: []string{"-log-level", "loud"}, want: "log-level:"},
		"RejectsStrayArgument":       {args: []string{"serve"}, want: "unexpected argument"},
		"RejectsNegativeRateLimit":   {args: []string{"-rate-limit", "-1"}, want: "rate-limit:"},
		"RejectsZeroBackgroundAbove": {args: []string{"-emit-background-above", "0"}, want: "emit-background-above:"},
		"RejectsZeroBackgroundChunk": {args: []string{"-emit-background-chunk", "0"}, want: "emit-background-chunk:"},
		"RejectsHugeBackgroundChunk": {env: map[string]string{"SCHEDULER_EMIT_BACKGROUND_CHUNK": "100001"}, want: "emit-background-chunk:"},
		"RejectsZeroTenantQuota":     {args: []string{"-tenant-max-events-stored", "0"}, want: "tenant-max-events-stored:"},
		"RejectsHugePerFireQuota":    {args: []string{"-tenant-max-events-per-fire", "2000000"}, want: "tenant-max-events-per-fire:"},
		"RejectsDiskPercentOver":     {env: map[string]string{"SCHEDULER_DISK_MIN_FREE_PERCENT": "150"}, want: "disk-min-free-percent:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := app.ParseConfig(tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestREADMEDocumentsEveryVariable keeps the README's configuration table in
// step with the binary.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range app.Options() {
		row := "| `-" + o.Flag + "` | `" + o.Env + "` |"
		if !strings.Contains(string(raw), row) {
			t.Errorf("README.md has no configuration row for -%s / %s", o.Flag, o.Env)
		}
	}
}
