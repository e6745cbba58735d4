package main

// The "cluster" mode: read a cluster's machines as talosctl does, with a talosconfig someone else made (init's,
// minted from its secrets bundle): the client certificate must be accepted, each machine's config must decode
// with machinery's types and state the role it was given, and every control plane must list every control plane
// as an etcd member.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
)

func runCluster(args []string) int {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	talosconfig := fs.String("talosconfig", "", "the talosconfig to read with")
	contextName := fs.String("context", "", "its context")
	controlplanes := fs.String("controlplanes", "", "comma-separated control plane addresses")
	workers := fs.String("workers", "", "comma-separated worker addresses")
	clusterName := fs.String("cluster-name", "", "the cluster name every config must state")
	callTimeout := fs.Duration("call-timeout", 15*time.Second, "timeout of one API call")

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

		r.Check(fmt.Sprintf("cluster %s MachineConfig is a %s of %s", addr, roles[addr], *clusterName), func() error {
			cctx, cancel := context.WithTimeout(ctx, *callTimeout)
			defer cancel()

			mc, err := safe.StateGet[*config.MachineConfig](cctx, c.COSI, machineConfigPtr())
			if err != nil {
				return err
			}

			provider := mc.Provider()
			if got := provider.Machine().Type().String(); got != roles[addr] {
				return fmt.Errorf("machine type %s, want %s", got, roles[addr])
			}

			if *clusterName != "" && provider.K8sClusterConfig().ClusterName() != *clusterName {
				return fmt.Errorf("cluster name %q, want %q", provider.K8sClusterConfig().ClusterName(), *clusterName)
			}

			return nil
		}())

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

func split(s string) []string {
	var out []string

	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}

	return out
}
