package main

// The "cluster" mode: read a cluster's machines as talosctl does, with a talosconfig someone else made (init's,
// minted from its secrets bundle): the client certificate must be accepted, each machine's config must decode
// with machinery's types and state the role it was given, and every control plane must list every control plane
// as an etcd member. Each config must also pass machinery's own client-side validation (metal mode, strict), and
// with --expect-network what machinery itself reads from it through its config.Provider interfaces (links and their
// addresses, Layer 2 VIPs and their links, resolvers, time servers) must be what the file states.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	machinery "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
)

// runtimeMode implements validation.RuntimeMode: "metal" is a machine Talos installs to a disk (as
// tests/configgen/src/check.go has it).
type runtimeMode string

func (m runtimeMode) String() string        { return string(m) }
func (m runtimeMode) RequiresInstall() bool { return m == "metal" }
func (m runtimeMode) InContainer() bool     { return m == "container" }

var _ validation.RuntimeMode = runtimeMode("metal")

// expectedNetwork is what one machine's config must state, as machinery reads it; a field left out is not checked.
type expectedNetwork struct {
	// Links: the names of NetworkCommonLinkConfigs() (LinkConfig, BondConfig, VLANConfig...), as a set.
	Links *[]string `json:"links"`
	// Addresses: per link, its addresses (prefixes) in order.
	Addresses map[string][]string `json:"addresses"`
	// VIPs: the Layer 2 VIPs of NetworkVirtualIPConfigs(), "IP" or "IP@LINK", as a set.
	VIPs *[]string `json:"vips"`
	// Nameservers: NetworkResolverConfig().Resolvers() in order.
	Nameservers *[]string `json:"nameservers"`
	// TimeServers: NetworkTimeSyncConfig().Servers() in order.
	TimeServers *[]string `json:"timeServers"`
}

func runCluster(args []string) int {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	talosconfig := fs.String("talosconfig", "", "the talosconfig to read with")
	contextName := fs.String("context", "", "its context")
	controlplanes := fs.String("controlplanes", "", "comma-separated control plane addresses")
	workers := fs.String("workers", "", "comma-separated worker addresses")
	clusterName := fs.String("cluster-name", "", "the cluster name every config must state")
	callTimeout := fs.Duration("call-timeout", 15*time.Second, "timeout of one API call")
	expectNetwork := fs.String("expect-network", "", "JSON {address: {links, addresses, vips, nameservers, timeServers}}")

	_ = fs.Parse(args)

	r := &reporter{}
	if *talosconfig == "" || *controlplanes == "" {
		fmt.Fprintln(os.Stderr, "cluster: --talosconfig and --controlplanes are required")

		return 2
	}

	cps := split(*controlplanes)
	roles := map[string]string{}

	for _, a := range cps {
		roles[a] = "controlplane"
	}

	for _, a := range split(*workers) {
		roles[a] = "worker"
	}

	ctx := context.Background()
	addrs := make([]string, 0, len(roles))

	for a := range roles {
		addrs = append(addrs, a)
	}

	sort.Strings(addrs)

	expected := map[string]expectedNetwork{}

	if *expectNetwork != "" {
		data, err := os.ReadFile(*expectNetwork)
		if err == nil {
			err = json.Unmarshal(data, &expected)
		}

		if err != nil {
			fmt.Fprintf(os.Stderr, "cluster: --expect-network: %v\n", err)

			return 2
		}

		for a := range expected {
			if _, ok := roles[a]; !ok {
				r.Fail(fmt.Sprintf("cluster --expect-network %s", a), "not an address of --controlplanes or --workers")
			}
		}
	}

	for _, addr := range addrs {
		c, err := client.New(ctx, client.WithConfigFromFile(*talosconfig), client.WithContextName(*contextName),
			client.WithEndpoints(addr))
		if !r.Check(fmt.Sprintf("cluster client.New %s", addr), err) {
			continue
		}

		r.Check(fmt.Sprintf("cluster %s Version", addr), func() error {
			cctx, cancel := context.WithTimeout(ctx, *callTimeout)
			defer cancel()

			_, err := c.Version(cctx)

			return err
		}())

		var provider machinery.Provider

		r.Check(fmt.Sprintf("cluster %s MachineConfig is a %s of %s", addr, roles[addr], *clusterName), func() error {
			cctx, cancel := context.WithTimeout(ctx, *callTimeout)
			defer cancel()

			mc, err := safe.StateGet[*config.MachineConfig](cctx, c.COSI, machineConfigPtr())
			if err != nil {
				return err
			}

			provider = mc.Provider()
			if got := provider.Machine().Type().String(); got != roles[addr] {
				return fmt.Errorf("machine type %s, want %s", got, roles[addr])
			}

			if *clusterName != "" && provider.K8sClusterConfig().ClusterName() != *clusterName {
				return fmt.Errorf("cluster name %q, want %q", provider.K8sClusterConfig().ClusterName(), *clusterName)
			}

			return nil
		}())

		check := fmt.Sprintf("cluster %s config validates (metal, strict)", addr)
		if provider == nil {
			r.Fail(check, "no config read")
		} else {
			r.Check(check, validateStrict(provider))
		}

		if want, ok := expected[addr]; ok {
			checkNetwork(r, addr, provider, want)
		}

		if roles[addr] == "controlplane" {
			r.Check(fmt.Sprintf("cluster %s EtcdMemberList lists %d members", addr, len(cps)), func() error {
				cctx, cancel := context.WithTimeout(ctx, *callTimeout)
				defer cancel()

				resp, err := c.EtcdMemberList(cctx, &machineapi.EtcdMemberListRequest{})
				if err != nil {
					return err
				}

				if n := len(resp.GetMessages()[0].GetMembers()); n != len(cps) {
					return fmt.Errorf("%d members, want %d", n, len(cps))
				}

				return nil
			}())
		}

		_ = c.Close()
	}

	return r.Summary("cluster")
}

// validateStrict is machinery's client-side validation of a config (what talosctl validate --mode metal --strict
// runs): an error, or in strict mode any warning, fails.
func validateStrict(provider machinery.Provider) error {
	warnings, err := provider.ValidateAsClient(runtimeMode("metal"), validation.WithStrict())
	if err != nil {
		return err
	}

	if len(warnings) > 0 {
		return fmt.Errorf("warnings: %s", strings.Join(warnings, "; "))
	}

	return nil
}

// checkNetwork prints one line per stated field of want: what machinery reads from the config through its
// config.Provider interfaces against it.
func checkNetwork(r *reporter, addr string, provider machinery.Provider, want expectedNetwork) {
	prefix := fmt.Sprintf("cluster %s config", addr)

	if provider == nil {
		r.Fail(prefix+" network", "no config read")

		return
	}

	links := map[string][]string{}

	var names []string

	for _, link := range provider.NetworkCommonLinkConfigs() {
		var addresses []string

		for _, a := range link.Addresses() {
			addresses = append(addresses, a.Address().String())
		}

		names = append(names, link.Name())
		links[link.Name()] = addresses
	}

	sort.Strings(names)

	if want.Links != nil {
		r.Check(fmt.Sprintf("%s links (NetworkCommonLinkConfigs) are %s", prefix, listed(*want.Links)),
			sameSet(names, *want.Links))
	}

	if want.Addresses != nil {
		var stated []string

		for _, name := range sortedKeys(want.Addresses) {
			stated = append(stated, fmt.Sprintf("%s %s", name, listed(want.Addresses[name])))
		}

		r.Check(fmt.Sprintf("%s link addresses are %s", prefix, strings.Join(stated, "; ")), func() error {
			var problems []string

			for _, name := range sortedKeys(want.Addresses) {
				got, ok := links[name]
				if !ok {
					problems = append(problems, fmt.Sprintf("no link %s", name))
				} else if !slices.Equal(got, want.Addresses[name]) {
					problems = append(problems, fmt.Sprintf("%s has %s", name, listed(got)))
				}
			}

			if problems != nil {
				return errors.New(strings.Join(problems, "; "))
			}

			return nil
		}())
	}

	if want.VIPs != nil {
		r.Check(fmt.Sprintf("%s Layer 2 VIPs (NetworkVirtualIPConfigs) are %s", prefix, listed(*want.VIPs)), func() error {
			var got, bare []string

			for _, vip := range provider.NetworkVirtualIPConfigs() {
				if doc, ok := vip.(interface{ Kind() string }); !ok || doc.Kind() != "Layer2VIPConfig" {
					return fmt.Errorf("VIP %s is not a Layer2VIPConfig (%T)", vip.VIP(), vip)
				}

				if _, ok := links[vip.Link()]; !ok {
					return fmt.Errorf("VIP %s is on %s, which no link config names", vip.VIP(), vip.Link())
				}

				got = append(got, fmt.Sprintf("%s@%s", vip.VIP(), vip.Link()))
				bare = append(bare, vip.VIP().String())
			}

			for _, w := range *want.VIPs {
				if !strings.Contains(w, "@") {
					// the file names the IPs only: compare those
					return sameSet(bare, *want.VIPs)
				}
			}

			return sameSet(got, *want.VIPs)
		}())
	}

	if want.Nameservers != nil {
		var got []string

		if resolver := provider.NetworkResolverConfig(); resolver != nil {
			for _, ns := range resolver.Resolvers() {
				got = append(got, ns.Addr.String())
			}
		}

		r.Check(fmt.Sprintf("%s nameservers (NetworkResolverConfig) are %s", prefix, listed(*want.Nameservers)),
			sameList(got, *want.Nameservers))
	}

	if want.TimeServers != nil {
		var got []string

		if ts := provider.NetworkTimeSyncConfig(); ts != nil {
			got = ts.Servers()
		}

		r.Check(fmt.Sprintf("%s time servers (NetworkTimeSyncConfig) are %s", prefix, listed(*want.TimeServers)),
			sameList(got, *want.TimeServers))
	}
}

func listed(values []string) string {
	return "[" + strings.Join(values, ", ") + "]"
}

func sameSet(got, want []string) error {
	g, w := slices.Clone(got), slices.Clone(want)
	sort.Strings(g)
	sort.Strings(w)

	if !slices.Equal(g, w) {
		return fmt.Errorf("machinery reads %s", listed(g))
	}

	return nil
}

func sameList(got, want []string) error {
	if !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
		return fmt.Errorf("machinery reads %s", listed(got))
	}

	return nil
}

func split(s string) []string {
	var out []string

	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}

	return out
}
