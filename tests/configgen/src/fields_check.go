package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/siderolabs/talos/pkg/machinery/config/bundle"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
)

// checkFieldValues reads the spec fields back from the generated configs (the legacy v1alpha1 fields, or the typed
// documents at v1.14) and fails unless they are exactly what case.json records: case.json's cluster_fields and
// machine_fields are the effective values, whatever machinery's merge did with the patches. Keys the case does
// not set are not compared where every generated config has a default (the control plane's node labels and
// taints, the audit policy, the admission configuration); anywhere else the config must hold none.
func checkFieldValues(c *Case, configBundle *bundle.Bundle, typed bool) error {
	var want struct {
		Cluster  map[string]any `json:"cluster"`
		Machines map[string]any `json:"machines"`
	}

	deepCopy(struct {
		Cluster  *ClusterFields       `json:"cluster"`
		Machines *MachineFieldsByRole `json:"machines"`
	}{c.ClusterFields, c.MachineFields}, &want)

	for _, mt := range []machine.Type{machine.TypeControlPlane, machine.TypeWorker} {
		data, err := configBundle.Serialize(encoder.CommentsDisabled, mt)
		if err != nil {
			return err
		}

		docs, err := yamlDocs(data)
		if err != nil {
			return err
		}

		var gotMachine, gotCluster map[string]any

		if typed {
			gotMachine, gotCluster, err = typedFieldValues(docs)
		} else {
			gotMachine, gotCluster, err = legacyFieldValues(docs)
		}

		if err != nil {
			return fmt.Errorf("%s: %w", mt, err)
		}

		wantMachine, _ := want.Machines[mt.String()].(map[string]any)

		if mt == machine.TypeControlPlane {
			for _, k := range []string{"nodeLabels", "nodeTaints"} {
				if _, set := wantMachine[k]; !set {
					delete(gotMachine, k)
				}
			}

			for _, k := range []string{"auditPolicy", "admissionControl"} {
				if _, set := want.Cluster[k]; !set {
					delete(gotCluster, k)
				}
			}

			if err = sameJSON("cluster_fields", want.Cluster, gotCluster); err != nil {
				return fmt.Errorf("%s: %w", mt, err)
			}
		} else if len(gotCluster) > 0 {
			return fmt.Errorf("%s: cluster fields in a worker config: %v", mt, gotCluster)
		}

		if err = sameJSON("machine_fields."+mt.String(), wantMachine, gotMachine); err != nil {
			return fmt.Errorf("%s: %w", mt, err)
		}
	}

	return nil
}

func sameJSON(what string, want, got map[string]any) error {
	var w, g any

	if want == nil {
		want = map[string]any{}
	}

	deepCopy(want, &w)
	deepCopy(got, &g)

	if reflect.DeepEqual(w, g) {
		return nil
	}

	wj, _ := json.Marshal(w)
	gj, _ := json.Marshal(g)

	return fmt.Errorf("%s: case.json says %s, the config holds %s", what, wj, gj)
}

func yamlDocs(data []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))

	var docs []map[string]any

	for {
		var d map[string]any

		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}

		if err != nil {
			return nil, err
		}

		if d != nil {
			docs = append(docs, d)
		}
	}
}

func path(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}

		m = mm[k]
	}

	return m
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }

func listOf(v any) []any { l, _ := v.([]any); return l }

// only fails when m has a key outside allowed (what the translation never writes: something machinery added).
func only(what string, m map[string]any, allowed ...string) error {
	for k := range m {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("%s: unexpected key %s in %v", what, k, m)
		}
	}

	return nil
}

// setIf sets out[k] = v when v is not empty.
func setIf(out map[string]any, k string, v any) {
	switch x := v.(type) {
	case nil:
		return
	case []any:
		if len(x) == 0 {
			return
		}
	case map[string]any:
		if len(x) == 0 {
			return
		}
	case string:
		if x == "" {
			return
		}
	case int:
		if x == 0 {
			return
		}
	}

	out[k] = v
}

func routeValues(routes []any, dst string) ([]any, error) {
	var out []any

	for _, r := range routes {
		rm := mapOf(r)
		if err := only("route", rm, dst, "gateway", "metric"); err != nil {
			return nil, err
		}

		nr := map[string]any{"network": rm[dst]}

		if dst == "destination" && rm[dst] == nil {
			// a typed route without a destination is the default route of the gateway's family
			nr["network"] = "0.0.0.0/0"
			if strings.Contains(fmt.Sprint(rm["gateway"]), ":") {
				nr["network"] = "::/0"
			}
		}
		setIf(nr, "gateway", rm["gateway"])
		setIf(nr, "metric", rm["metric"])
		out = append(out, nr)
	}

	return out, nil
}

func legacyFieldValues(docs []map[string]any) (map[string]any, map[string]any, error) {
	var v1 map[string]any

	for _, d := range docs {
		if d["version"] == "v1alpha1" {
			v1 = d
		}
	}

	if v1 == nil {
		return nil, nil, errors.New("no v1alpha1 document")
	}

	m := map[string]any{}
	network := map[string]any{}

	var ifaces []any

	for _, d := range listOf(path(v1, "machine", "network", "interfaces")) {
		dm := mapOf(d)
		if err := only("interface", dm, "interface", "addresses", "routes", "mtu", "vip", "bond", "vlans"); err != nil {
			return nil, nil, err
		}

		iface := map[string]any{"name": dm["interface"]}
		setIf(iface, "addresses", dm["addresses"])

		routes, err := routeValues(listOf(dm["routes"]), "network")
		if err != nil {
			return nil, nil, err
		}

		setIf(iface, "routes", routes)
		setIf(iface, "mtu", dm["mtu"])

		if vip := mapOf(dm["vip"]); vip != nil {
			if err = only("vip", vip, "ip"); err != nil {
				return nil, nil, err
			}

			iface["vip"] = vip["ip"]
		}

		if b := mapOf(dm["bond"]); b != nil {
			if err = only("bond", b, "interfaces", "mode", "miimon", "lacpRate", "xmitHashPolicy", "updelay", "downdelay"); err != nil {
				return nil, nil, err
			}

			iface["bond"] = b
		}

		var vlans []any

		for _, v := range listOf(dm["vlans"]) {
			vm := mapOf(v)
			if err = only("vlan", vm, "vlanId", "addresses", "routes", "mtu", "vip"); err != nil {
				return nil, nil, err
			}

			vl := map[string]any{"id": vm["vlanId"]}
			setIf(vl, "addresses", vm["addresses"])

			vr, err := routeValues(listOf(vm["routes"]), "network")
			if err != nil {
				return nil, nil, err
			}

			setIf(vl, "routes", vr)
			setIf(vl, "mtu", vm["mtu"])

			if vip := mapOf(vm["vip"]); vip != nil {
				vl["vip"] = vip["ip"]
			}

			vlans = append(vlans, vl)
		}

		setIf(iface, "vlans", vlans)
		ifaces = append(ifaces, iface)
	}

	setIf(network, "interfaces", ifaces)
	setIf(network, "nameservers", path(v1, "machine", "network", "nameservers"))
	setIf(m, "network", network)
	setIf(m, "timeServers", path(v1, "machine", "time", "servers"))
	setIf(m, "nodeLabels", path(v1, "machine", "nodeLabels"))
	setIf(m, "nodeTaints", path(v1, "machine", "nodeTaints"))

	kubelet := map[string]any{}
	setIf(kubelet, "extraArgs", path(v1, "machine", "kubelet", "extraArgs"))
	setIf(kubelet, "extraMounts", path(v1, "machine", "kubelet", "extraMounts"))
	setIf(kubelet, "nodeIPSubnets", path(v1, "machine", "kubelet", "nodeIP", "validSubnets"))
	setIf(m, "kubelet", kubelet)

	cl := map[string]any{}

	for _, comp := range []string{"apiServer", "controllerManager", "scheduler"} {
		if args := mapOf(path(v1, "cluster", comp, "extraArgs")); len(args) > 0 {
			cl[comp] = map[string]any{"extraArgs": args}
		}
	}

	setIf(cl, "auditPolicy", path(v1, "cluster", "apiServer", "auditPolicy"))
	setIf(cl, "admissionControl", path(v1, "cluster", "apiServer", "admissionControl"))

	return m, cl, nil
}

func typedFieldValues(docs []map[string]any) (map[string]any, map[string]any, error) {
	m := map[string]any{}
	cl := map[string]any{}

	var (
		ifaces    []map[string]any
		byName    = map[string]map[string]any{}
		admission []any
		kubelet   = map[string]any{}
		network   = map[string]any{}
	)

	links := func(d map[string]any, iface map[string]any) error {
		setIf(iface, "mtu", d["mtu"])

		var addrs []any

		for _, a := range listOf(d["addresses"]) {
			am := mapOf(a)
			if err := only("address", am, "address"); err != nil {
				return err
			}

			addrs = append(addrs, am["address"])
		}

		setIf(iface, "addresses", addrs)

		routes, err := routeValues(listOf(d["routes"]), "destination")
		if err != nil {
			return err
		}

		setIf(iface, "routes", routes)

		return nil
	}

	for _, d := range docs {
		kind, _ := d["kind"].(string)
		name, _ := d["name"].(string)

		switch kind {
		case "LinkConfig", "BondConfig":
			iface := map[string]any{"name": name}

			if kind == "BondConfig" {
				if err := only(kind, d, "apiVersion", "kind", "name", "links", "bondMode", "miimon", "updelay", "downdelay",
					"lacpRate", "xmitHashPolicy", "mtu", "addresses", "routes"); err != nil {
					return nil, nil, err
				}

				bond := map[string]any{"interfaces": d["links"], "mode": d["bondMode"]}
				for _, k := range []string{"miimon", "updelay", "downdelay", "lacpRate", "xmitHashPolicy"} {
					setIf(bond, k, d[k])
				}

				iface["bond"] = bond
			} else if err := only(kind, d, "apiVersion", "kind", "name", "mtu", "addresses", "routes"); err != nil {
				return nil, nil, err
			}

			if err := links(d, iface); err != nil {
				return nil, nil, err
			}

			ifaces = append(ifaces, iface)
			byName[name] = iface
		case "VLANConfig":
			if err := only(kind, d, "apiVersion", "kind", "name", "vlanID", "parent", "mtu", "addresses", "routes"); err != nil {
				return nil, nil, err
			}

			parent := byName[fmt.Sprint(d["parent"])]
			if parent == nil || name != fmt.Sprint(d["parent"])+"."+strconv.Itoa(d["vlanID"].(int)) {
				return nil, nil, fmt.Errorf("VLANConfig %s: parent %v not before it, or the name is not <parent>.<id>", name, d["parent"])
			}

			vl := map[string]any{"id": d["vlanID"]}
			if err := links(d, vl); err != nil {
				return nil, nil, err
			}

			parent["vlans"] = append(listOf(parent["vlans"]), vl)
			byName[name] = vl
		case "Layer2VIPConfig":
			link := byName[fmt.Sprint(d["link"])]
			if link == nil {
				return nil, nil, fmt.Errorf("Layer2VIPConfig %s: link %v is not one of the case's", name, d["link"])
			}

			link["vip"] = name
		case "TimeSyncConfig":
			if err := only(kind, d, "apiVersion", "kind", "ntp"); err != nil {
				return nil, nil, err
			}

			setIf(m, "timeServers", path(d, "ntp", "servers"))
		case "ResolverConfig":
			var ns []any
			for _, n := range listOf(d["nameservers"]) {
				ns = append(ns, mapOf(n)["address"])
			}

			setIf(network, "nameservers", ns)
		case "KubeNodeConfig":
			setIf(m, "nodeLabels", d["labels"])
			setIf(m, "nodeTaints", d["taints"])
			setIf(kubelet, "nodeIPSubnets", path(d, "nodeIP", "validSubnets"))
		case "KubeletConfig":
			setIf(kubelet, "extraArgs", d["extraArgs"])
		case "KubeAPIServerConfig", "KubeControllerManagerConfig", "KubeSchedulerConfig":
			comp := map[string]string{"KubeAPIServerConfig": "apiServer", "KubeControllerManagerConfig": "controllerManager",
				"KubeSchedulerConfig": "scheduler"}[kind]
			if args := mapOf(d["extraArgs"]); len(args) > 0 {
				cl[comp] = map[string]any{"extraArgs": args}
			}
		case "KubeAuditPolicyConfig":
			setIf(cl, "auditPolicy", d["configuration"])
		case "KubeAdmissionControlConfig":
			admission = append(admission, map[string]any{"name": name, "configuration": d["configuration"]})
		}
	}

	var il []any
	for _, i := range ifaces {
		il = append(il, i)
	}

	setIf(network, "interfaces", il)
	setIf(m, "network", network)
	setIf(m, "kubelet", kubelet)
	setIf(cl, "admissionControl", admission)

	return m, cl, nil
}
