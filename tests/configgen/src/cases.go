package main

// Case is one named set of `talosctl gen config` options. It is written as case.json beside the
// generated configs; the Python renderer builds its spec from it.
type Case struct {
	Name        string `json:"name"`
	Description string `json:"description"`

	ClusterName       string `json:"cluster_name"`
	Endpoint          string `json:"endpoint"`
	KubernetesVersion string `json:"kubernetes_version"`

	InstallDisk  string `json:"install_disk"`
	InstallImage string `json:"install_image"`
	InstallWipe  bool   `json:"install_wipe"`

	CertSANs        []string                  `json:"cert_sans"`
	RegistryMirrors map[string]RegistryMirror `json:"registry_mirrors"`
	Sysctls         map[string]string         `json:"sysctls"`
	KernelModules   []string                  `json:"kernel_modules"`

	KubePrism         KubePrism        `json:"kubeprism"`
	KubeProxyDisabled bool             `json:"kube_proxy_disabled"`
	CNI               CNI              `json:"cni"`
	InlineManifests   []InlineManifest `json:"inline_manifests"`
	PodSubnets        []string         `json:"pod_subnets"`
	ServiceSubnets    []string         `json:"service_subnets"`
	DNSDomain         string           `json:"dns_domain"`

	// ClusterFields and MachineFields are the typed spec fields of the cases in cases_fields.go, in the Python
	// spec's shape, with the values the generated configs hold; absent from every other case.
	ClusterFields *ClusterFields       `json:"cluster_fields,omitempty"`
	MachineFields *MachineFieldsByRole `json:"machine_fields,omitempty"`

	// Filled in by the generator.
	Contract         string        `json:"contract"`
	TalosVersion     string        `json:"talos_version"`
	MachineryVersion string        `json:"machinery_version"`
	Generator        string        `json:"generator"`
	GenOptions       []string      `json:"gen_options"`
	Patches          []PatchRecord `json:"patches"`
	Comments         string        `json:"comments"`
	UpgradedBy       string        `json:"upgraded_by,omitempty"`

	// Unrepresentable lists what the config states that no spec field holds (cases made to test the
	// drift rule, see cases_extra.go); empty for the cases a spec reproduces.
	Unrepresentable []string `json:"unrepresentable,omitempty"`

	// extraPatches adds the patches of a case that sets what case.json's fields cannot say.
	extraPatches func(c *Case, contract string, typed bool) []PatchRecord

	// kubernetesVersionOlder selects the contract's default Kubernetes minor minus one.
	kubernetesOlder bool
	// mirrorOrder keeps the order of registry mirror options stable.
	mirrorOrder []string
}

// RegistryMirror is one registry host's mirror configuration.
type RegistryMirror struct {
	Endpoints    []string `json:"endpoints"`
	OverridePath bool     `json:"override_path"`
	SkipFallback bool     `json:"skip_fallback"`
}

// KubePrism is the KubePrism setting.
type KubePrism struct {
	Enabled bool `json:"enabled"`
	Port    int  `json:"port"`
}

// CNI is the cluster CNI selection: flannel (Talos default), none, or custom with manifest URLs.
type CNI struct {
	Name string   `json:"name"`
	URLs []string `json:"urls"`
}

// InlineManifest is one cluster inline manifest.
type InlineManifest struct {
	Name     string `json:"name"`
	Contents string `json:"contents"`
}

const ciliumManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: cilium
  namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: kube-system
  labels:
    k8s-app: cilium
spec:
  selector:
    matchLabels:
      k8s-app: cilium
  template:
    metadata:
      labels:
        k8s-app: cilium
    spec:
      serviceAccountName: cilium
      hostNetwork: true
      containers:
        - name: cilium-agent
          image: quay.io/cilium/cilium:v1.19.10
          command:
            - cilium-agent
          args:
            - --config-dir=/tmp/cilium/config-map
`

const otherManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: platform-extras
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-info-extra
  namespace: platform-extras
data:
  owner: platform-team
`

// k8sDefaults is the Kubernetes version each contract's talosctl defaults to, and the one before.
var k8sDefaults = map[string][2]string{
	"v1.12": {"1.35.4", "1.34.12"},
	"v1.13": {"1.36.3", "1.35.4"},
	"v1.14": {"1.37.0", "1.36.3"},
}

// baseCase is what `talosctl gen config NAME ENDPOINT` gives without options (flannel, KubePrism on
// port 7445, kube-proxy on, default subnets, install disk /dev/sda).
func baseCase(name, description string) Case {
	return Case{
		Name:            name,
		Description:     description,
		ClusterName:     name,
		Endpoint:        "https://" + name + ".example.com:6443",
		InstallDisk:     "/dev/sda",
		CertSANs:        []string{},
		RegistryMirrors: map[string]RegistryMirror{},
		Sysctls:         map[string]string{},
		KernelModules:   []string{},
		KubePrism:       KubePrism{Enabled: true, Port: 7445},
		CNI:             CNI{Name: "flannel", URLs: []string{}},
		InlineManifests: []InlineManifest{},
		PodSubnets:      []string{"10.244.0.0/16"},
		ServiceSubnets:  []string{"10.96.0.0/12"},
		DNSDomain:       "cluster.local",
	}
}

// caseMatrix returns the named cases; every contract gets all of them.
func caseMatrix() []Case {
	var cases []Case

	add := func(c Case, mutate func(c *Case)) {
		if mutate != nil {
			mutate(&c)
		}

		cases = append(cases, c)
	}

	add(baseCase("basic", "talosctl gen config defaults, endpoint given as an IP"), func(c *Case) {
		c.Endpoint = "https://10.5.0.2:6443"
	})
	add(baseCase("install-custom", "install disk, factory image and wipe"), func(c *Case) {
		c.InstallDisk = "/dev/nvme0n1"
		c.InstallImage = "factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:{{TALOS}}"
		c.InstallWipe = true
	})
	add(baseCase("k8s-older", "Kubernetes one minor below the contract's talosctl default"), func(c *Case) {
		c.kubernetesOlder = true
	})
	add(baseCase("cert-sans", "additional SANs (talosctl --additional-sans)"), func(c *Case) {
		c.CertSANs = []string{"lb.cert-sans.example.com", "10.5.0.100"}
	})
	add(baseCase("mirrors-plain", "registry mirrors as talosctl --registry-mirror writes them"), func(c *Case) {
		c.RegistryMirrors = map[string]RegistryMirror{
			"docker.io": {Endpoints: []string{"https://mirror.example.com/v2/docker.io"}},
			"ghcr.io":   {Endpoints: []string{"https://ghcr-mirror-a.example.com", "https://ghcr-mirror-b.example.com"}},
		}
		c.mirrorOrder = []string{"docker.io", "ghcr.io"}
	})
	add(baseCase("mirrors-override", "registry mirrors with overridePath and skipFallback (config patch)"), func(c *Case) {
		c.RegistryMirrors = map[string]RegistryMirror{
			"docker.io":       {Endpoints: []string{"https://harbor.example.com/v2/proxy-docker.io"}, OverridePath: true, SkipFallback: true},
			"registry.k8s.io": {Endpoints: []string{"https://harbor.example.com/v2/proxy-k8s"}, OverridePath: true},
			"quay.io":         {Endpoints: []string{"https://quay-mirror.example.com"}, SkipFallback: true},
		}
		c.mirrorOrder = []string{"docker.io", "quay.io", "registry.k8s.io"}
	})
	add(baseCase("sysctls-kmods", "sysctls and kernel modules"), func(c *Case) {
		c.Sysctls = map[string]string{"net.core.somaxconn": "65535", "vm.max_map_count": "262144"}
		c.KernelModules = []string{"br_netfilter", "nvme_tcp"}
	})
	add(baseCase("kubeprism-off", "KubePrism disabled"), func(c *Case) {
		c.KubePrism = KubePrism{Enabled: false, Port: 0}
	})
	add(baseCase("kubeprism-port", "KubePrism on port 7446"), func(c *Case) {
		c.KubePrism = KubePrism{Enabled: true, Port: 7446}
	})
	add(baseCase("kube-proxy-disabled", "kube-proxy disabled, CNI flannel"), func(c *Case) {
		c.KubeProxyDisabled = true
	})
	add(baseCase("cni-none", "CNI none"), func(c *Case) {
		c.CNI = CNI{Name: "none", URLs: []string{}}
	})
	add(baseCase("cni-custom", "CNI custom with a manifest URL"), func(c *Case) {
		c.CNI = CNI{Name: "custom", URLs: []string{"https://raw.githubusercontent.com/projectcalico/calico/v3.29.1/manifests/calico.yaml"}}
	})
	add(baseCase("cilium-inline", "Cilium as an inline manifest, CNI none, kube-proxy disabled"), func(c *Case) {
		c.CNI = CNI{Name: "none", URLs: []string{}}
		c.KubeProxyDisabled = true
		c.InlineManifests = []InlineManifest{{Name: "cilium", Contents: ciliumManifest}}
	})
	add(baseCase("inline-other", "a non-Cilium inline manifest next to flannel"), func(c *Case) {
		c.InlineManifests = []InlineManifest{{Name: "platform-extras", Contents: otherManifest}}
	})
	add(baseCase("subnets", "custom pod and service subnets"), func(c *Case) {
		c.PodSubnets = []string{"10.32.0.0/12"}
		c.ServiceSubnets = []string{"10.112.0.0/12"}
	})
	add(baseCase("kitchen-sink", "many options together, as a Cilium-on-Talos production cluster"), func(c *Case) {
		c.Endpoint = "https://api.kitchen-sink.example.com:443"
		c.InstallDisk = "/dev/vda"
		c.InstallWipe = true
		c.CertSANs = []string{"api.kitchen-sink.example.com", "192.168.10.10"}
		c.RegistryMirrors = map[string]RegistryMirror{
			"docker.io": {Endpoints: []string{"https://harbor.example.com/v2/proxy-docker.io"}, OverridePath: true, SkipFallback: true},
			"ghcr.io":   {Endpoints: []string{"https://ghcr-mirror-a.example.com"}},
		}
		c.mirrorOrder = []string{"docker.io", "ghcr.io"}
		c.Sysctls = map[string]string{"net.ipv4.ip_forward": "1", "fs.inotify.max_user_watches": "1048576"}
		c.KernelModules = []string{"nvme_tcp"}
		c.KubePrism = KubePrism{Enabled: true, Port: 7446}
		c.KubeProxyDisabled = true
		c.CNI = CNI{Name: "none", URLs: []string{}}
		c.InlineManifests = []InlineManifest{
			{Name: "cilium", Contents: ciliumManifest},
			{Name: "platform-extras", Contents: otherManifest},
		}
		c.PodSubnets = []string{"10.200.0.0/16"}
		c.ServiceSubnets = []string{"10.201.0.0/16"}
	})

	cases = append(cases, extraCases()...)
	cases = append(cases, fieldCases()...)

	return cases
}
