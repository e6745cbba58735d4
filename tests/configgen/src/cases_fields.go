package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Cases of "the configuration real clusters carry": static networking, bonds, VLANs, VIPs, time servers,
// node labels and taints, kubelet and control-plane component arguments, the audit policy and the admission
// configuration. case.json holds them in the Python spec's shape (cluster_fields, machine_fields, with the
// values the generated config holds after machinery's merge); the patches translate them into the contract's
// form (legacy v1alpha1 fields below v1.14, typed documents at v1.14). A spec reproduces these cases.

// ClusterFields are the cluster spec fields (control planes only).
type ClusterFields struct {
	APIServer         *ComponentFields  `json:"apiServer,omitempty"`
	ControllerManager *ComponentFields  `json:"controllerManager,omitempty"`
	Scheduler         *ComponentFields  `json:"scheduler,omitempty"`
	AuditPolicy       map[string]any    `json:"auditPolicy,omitempty"`
	AdmissionControl  []AdmissionPlugin `json:"admissionControl,omitempty"`
}

// ComponentFields are a control-plane component's fields.
type ComponentFields struct {
	ExtraArgs map[string]string `json:"extraArgs"`
}

// AdmissionPlugin is one admission plugin's configuration.
type AdmissionPlugin struct {
	Name          string         `json:"name"`
	Configuration map[string]any `json:"configuration"`
}

// MachineFieldsByRole are the machine spec fields of each role.
type MachineFieldsByRole struct {
	ControlPlane MachineFields `json:"controlplane"`
	Worker       MachineFields `json:"worker"`
}

// MachineFields are one role's machine spec fields.
type MachineFields struct {
	Network     *NetworkFields    `json:"network,omitempty"`
	TimeServers []string          `json:"timeServers,omitempty"`
	NodeLabels  map[string]string `json:"nodeLabels,omitempty"`
	NodeTaints  map[string]string `json:"nodeTaints,omitempty"`
	Kubelet     *KubeletFields    `json:"kubelet,omitempty"`
}

// NetworkFields are a machine's network fields.
type NetworkFields struct {
	Interfaces  []NetInterface `json:"interfaces,omitempty"`
	Nameservers []string       `json:"nameservers,omitempty"`
}

// NetInterface is one interface (a link or a bond) with its VLANs.
type NetInterface struct {
	Name      string     `json:"name"`
	Addresses []string   `json:"addresses,omitempty"`
	Routes    []NetRoute `json:"routes,omitempty"`
	MTU       int        `json:"mtu,omitempty"`
	VIP       string     `json:"vip,omitempty"`
	Bond      *NetBond   `json:"bond,omitempty"`
	VLANs     []NetVLAN  `json:"vlans,omitempty"`
}

// NetRoute is one static route.
type NetRoute struct {
	Network string `json:"network"`
	Gateway string `json:"gateway,omitempty"`
	Metric  int    `json:"metric,omitempty"`
}

// NetBond is an interface's bond.
type NetBond struct {
	Interfaces     []string `json:"interfaces"`
	Mode           string   `json:"mode"`
	MIIMon         int      `json:"miimon,omitempty"`
	LACPRate       string   `json:"lacpRate,omitempty"`
	XmitHashPolicy string   `json:"xmitHashPolicy,omitempty"`
	UpDelay        int      `json:"updelay,omitempty"`
	DownDelay      int      `json:"downdelay,omitempty"`
}

// NetVLAN is one VLAN on an interface.
type NetVLAN struct {
	ID        int        `json:"id"`
	Addresses []string   `json:"addresses,omitempty"`
	Routes    []NetRoute `json:"routes,omitempty"`
	MTU       int        `json:"mtu,omitempty"`
	VIP       string     `json:"vip,omitempty"`
}

// KubeletFields are a machine's kubelet fields.
type KubeletFields struct {
	ExtraArgs     map[string]string `json:"extraArgs,omitempty"`
	ExtraMounts   []KubeletMount    `json:"extraMounts,omitempty"`
	NodeIPSubnets []string          `json:"nodeIPSubnets,omitempty"`
}

// KubeletMount is one kubelet extra mount.
type KubeletMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options"`
}

// podSecurityRestricted is Talos's default PodSecurity configuration with enforce restricted and the monitoring
// namespace exempted too: the whole configuration, since a patch replaces it (see fieldPatches).
func podSecurityRestricted() map[string]any {
	return map[string]any{
		"apiVersion": "pod-security.admission.config.k8s.io/v1alpha1",
		"kind":       "PodSecurityConfiguration",
		"defaults": map[string]any{
			"audit": "restricted", "audit-version": "latest",
			"enforce": "restricted", "enforce-version": "latest",
			"warn": "restricted", "warn-version": "latest",
		},
		"exemptions": map[string]any{
			"namespaces":     []any{"kube-system", "monitoring"},
			"runtimeClasses": []any{},
			"usernames":      []any{},
		},
	}
}

func fieldCases() []Case {
	var cases []Case

	add := func(c Case, cluster ClusterFields, machines MachineFieldsByRole) {
		c.ClusterFields = &cluster
		c.MachineFields = &machines
		c.extraPatches = fieldPatches
		cases = append(cases, c)
	}

	defaultRoute := func(gw string) NetRoute { return NetRoute{Network: "0.0.0.0/0", Gateway: gw} }

	staticIface := func(addr string) NetInterface {
		return NetInterface{
			Name:      "eth0",
			Addresses: []string{addr},
			Routes: []NetRoute{
				{Network: "0.0.0.0/0", Gateway: "10.5.0.1", Metric: 1024},
				{Network: "192.168.50.0/24", Gateway: "10.5.0.254"},
			},
			MTU: 9000,
		}
	}
	staticMachine := func(addr string) MachineFields {
		return MachineFields{
			Network: &NetworkFields{
				Interfaces:  []NetInterface{staticIface(addr)},
				Nameservers: []string{"10.5.0.1", "1.1.1.1"},
			},
			TimeServers: []string{"time.cloudflare.com", "pool.ntp.org"},
		}
	}
	add(baseCase("net-static", "static addresses, two routes (one with a metric), MTU 9000, nameservers and time servers"),
		ClusterFields{}, MachineFieldsByRole{ControlPlane: staticMachine("10.5.0.2/24"), Worker: staticMachine("10.5.0.3/24")})

	bondMachine := func(last string) MachineFields {
		return MachineFields{Network: &NetworkFields{Interfaces: []NetInterface{{
			Name:      "bond0",
			Addresses: []string{"10.10.0." + last + "/24"},
			Routes:    []NetRoute{defaultRoute("10.10.0.1")},
			Bond: &NetBond{
				Interfaces: []string{"eth0", "eth1"}, Mode: "802.3ad", MIIMon: 100, LACPRate: "fast",
				// updelay and downdelay: machinery v1.14.1 warns when an 802.3ad BondConfig has none (strict validation fails)
				XmitHashPolicy: "layer3+4", UpDelay: 200, DownDelay: 200,
			},
			VLANs: []NetVLAN{{
				ID:        100,
				Addresses: []string{"192.168.100." + last + "/24"},
				Routes:    []NetRoute{{Network: "192.168.200.0/24", Gateway: "192.168.100.1"}},
				MTU:       1500,
			}},
		}}}}
	}
	add(baseCase("net-bond-vlan", "an LACP bond of two links with a static address and a VLAN on it"),
		ClusterFields{}, MachineFieldsByRole{ControlPlane: bondMachine("2"), Worker: bondMachine("3")})

	vip := baseCase("vip", "a shared (layer 2) VIP on the control plane's eth0, the endpoint on the VIP")
	vip.Endpoint = "https://10.5.0.10:6443"
	add(vip, ClusterFields{}, MachineFieldsByRole{
		ControlPlane: MachineFields{Network: &NetworkFields{Interfaces: []NetInterface{{
			Name: "eth0", Addresses: []string{"10.5.0.2/24"}, Routes: []NetRoute{defaultRoute("10.5.0.1")}, VIP: "10.5.0.10",
		}}}},
		Worker: MachineFields{Network: &NetworkFields{Interfaces: []NetInterface{{
			Name: "eth0", Addresses: []string{"10.5.0.3/24"}, Routes: []NetRoute{defaultRoute("10.5.0.1")},
		}}}},
	})

	vlanVIP := baseCase("vlan-vip", "a VLAN on eth0 carrying the control plane's shared VIP, the endpoint on the VIP")
	vlanVIP.Endpoint = "https://172.16.20.10:6443"
	add(vlanVIP, ClusterFields{}, MachineFieldsByRole{
		ControlPlane: MachineFields{Network: &NetworkFields{Interfaces: []NetInterface{{
			Name: "eth0", Addresses: []string{"10.20.0.2/24"},
			VLANs: []NetVLAN{{ID: 20, Addresses: []string{"172.16.20.2/24"}, VIP: "172.16.20.10"}},
		}}}},
		Worker: MachineFields{Network: &NetworkFields{Interfaces: []NetInterface{{
			Name: "eth0", Addresses: []string{"10.20.0.3/24"},
			VLANs: []NetVLAN{{ID: 20, Addresses: []string{"172.16.20.3/24"}}},
		}}}},
	})

	labels := func(worker bool) MachineFields {
		m := MachineFields{
			NodeLabels: map[string]string{"topology.kubernetes.io/zone": "zone-a", "example.com/tier": ""},
			NodeTaints: map[string]string{"example.com/dedicated": "storage:NoSchedule"},
		}
		if worker {
			m.NodeLabels["node-role.kubernetes.io/worker"] = ""
		}

		return m
	}
	add(baseCase("node-labels-taints", "node labels (one with an empty value) and a taint on both roles, the worker role label"),
		ClusterFields{}, MachineFieldsByRole{ControlPlane: labels(false), Worker: labels(true)})

	kubelet := func() MachineFields {
		return MachineFields{Kubelet: &KubeletFields{
			ExtraArgs:     map[string]string{"rotate-server-certificates": "true", "max-pods": "250"},
			ExtraMounts:   []KubeletMount{{Destination: "/var/mnt/local", Type: "bind", Source: "/var/mnt/local", Options: []string{"bind", "rshared", "rw"}}},
			NodeIPSubnets: []string{"10.5.0.0/24"},
		}}
	}
	add(baseCase("kubelet-extra", "kubelet extra arguments, node IP subnets and (legacy contracts) an extra mount"),
		ClusterFields{}, MachineFieldsByRole{ControlPlane: kubelet(), Worker: kubelet()})

	add(baseCase("components-args", "extra arguments of the API server, the controller manager and the scheduler"),
		ClusterFields{
			APIServer:         &ComponentFields{ExtraArgs: map[string]string{"audit-log-maxage": "30", "event-ttl": "2h"}},
			ControllerManager: &ComponentFields{ExtraArgs: map[string]string{"bind-address": "0.0.0.0"}},
			Scheduler:         &ComponentFields{ExtraArgs: map[string]string{"bind-address": "0.0.0.0"}},
		}, MachineFieldsByRole{})

	add(baseCase("audit-admission", "an audit policy of two rules and a PodSecurity configuration enforcing restricted"),
		ClusterFields{
			AuditPolicy: map[string]any{
				"apiVersion": "audit.k8s.io/v1",
				"kind":       "Policy",
				"rules": []any{
					map[string]any{"level": "Metadata", "resources": []any{
						map[string]any{"group": "", "resources": []any{"secrets", "configmaps"}},
					}},
					map[string]any{"level": "RequestResponse"},
				},
			},
			AdmissionControl: []AdmissionPlugin{{Name: "PodSecurity", Configuration: podSecurityRestricted()}},
		}, MachineFieldsByRole{})

	return cases
}

// fieldPatches translates the case's cluster_fields and machine_fields into one patch per role (never "all"), in
// the contract's form, then sets them to the values the generated config holds (what case.json records):
//
//   - at contract v1.14, kubelet extraMounts are left out (machinery v1.14.1's KubeletConfig has none);
//   - the control plane's nodeLabels (and at v1.14 nodeTaints) merge with the generator's: the legacy
//     node.kubernetes.io/exclude-from-external-load-balancers label; at v1.14 the node-role control-plane label,
//     that one and the node-role control-plane NoSchedule taint;
//   - an admission plugin's configuration merges with the generated one key by key, lists appended (legacy
//     AdmissionPluginConfigList merges by name, v1.14 KubeAdmissionControlConfig by document name): the patch
//     deletes the generated one first ("$patch: delete" of the legacy list item; at v1.14 of the document's
//     configuration, in a patch of its own before the role's, as a document cannot appear twice in one
//     patch), so the configuration is exactly the case's;
//   - the audit policy is replaced whole (merge:"replace" in both forms): nothing to delete.
//
// generateCase then checks the generated configs hold exactly these values (checkFieldValues).
func fieldPatches(c *Case, _ string, typed bool) []PatchRecord {
	var machines MachineFieldsByRole

	var cluster ClusterFields

	deepCopy(c.MachineFields, &machines)
	deepCopy(c.ClusterFields, &cluster)

	if typed {
		for _, m := range []*MachineFields{&machines.ControlPlane, &machines.Worker} {
			if m.Kubelet != nil {
				m.Kubelet.ExtraMounts = nil
			}
		}
	}

	var patches []PatchRecord

	if typed {
		if slices.ContainsFunc(cluster.AdmissionControl, func(p AdmissionPlugin) bool { return p.Name == "PodSecurity" }) {
			patches = append(patches, PatchRecord{Target: "controlplane", Patch: "apiVersion: v1alpha1\nkind: KubeAdmissionControlConfig\n" +
				"name: PodSecurity\nconfiguration:\n  $patch: delete\n"})
		}

		if p := typedFieldsPatch(&machines.ControlPlane, &cluster); p != "" {
			patches = append(patches, PatchRecord{Target: "controlplane", Patch: p})
		}

		if p := typedFieldsPatch(&machines.Worker, nil); p != "" {
			patches = append(patches, PatchRecord{Target: "worker", Patch: p})
		}
	} else {
		if p := legacyFieldsPatch(&machines.ControlPlane, &cluster); p != "" {
			patches = append(patches, PatchRecord{Target: "controlplane", Patch: p})
		}

		if p := legacyFieldsPatch(&machines.Worker, nil); p != "" {
			patches = append(patches, PatchRecord{Target: "worker", Patch: p})
		}
	}

	// the effective values
	cp := &machines.ControlPlane
	if cp.NodeLabels != nil {
		cp.NodeLabels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""

		if typed {
			cp.NodeLabels["node-role.kubernetes.io/control-plane"] = ""
		}
	}

	if cp.NodeTaints != nil && typed {
		cp.NodeTaints["node-role.kubernetes.io/control-plane"] = "NoSchedule"
	}

	c.MachineFields = &machines
	c.ClusterFields = &cluster

	return patches
}

func deepCopy(in, out any) {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}

	if err = json.Unmarshal(data, out); err != nil {
		panic(err)
	}
}

// ordered YAML: a mapping whose keys keep their order (patches are written for people to read).
type kv struct {
	k string
	v any
}

type omap []kv

func (m *omap) set(k string, v any) { *m = append(*m, kv{k, v}) }

func routesYAML(routes []NetRoute, dst string) []any {
	var out []any

	for _, r := range routes {
		var m omap

		// at v1.14 a default route has no destination: LinkConfig refuses 0.0.0.0/0 and ::/0 ("destination must be
		// a valid IP prefix": the unspecified address), and makes the default route of the gateway's family
		if dst == "network" || !isDefaultRoute(r.Network) {
			m.set(dst, r.Network)
		}

		if r.Gateway != "" {
			m.set("gateway", r.Gateway)
		}

		if r.Metric != 0 {
			m.set("metric", r.Metric)
		}

		out = append(out, m)
	}

	return out
}

func isDefaultRoute(network string) bool { return network == "0.0.0.0/0" || network == "::/0" }

func strList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}

	return out
}

func strMap(s map[string]string) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = v
	}

	return out
}

func legacyFieldsPatch(m *MachineFields, cluster *ClusterFields) string {
	var machine omap

	if m.Network != nil {
		var network omap

		if len(m.Network.Interfaces) > 0 {
			var ifaces []any

			for _, i := range m.Network.Interfaces {
				var d omap

				d.set("interface", i.Name)

				if len(i.Addresses) > 0 {
					d.set("addresses", strList(i.Addresses))
				}

				if len(i.Routes) > 0 {
					d.set("routes", routesYAML(i.Routes, "network"))
				}

				if i.MTU != 0 {
					d.set("mtu", i.MTU)
				}

				if i.VIP != "" {
					d.set("vip", omap{{"ip", i.VIP}})
				}

				if b := i.Bond; b != nil {
					var bond omap

					bond.set("interfaces", strList(b.Interfaces))
					bond.set("mode", b.Mode)

					if b.MIIMon != 0 {
						bond.set("miimon", b.MIIMon)
					}

					if b.LACPRate != "" {
						bond.set("lacpRate", b.LACPRate)
					}

					if b.XmitHashPolicy != "" {
						bond.set("xmitHashPolicy", b.XmitHashPolicy)
					}

					if b.UpDelay != 0 {
						bond.set("updelay", b.UpDelay)
					}

					if b.DownDelay != 0 {
						bond.set("downdelay", b.DownDelay)
					}

					d.set("bond", bond)
				}

				if len(i.VLANs) > 0 {
					var vlans []any

					for _, v := range i.VLANs {
						var vl omap

						vl.set("vlanId", v.ID)

						if len(v.Addresses) > 0 {
							vl.set("addresses", strList(v.Addresses))
						}

						if len(v.Routes) > 0 {
							vl.set("routes", routesYAML(v.Routes, "network"))
						}

						if v.MTU != 0 {
							vl.set("mtu", v.MTU)
						}

						if v.VIP != "" {
							vl.set("vip", omap{{"ip", v.VIP}})
						}

						vlans = append(vlans, vl)
					}

					d.set("vlans", vlans)
				}

				ifaces = append(ifaces, d)
			}

			network.set("interfaces", ifaces)
		}

		if len(m.Network.Nameservers) > 0 {
			network.set("nameservers", strList(m.Network.Nameservers))
		}

		machine.set("network", network)
	}

	if len(m.TimeServers) > 0 {
		machine.set("time", omap{{"servers", strList(m.TimeServers)}})
	}

	if m.NodeLabels != nil {
		machine.set("nodeLabels", strMap(m.NodeLabels))
	}

	if m.NodeTaints != nil {
		machine.set("nodeTaints", strMap(m.NodeTaints))
	}

	if k := m.Kubelet; k != nil {
		var kubelet omap

		if k.ExtraArgs != nil {
			kubelet.set("extraArgs", strMap(k.ExtraArgs))
		}

		if len(k.ExtraMounts) > 0 {
			var mounts []any
			for _, mt := range k.ExtraMounts {
				mounts = append(mounts, omap{{"destination", mt.Destination}, {"type", mt.Type}, {"source", mt.Source}, {"options", strList(mt.Options)}})
			}

			kubelet.set("extraMounts", mounts)
		}

		if len(k.NodeIPSubnets) > 0 {
			kubelet.set("nodeIP", omap{{"validSubnets", strList(k.NodeIPSubnets)}})
		}

		machine.set("kubelet", kubelet)
	}

	var root omap

	if len(machine) > 0 {
		root.set("machine", machine)
	}

	if cluster != nil {
		var cl, apiServer omap

		if cluster.APIServer != nil {
			apiServer.set("extraArgs", strMap(cluster.APIServer.ExtraArgs))
		}

		if cluster.AuditPolicy != nil {
			apiServer.set("auditPolicy", cluster.AuditPolicy)
		}

		if len(cluster.AdmissionControl) > 0 {
			var plugins []any
			// the generated plugin's configuration would be merged with the case's (lists appended): delete it first
			for _, p := range cluster.AdmissionControl {
				plugins = append(plugins, omap{{"name", p.Name}, {"$patch", "delete"}})
			}

			for _, p := range cluster.AdmissionControl {
				plugins = append(plugins, omap{{"name", p.Name}, {"configuration", p.Configuration}})
			}

			apiServer.set("admissionControl", plugins)
		}

		if len(apiServer) > 0 {
			cl.set("apiServer", apiServer)
		}

		if cluster.ControllerManager != nil {
			cl.set("controllerManager", omap{{"extraArgs", strMap(cluster.ControllerManager.ExtraArgs)}})
		}

		if cluster.Scheduler != nil {
			cl.set("scheduler", omap{{"extraArgs", strMap(cluster.Scheduler.ExtraArgs)}})
		}

		if len(cl) > 0 {
			root.set("cluster", cl)
		}
	}

	if len(root) == 0 {
		return ""
	}

	return emitYAML(root)
}

func typedDoc(kind string, fields ...kv) omap {
	return append(omap{{"apiVersion", "v1alpha1"}, {"kind", kind}}, fields...)
}

func linkFields(m *omap, mtu int, addresses []string, routes []NetRoute) {
	if mtu != 0 {
		m.set("mtu", mtu)
	}

	if len(addresses) > 0 {
		var a []any
		for _, addr := range addresses {
			a = append(a, omap{{"address", addr}})
		}

		m.set("addresses", a)
	}

	if len(routes) > 0 {
		m.set("routes", routesYAML(routes, "destination"))
	}
}

// typedFieldsPatch is the role's patch at contract v1.14: new documents in the order the generated config then
// holds them (links, bonds and VLANs in interface order, then the VIPs, then TimeSyncConfig), then the documents
// the generator already writes, which merge in place.
func typedFieldsPatch(m *MachineFields, cluster *ClusterFields) string {
	var docs []omap

	var vips []omap

	if m.Network != nil {
		for _, i := range m.Network.Interfaces {
			var d omap

			if b := i.Bond; b != nil {
				d = typedDoc("BondConfig", kv{"name", i.Name}, kv{"links", strList(b.Interfaces)}, kv{"bondMode", b.Mode})

				if b.MIIMon != 0 {
					d.set("miimon", b.MIIMon)
				}

				if b.UpDelay != 0 {
					d.set("updelay", b.UpDelay)
				}

				if b.DownDelay != 0 {
					d.set("downdelay", b.DownDelay)
				}

				if b.LACPRate != "" {
					d.set("lacpRate", b.LACPRate)
				}

				if b.XmitHashPolicy != "" {
					d.set("xmitHashPolicy", b.XmitHashPolicy)
				}
			} else {
				d = typedDoc("LinkConfig", kv{"name", i.Name})
			}

			linkFields(&d, i.MTU, i.Addresses, i.Routes)
			docs = append(docs, d)

			if i.VIP != "" {
				vips = append(vips, typedDoc("Layer2VIPConfig", kv{"name", i.VIP}, kv{"link", i.Name}))
			}

			for _, v := range i.VLANs {
				name := i.Name + "." + strconv.Itoa(v.ID)
				vl := typedDoc("VLANConfig", kv{"name", name}, kv{"vlanID", v.ID}, kv{"parent", i.Name})
				linkFields(&vl, v.MTU, v.Addresses, v.Routes)
				docs = append(docs, vl)

				if v.VIP != "" {
					vips = append(vips, typedDoc("Layer2VIPConfig", kv{"name", v.VIP}, kv{"link", name}))
				}
			}
		}
	}

	docs = append(docs, vips...)

	if len(m.TimeServers) > 0 {
		docs = append(docs, typedDoc("TimeSyncConfig", kv{"ntp", omap{{"servers", strList(m.TimeServers)}}}))
	}

	if m.Network != nil && len(m.Network.Nameservers) > 0 {
		var ns []any
		for _, n := range m.Network.Nameservers {
			ns = append(ns, omap{{"address", n}})
		}

		docs = append(docs, typedDoc("ResolverConfig", kv{"nameservers", ns}))
	}

	node := typedDoc("KubeNodeConfig")

	if m.NodeLabels != nil {
		node.set("labels", strMap(m.NodeLabels))
	}

	if m.NodeTaints != nil {
		node.set("taints", strMap(m.NodeTaints))
	}

	if m.Kubelet != nil && len(m.Kubelet.NodeIPSubnets) > 0 {
		node.set("nodeIP", omap{{"validSubnets", strList(m.Kubelet.NodeIPSubnets)}})
	}

	if len(node) > 2 {
		docs = append(docs, node)
	}

	if m.Kubelet != nil && m.Kubelet.ExtraArgs != nil {
		docs = append(docs, typedDoc("KubeletConfig", kv{"extraArgs", strMap(m.Kubelet.ExtraArgs)}))
	}

	if cluster != nil {
		for _, comp := range []struct {
			kind   string
			fields *ComponentFields
		}{
			{"KubeAPIServerConfig", cluster.APIServer},
			{"KubeControllerManagerConfig", cluster.ControllerManager},
			{"KubeSchedulerConfig", cluster.Scheduler},
		} {
			if comp.fields != nil {
				docs = append(docs, typedDoc(comp.kind, kv{"extraArgs", strMap(comp.fields.ExtraArgs)}))
			}
		}

		if cluster.AuditPolicy != nil {
			docs = append(docs, typedDoc("KubeAuditPolicyConfig", kv{"configuration", cluster.AuditPolicy}))
		}

		for _, p := range cluster.AdmissionControl {
			docs = append(docs, typedDoc("KubeAdmissionControlConfig", kv{"name", p.Name}, kv{"configuration", p.Configuration}))
		}
	}

	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, emitYAML(d))
	}

	return strings.Join(out, "---\n")
}

// emitYAML writes a mapping as block YAML with two-space indents, the way the other patches are written.
func emitYAML(v any) string {
	var b strings.Builder

	emitValue(&b, v, 0)

	return b.String()
}

func mapEntries(v any) ([]kv, bool) {
	switch m := v.(type) {
	case omap:
		return m, true
	case map[string]any:
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}

		sort.Strings(keys)

		out := make([]kv, 0, len(keys))
		for _, k := range keys {
			out = append(out, kv{k, m[k]})
		}

		return out, true
	}

	return nil, false
}

func emitValue(b *strings.Builder, v any, ind int) {
	pad := strings.Repeat(" ", ind)

	if entries, ok := mapEntries(v); ok {
		for _, e := range entries {
			if inline, ok := inlineScalar(e.v); ok {
				fmt.Fprintf(b, "%s%s: %s\n", pad, scalar(e.k), inline)

				continue
			}

			fmt.Fprintf(b, "%s%s:\n", pad, scalar(e.k))
			emitValue(b, e.v, ind+2)
		}

		return
	}

	list, ok := v.([]any)
	if !ok {
		panic(fmt.Sprintf("emitYAML: unexpected %T", v))
	}

	for _, item := range list {
		if inline, ok := inlineScalar(item); ok {
			fmt.Fprintf(b, "%s- %s\n", pad, inline)

			continue
		}

		var sub strings.Builder

		emitValue(&sub, item, ind+2)

		b.WriteString(pad + "- " + strings.TrimPrefix(sub.String(), pad+"  "))
	}
}

// inlineScalar is the value written on the key's line: a scalar, or {} / [] when empty.
func inlineScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return scalar(x), true
	case int:
		return strconv.Itoa(x), true
	case bool:
		return strconv.FormatBool(x), true
	case []any:
		if len(x) == 0 {
			return "[]", true
		}
	case []string:
		panic("emitYAML: []string (use strList)")
	case map[string]any:
		if len(x) == 0 {
			return "{}", true
		}
	case omap:
		if len(x) == 0 {
			return "{}", true
		}
	}

	return "", false
}

var (
	plainScalar  = regexp.MustCompile(`^[A-Za-z0-9./_$][A-Za-z0-9./_:+=@-]*$`)
	numberScalar = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?|0[xo][0-9a-fA-F]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)$`)
	boolScalar   = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "y": true, "n": true, "null": true, "~": true}
)

// scalar writes a string plain when YAML reads it back as that string, double-quoted otherwise.
func scalar(s string) string {
	if plainScalar.MatchString(s) && !numberScalar.MatchString(s) && !boolScalar[strings.ToLower(s)] {
		return s
	}

	return strconv.Quote(s)
}
