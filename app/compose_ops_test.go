package app_test

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestDockerComposeRunsUnattended checks, without a Docker engine, what
// `docker compose up` needs to work end to end: the SQS queue of the example
// exists, every service comes back after a crash or a reboot, and the
// release URLs in deliveries reach the instance from the consumer container.
func TestDockerComposeRunsUnattended(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Restart     string            `yaml:"restart"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			Networks    any               `yaml:"networks"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}

	t.Run("RestartPolicies", func(t *testing.T) {
		for name, svc := range compose.Services {
			if !slices.Contains([]string{"always", "unless-stopped", "on-failure"}, svc.Restart) {
				t.Errorf("service %s: restart %q; it would stay down after a crash", name, svc.Restart)
			}
		}
	})

	t.Run("SQSQueueExists", func(t *testing.T) {
		sqs, ok := compose.Services["sqs"]
		if !ok {
			t.Fatal("no sqs service")
		}
		var conf string
		for _, v := range sqs.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == "/opt/elasticmq.conf" {
				conf = parts[0]
			}
		}
		if conf == "" {
			t.Fatalf("the sqs service mounts no /opt/elasticmq.conf (volumes %v), so it starts with no queue", sqs.Volumes)
		}
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(conf)))
		if err != nil {
			t.Fatalf("the sqs service's configuration: %v", err)
		}
		queues := elasticMQQueues(string(b))
		if len(queues) == 0 {
			t.Fatalf("%s declares no queue", conf)
		}
		// Every queue URL the compose file tells users about exists.
		urls := regexp.MustCompile(`http://sqs:9324/\d{12}/([A-Za-z0-9_.-]+)`).FindAllStringSubmatch(string(raw), -1)
		if len(urls) == 0 {
			t.Errorf("docker-compose.yml does not say which queue URL to use (queues: %v)", queues)
		}
		for _, m := range urls {
			if !slices.Contains(queues, m[1]) {
				t.Errorf("docker-compose.yml names queue %s, which %s does not create (it creates %v)", m[1], conf, queues)
			}
		}
	})

	t.Run("ReleaseURLsReachableFromConsumer", func(t *testing.T) {
		if _, ok := compose.Services["consumer"]; !ok {
			t.Fatal("no consumer service")
		}
		for name, svc := range compose.Services {
			if !strings.HasPrefix(name, "schedulerd") {
				continue
			}
			if svc.Networks != nil || compose.Services["consumer"].Networks != nil {
				t.Errorf("service %s or the consumer sets networks; this test assumes the default network", name)
			}
			u, err := url.Parse(svc.Environment["SCHEDULER_PUBLIC_URL"])
			if err != nil || u.Scheme != "http" || u.Host == "" {
				t.Errorf("service %s: SCHEDULER_PUBLIC_URL %q is not an http URL", name, svc.Environment["SCHEDULER_PUBLIC_URL"])
				continue
			}
			// Inside the compose network a service is reached by its
			// name and its container port, not by localhost or a
			// published port.
			if u.Hostname() != name {
				t.Errorf("service %s: SCHEDULER_PUBLIC_URL host %q; the consumer container reaches this instance as %q", name, u.Hostname(), name)
			}
			_, port, err := net.SplitHostPort(svc.Environment["SCHEDULER_LISTEN_ADDR"])
			if err != nil || u.Port() != port {
				t.Errorf("service %s: SCHEDULER_PUBLIC_URL port %q, but it listens on %q", name, u.Port(), svc.Environment["SCHEDULER_LISTEN_ADDR"])
			}
		}
	})
}

// elasticMQQueues returns the names declared in the queues block of an
// ElasticMQ (HOCON) configuration.
func elasticMQQueues(conf string) []string {
	var names []string
	depth, inQueues := 0, false
	for _, line := range strings.Split(conf, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "//") {
			continue
		}
		if depth == 0 && strings.HasPrefix(line, "queues") && strings.HasSuffix(line, "{") {
			inQueues, depth = true, 1
			continue
		}
		if inQueues && depth == 1 {
			if name, ok := strings.CutSuffix(line, "{}"); ok {
				names = append(names, strings.Trim(strings.TrimSpace(name), `"`))
				continue
			}
			if name, ok := strings.CutSuffix(line, "{"); ok {
				names = append(names, strings.Trim(strings.TrimSpace(name), `"`))
			}
		}
		if inQueues {
			depth += strings.Count(line, "{") - strings.Count(line, "}")
			if depth == 0 {
				inQueues = false
			}
		}
	}
	return names
}
