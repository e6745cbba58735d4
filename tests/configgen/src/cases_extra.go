package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"time"
)

// Cases that state what no spec field holds, made to test the drift rule (every differing leaf is
// reported with a class, or the apply is refused) and the list of secret paths. A spec cannot reproduce
// them: case.json's "unrepresentable" says what it lacks, and the zero-drift tests leave them out.
func extraCases() []Case {
	var cases []Case

	add := func(c Case, unrepresentable []string, patches func(c *Case, contract string, typed bool) []PatchRecord) {
		c.Unrepresentable = unrepresentable
		c.extraPatches = patches
		cases = append(cases, c)
	}

	add(baseCase("worker-label-empty", "a worker node label with an empty value (node-role.kubernetes.io/worker: \"\")"),
		[]string{"node label node-role.kubernetes.io/worker on workers"},
		func(_ *Case, _ string, typed bool) []PatchRecord {
			if typed {
				return []PatchRecord{{Target: "worker", Patch: "apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  node-role.kubernetes.io/worker: \"\"\n"}}
			}

			return []PatchRecord{{Target: "worker", Patch: "machine:\n  nodeLabels:\n    node-role.kubernetes.io/worker: \"\"\n"}}
		})

	add(baseCase("luks-legacy", "system disk encryption in the legacy form: nodeID and tpm key slots ({}) and a static passphrase"),
		[]string{"machine.systemDiskEncryption"},
		func(_ *Case, _ string, _ bool) []PatchRecord {
			return []PatchRecord{{Target: "all", Patch: "machine:\n  systemDiskEncryption:\n" +
				"    state:\n      provider: luks2\n      keys:\n        - slot: 0\n          nodeID: {}\n" +
				"    ephemeral:\n      provider: luks2\n      keys:\n        - slot: 0\n          static:\n            passphrase: " + randomWord(24) + "\n" +
				"        - slot: 1\n          tpm: {}\n"}}
		})

	add(baseCase("luks-volume", "STATE and EPHEMERAL encrypted by VolumeConfig: nodeID and tpm key slots ({}) and a static passphrase"),
		[]string{"VolumeConfig encryption"},
		func(_ *Case, _ string, _ bool) []PatchRecord {
			return []PatchRecord{{Target: "all", Patch: "apiVersion: v1alpha1\nkind: VolumeConfig\nname: STATE\nencryption:\n  provider: luks2\n" +
				"  keys:\n    - slot: 0\n      nodeID: {}\n    - slot: 1\n      tpm: {}\n" +
				"---\napiVersion: v1alpha1\nkind: VolumeConfig\nname: EPHEMERAL\nencryption:\n  provider: luks2\n" +
				"  keys:\n    - slot: 0\n      static:\n        passphrase: " + randomWord(24) + "\n"}}
		})

	add(baseCase("images-air-gapped", "every component image from a private registry (with a port) at the default version"),
		[]string{"component images from registry.corp.example:5000"},
		airGappedPatches)

	add(baseCase("images-digest", "every component image pinned by its tag and a sha256 digest (name:tag@sha256:...) at the default version"),
		[]string{"component images pinned by digest"},
		digestPatches)

	add(baseCase("k8s-upgrade-halfway", "a Kubernetes upgrade stopped halfway: the control-plane components at the default version, "+
		"every kubelet one minor behind"),
		[]string{"kubelets one minor behind the control-plane components"},
		func(c *Case, contract string, typed bool) []PatchRecord {
			kubelet := "ghcr.io/siderolabs/kubelet:v" + k8sDefaults[contract][1]
			if typed {
				return []PatchRecord{{Target: "all", Patch: "apiVersion: v1alpha1\nkind: KubeletConfig\nimage: " + kubelet + "\n"}}
			}

			return []PatchRecord{{Target: "all", Patch: "machine:\n  kubelet:\n    image: " + kubelet + "\n"}}
		})

	add(baseCase("mirrors-mixed", "a registry mirror whose endpoints mix overridePath"),
		[]string{"RegistryMirrorConfig docker.io with overridePath on one endpoint of two"},
		func(_ *Case, _ string, _ bool) []PatchRecord {
			return []PatchRecord{{Target: "all", Patch: "apiVersion: v1alpha1\nkind: RegistryMirrorConfig\nname: docker.io\nendpoints:\n" +
				"  - url: https://harbor.example.com/v2/proxy-docker.io\n    overridePath: true\n  - url: https://docker-mirror.example.com\n"}}
		})

	add(baseCase("network-content", "machine.network with content (an interface on DHCP): the legacy contracts v1.12 and v1.13 read alike"),
		[]string{"machine.network.interfaces"},
		func(_ *Case, _ string, _ bool) []PatchRecord {
			return []PatchRecord{{Target: "all", Patch: "machine:\n  network:\n    interfaces:\n      - interface: eth0\n        dhcp: true\n"}}
		})

	add(baseCase("secrets-legacy", "every secret field of the v1alpha1 document besides the bundle's"),
		[]string{"registry credentials and TLS", "wireguard and VIP API tokens", "machine.env", "extraManifestHeaders", "aescbcEncryptionSecret"},
		secretsLegacyPatches)

	add(baseCase("secrets-typed", "every secret field of typed documents besides the bundle's"),
		[]string{"RegistryAuthConfig", "RegistryTLSConfig", "WireguardConfig", "HCloudVIPConfig", "SideroLinkConfig",
			"UserVolumeConfig, RawVolumeConfig, SwapVolumeConfig encryption", "EnvironmentConfig", "ExtensionServiceConfig"},
		secretsTypedPatches)

	return cases
}

func airGappedPatches(c *Case, _ string, typed bool) []PatchRecord {
	reg := "registry.corp.example:5000"
	v := "v" + strings.TrimPrefix(c.KubernetesVersion, "v")
	image := func(name string) string { return reg + "/" + name + ":" + v }

	if typed {
		return []PatchRecord{
			{Target: "all", Patch: "apiVersion: v1alpha1\nkind: KubeletConfig\nimage: " + image("siderolabs/kubelet") + "\n"},
			{Target: "controlplane", Patch: "apiVersion: v1alpha1\nkind: KubeAPIServerConfig\nimage: " + image("kube-apiserver") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeControllerManagerConfig\nimage: " + image("kube-controller-manager") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeSchedulerConfig\nimage: " + image("kube-scheduler") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeProxyConfig\nimage: " + image("kube-proxy") + "\n"},
		}
	}

	return []PatchRecord{
		{Target: "all", Patch: "machine:\n  kubelet:\n    image: " + image("siderolabs/kubelet") + "\n"},
		{Target: "controlplane", Patch: "cluster:\n  apiServer:\n    image: " + image("kube-apiserver") + "\n" +
			"  controllerManager:\n    image: " + image("kube-controller-manager") + "\n" +
			"  scheduler:\n    image: " + image("kube-scheduler") + "\n" +
			"  proxy:\n    image: " + image("kube-proxy") + "\n"},
	}
}

// digestPatches pins each component image (the names talosctl writes) by its tag and a digest: a digest of the
// image's name, as good as any for a config (nothing pulls it here).
func digestPatches(c *Case, _ string, typed bool) []PatchRecord {
	v := "v" + strings.TrimPrefix(c.KubernetesVersion, "v")
	image := func(name string) string {
		sum := sha256.Sum256([]byte(name + ":" + v))

		return name + ":" + v + "@sha256:" + hex.EncodeToString(sum[:])
	}

	if typed {
		return []PatchRecord{
			{Target: "all", Patch: "apiVersion: v1alpha1\nkind: KubeletConfig\nimage: " + image("ghcr.io/siderolabs/kubelet") + "\n"},
			{Target: "controlplane", Patch: "apiVersion: v1alpha1\nkind: KubeAPIServerConfig\nimage: " + image("registry.k8s.io/kube-apiserver") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeControllerManagerConfig\nimage: " + image("registry.k8s.io/kube-controller-manager") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeSchedulerConfig\nimage: " + image("registry.k8s.io/kube-scheduler") + "\n" +
				"---\napiVersion: v1alpha1\nkind: KubeProxyConfig\nimage: " + image("registry.k8s.io/kube-proxy") + "\n"},
		}
	}

	return []PatchRecord{
		{Target: "all", Patch: "machine:\n  kubelet:\n    image: " + image("ghcr.io/siderolabs/kubelet") + "\n"},
		{Target: "controlplane", Patch: "cluster:\n  apiServer:\n    image: " + image("registry.k8s.io/kube-apiserver") + "\n" +
			"  controllerManager:\n    image: " + image("registry.k8s.io/kube-controller-manager") + "\n" +
			"  scheduler:\n    image: " + image("registry.k8s.io/kube-scheduler") + "\n" +
			"  proxy:\n    image: " + image("registry.k8s.io/kube-proxy") + "\n"},
	}
}

func secretsLegacyPatches(_ *Case, _ string, typed bool) []PatchRecord {
	cert, key := clientIdentity()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	all := "machine:\n" +
		"  env:\n    https_proxy: http://proxy-user:" + randomWord(16) + "@proxy.example.com:3128\n    no_proxy: .svc,.cluster.local\n" +
		"  registries:\n    config:\n" +
		"      ghcr.io:\n        auth:\n          username: robot\n          password: " + randomWord(24) + "\n" +
		"      quay.io:\n        auth:\n          auth: " + b64("robot:"+randomWord(16)) + "\n" +
		"      registry.corp.example:5000:\n        auth:\n          identityToken: " + randomWord(32) + "\n" +
		"        tls:\n          clientIdentity:\n            crt: " + b64(cert) + "\n            key: " + b64(key) + "\n" +
		"  network:\n    interfaces:\n" +
		"      - interface: wg0\n        addresses:\n          - 10.9.0.1/24\n        wireguard:\n          privateKey: " + wireguardKey() + "\n" +
		"          listenPort: 51820\n          peers:\n            - publicKey: " + wireguardKey() + "\n              endpoint: 192.168.1.2:51820\n" +
		"              allowedIPs:\n                - 10.9.0.2/32\n"

	patches := []PatchRecord{{Target: "all", Patch: all}}

	// shared (virtual) IPs are refused on workers
	cluster := "machine:\n  network:\n    interfaces:\n" +
		"      - interface: eth1\n        dhcp: true\n        vip:\n          ip: 192.168.1.50\n          hcloud:\n            apiToken: " + randomWord(32) + "\n" +
		"        vlans:\n          - vlanId: 100\n            dhcp: true\n            vip:\n              ip: 192.168.100.50\n" +
		"              equinixMetal:\n                apiToken: " + randomWord(32) + "\n" +
		"cluster:\n  extraManifestHeaders:\n    Authorization: Bearer " + randomWord(32) + "\n"
	if !typed {
		// at contract v1.14 the API server and the etcd encryption are typed documents (KubeAPIServerConfig,
		// KubeEtcdEncryptionConfig), which refuse these legacy fields
		cluster += "  apiServer:\n    env:\n      HTTPS_PROXY: http://proxy-user:" + randomWord(16) + "@proxy.example.com:3128\n" +
			"  aescbcEncryptionSecret: " + base64.StdEncoding.EncodeToString(randomBytes(32)) + "\n"
	}

	return append(patches, PatchRecord{Target: "controlplane", Patch: cluster})
}

func secretsTypedPatches(_ *Case, contract string, typed bool) []PatchRecord {
	cert, key := clientIdentity()
	indentPEM := func(s string) string { return indent(s, "    ") }

	docs := []string{
		"apiVersion: v1alpha1\nkind: RegistryAuthConfig\nname: ghcr.io\nusername: robot\npassword: " + randomWord(24) + "\n",
		"apiVersion: v1alpha1\nkind: RegistryAuthConfig\nname: quay.io\nauth: " + base64.StdEncoding.EncodeToString([]byte("robot:"+randomWord(16))) + "\n",
		"apiVersion: v1alpha1\nkind: RegistryAuthConfig\nname: registry.corp.example:5000\nidentityToken: " + randomWord(32) + "\n",
		"apiVersion: v1alpha1\nkind: RegistryTLSConfig\nname: registry.corp.example:5000\nclientIdentity:\n  cert: |\n" + indentPEM(cert) +
			"\n  key: |\n" + indentPEM(key) + "\n",
		"apiVersion: v1alpha1\nkind: WireguardConfig\nname: wg0\nprivateKey: " + wireguardKey() + "\nlistenPort: 51820\n" +
			"peers:\n  - publicKey: " + wireguardKey() + "\n    presharedKey: " + wireguardKey() + "\n    endpoint: 192.168.1.2:51820\n" +
			"    allowedIPs:\n      - 10.9.0.2/32\naddresses:\n  - address: 10.9.0.1/24\n",
		"apiVersion: v1alpha1\nkind: HCloudVIPConfig\nname: 192.168.1.50\nlink: eth1\napiToken: " + randomWord(32) + "\n",
		"apiVersion: v1alpha1\nkind: SideroLinkConfig\napiUrl: https://siderolink.example.com:8099?jointoken=" + randomWord(32) + "\n" +
			"uniqueToken: " + randomWord(32) + "\n",
		"apiVersion: v1alpha1\nkind: UserVolumeConfig\nname: data\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == \"/dev/sdb\"\n" +
			"  minSize: 10GiB\nencryption:\n  provider: luks2\n  keys:\n    - slot: 0\n      static:\n        passphrase: " + randomWord(24) + "\n",
		"apiVersion: v1alpha1\nkind: RawVolumeConfig\nname: scratch\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == \"/dev/sdc\"\n" +
			"  minSize: 1GiB\nencryption:\n  provider: luks2\n  keys:\n    - slot: 0\n      static:\n        passphrase: " + randomWord(24) + "\n",
		"apiVersion: v1alpha1\nkind: SwapVolumeConfig\nname: swap1\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == \"/dev/sdd\"\n" +
			"  minSize: 1GiB\nencryption:\n  provider: luks2\n  keys:\n    - slot: 0\n      static:\n        passphrase: " + randomWord(24) + "\n",
		"apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: proxy-agent\nenvironment:\n  - TOKEN=" + randomWord(24) + "\n",
	}

	if contract != "v1.12" {
		docs = append(docs, "apiVersion: v1alpha1\nkind: EnvironmentConfig\nvariables:\n  https_proxy: http://proxy-user:"+randomWord(16)+
			"@proxy.example.com:3128\n")
	}

	patches := []PatchRecord{{Target: "all", Patch: strings.Join(docs, "---\n")}}

	if typed {
		patches = append(patches, PatchRecord{Target: "controlplane", Patch: "apiVersion: v1alpha1\nkind: KubeAPIServerConfig\nenv:\n" +
			"  HTTPS_PROXY: http://proxy-user:" + randomWord(16) + "@proxy.example.com:3128\n" +
			"---\napiVersion: v1alpha1\nkind: KubeExternalManifestConfig\nname: extras\nurl: https://manifests.example.com/extras.yaml\n" +
			"headers:\n  Authorization: Bearer " + randomWord(32) + "\n"})
	}

	return patches
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}

	return b
}

// randomWord is n lowercase hex characters: a passphrase or token of the kind users write.
func randomWord(n int) string { return hex.EncodeToString(randomBytes((n + 1) / 2))[:n] }

// wireguardKey is a WireGuard key as wg writes it: base64 of 32 bytes.
func wireguardKey() string { return base64.StdEncoding.EncodeToString(randomBytes(32)) }

// clientIdentity is a self-signed Ed25519 client certificate and its key, as PEM.
func clientIdentity() (string, string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "registry-client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		panic(err)
	}

	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		panic(err)
	}

	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})

	return strings.TrimRight(string(cert), "\n"), strings.TrimRight(string(key), "\n")
}
