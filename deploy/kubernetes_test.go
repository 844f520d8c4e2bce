package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The parts of the Kubernetes objects the manifests' checks read.
type (
	object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec yaml.Node         `yaml:"spec"`
	}
	deploymentSpec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		InitContainers []container `yaml:"initContainers"`
		Containers     []container `yaml:"containers"`
		Volumes        []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
				Items      []struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				} `yaml:"items"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	}
	container struct {
		Name          string   `yaml:"name"`
		Image         string   `yaml:"image"`
		RestartPolicy string   `yaml:"restartPolicy"`
		Args          []string `yaml:"args"`
		Env           []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	serviceSpec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	}
)

// readManifests decodes every YAML document of the files in kubernetes/.
func readManifests(t *testing.T) map[string][]object {
	files, err := filepath.Glob("kubernetes/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	all := map[string][]object{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(text))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			require.NotEmpty(t, o.APIVersion, "%s: a document without apiVersion", f)
			require.NotEmpty(t, o.Kind, "%s: a document without kind", f)
			require.NotEmpty(t, o.Metadata.Name, "%s: a %s without a name", f, o.Kind)
			all[filepath.Base(f)] = append(all[filepath.Base(f)], o)
		}
	}
	return all
}

// TestKubernetesManifests checks what a cluster would check first, as far
// as it can without one (none here): every document names its API, kind
// and name; a Deployment's selector matches its pods, a Service's selector
// some Deployment's pods and its targetPort a port of theirs; every mount
// names a volume and every configMap volume a ConfigMap of the folder. For
// twinloop-tls.yaml, that its HAProxy configuration is
// deploy/haproxy-tls.cfg (which TestOpsTLSEdge runs) and that the sidecar's
// environment points it at twinloop's --listen and --metrics ports.
func TestKubernetesManifests(t *testing.T) {
	manifests := readManifests(t)
	configMaps := map[string]map[string]string{}
	pods := map[string]podSpec{} // by the Deployment's name
	podLabels := map[string]map[string]string{}
	for _, objs := range manifests {
		for _, o := range objs {
			if o.Kind == "ConfigMap" {
				configMaps[o.Metadata.Name] = o.Data
			}
		}
	}
	for file, objs := range manifests {
		for _, o := range objs {
			switch o.Kind {
			case "Deployment":
				var s deploymentSpec
				require.NoError(t, o.Spec.Decode(&s), file)
				require.NotEmpty(t, s.Selector.MatchLabels, "%s: %s selects nothing", file, o.Metadata.Name)
				for k, v := range s.Selector.MatchLabels {
					require.Equal(t, v, s.Template.Metadata.Labels[k], "%s: %s's selector does not match its pods", file, o.Metadata.Name)
				}
				pod := s.Template.Spec
				volumes := map[string]bool{}
				for _, v := range pod.Volumes {
					volumes[v.Name] = true
					if v.ConfigMap != nil {
						require.Contains(t, configMaps, v.ConfigMap.Name, "%s: volume %s", file, v.Name)
					}
				}
				for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
					require.NotEmpty(t, c.Image, "%s: container %s", file, c.Name)
					for _, m := range c.VolumeMounts {
						require.True(t, volumes[m.Name], "%s: container %s mounts %s, which is no volume", file, c.Name, m.Name)
					}
				}
				pods[o.Metadata.Name] = pod
				podLabels[o.Metadata.Name] = s.Template.Metadata.Labels
			}
		}
	}
	for file, objs := range manifests {
		for _, o := range objs {
			if o.Kind != "Service" {
				continue
			}
			var s serviceSpec
			require.NoError(t, o.Spec.Decode(&s), file)
			var pod *podSpec
			for name, labels := range podLabels {
				if len(s.Selector) > 0 && matches(s.Selector, labels) {
					p := pods[name]
					pod = &p
				}
			}
			require.NotNil(t, pod, "%s: Service %s selects no Deployment's pods", file, o.Metadata.Name)
			for _, p := range s.Ports {
				_, ok := containerPort(*pod, p.TargetPort)
				require.True(t, ok, "%s: Service %s's targetPort %s is no port of its pods", file, o.Metadata.Name, p.TargetPort)
			}
		}
	}

	// The TLS sidecar.
	cfg, err := os.ReadFile("haproxy-tls.cfg")
	require.NoError(t, err)
	require.Equal(t, string(cfg), configMaps["twinloop-haproxy"]["haproxy.cfg"],
		"kubernetes/twinloop-tls.yaml's ConfigMap differs from haproxy-tls.cfg: copy it there")
	pod, ok := pods["twinloop-tls"]
	require.True(t, ok, "twinloop-tls.yaml has no Deployment twinloop-tls")
	require.Len(t, pod.InitContainers, 1)
	haproxy := pod.InitContainers[0]
	require.Equal(t, "Always", haproxy.RestartPolicy, "HAProxy runs as a native sidecar")
	env := map[string]string{}
	for _, e := range haproxy.Env {
		env[e.Name] = e.Value
	}
	for _, name := range []string{"TLS_BIND", "TLS_CERT", "TWINLOOP_ADDR", "TWINLOOP_CHECK_PORT"} {
		require.Contains(t, string(cfg), "presetenv "+name+" ", "haproxy-tls.cfg reads %s", name)
		require.NotEmpty(t, env[name], "the sidecar sets %s", name)
	}
	require.Len(t, pod.Containers, 1)
	twinloop := pod.Containers[0]
	require.Contains(t, twinloop.Args, "--listen="+env["TWINLOOP_ADDR"], "HAProxy forwards to twinloop's --listen")
	require.Contains(t, twinloop.Args, "--proxy-protocol")
	require.Contains(t, twinloop.Args, "--proxy-from=127.0.0.1/32")
	metrics, ok := containerPort(pod, "metrics")
	require.True(t, ok)
	require.Equal(t, env["TWINLOOP_CHECK_PORT"], strconv.Itoa(metrics), "HAProxy checks twinloop's --metrics port")
	require.Contains(t, twinloop.Args, "--metrics=0.0.0.0:"+strconv.Itoa(metrics))
	https, ok := containerPort(pod, "https")
	require.True(t, ok)
	require.Equal(t, ":"+strconv.Itoa(https), env["TLS_BIND"])

	// The certificate: a Secret's tls.crt and tls.key, mounted where
	// TLS_CERT and TLS_CERT.key name them.
	certDir, certFile := filepath.Split(env["TLS_CERT"])
	var tlsVolume string
	for _, m := range haproxy.VolumeMounts {
		if filepath.Clean(m.MountPath) == filepath.Clean(certDir) {
			tlsVolume = m.Name
		}
	}
	require.NotEmpty(t, tlsVolume, "nothing mounted at TLS_CERT's folder %s", certDir)
	for _, v := range pod.Volumes {
		if v.Name != tlsVolume {
			continue
		}
		require.NotNil(t, v.Secret, "volume %s is a Secret", v.Name)
		paths := map[string]string{}
		for _, it := range v.Secret.Items {
			paths[it.Key] = it.Path
		}
		require.Equal(t, map[string]string{"tls.crt": certFile, "tls.key": certFile + ".key"}, paths)
	}
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort finds a named port of a pod's containers, sidecars
// included; a number names itself.
func containerPort(pod podSpec, name string) (int, bool) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, true
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}
