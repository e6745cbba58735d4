package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type runner struct {
	r      *reporter
	lab    *labState
	ctl    *labControl
	strict bool

	callTimeout time.Duration
	waitTimeout time.Duration

	// filled by the write phase for the maintenance phase
	resetMachine labMachine
	resetConfig  string

	// maintenance machines known to be installed (reset, not wiped whole)
	installed map[string]bool

	// the lab as it was at the start
	initial *labState
}

func runClient(args []string) int {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	labPath := fs.String("lab", "", "lab.json written by the simulator")
	phases := fs.String("phases", "read,write,maintenance", "comma-separated phases to run")
	strict := fs.Bool("strict", false, "a check that cannot run for lack of a suitable machine is a FAIL (not a SKIP)")
	callTimeout := fs.Duration("call-timeout", 15*time.Second, "timeout of one API call")
	waitTimeout := fs.Duration("wait-timeout", 60*time.Second, "timeout of waiting for a machine to reboot/return")

	_ = fs.Parse(args)

	if *labPath == "" {
		fmt.Fprintln(os.Stderr, "client: --lab is required")

		return 2
	}

	r := &reporter{}

	lab, err := loadLab(*labPath)
	if err != nil {
		r.Fail("load lab", "%v", err)

		return r.Summary("client")
	}

	rn := &runner{
		r:           r,
		lab:         lab,
		ctl:         &labControl{base: strings.TrimRight(lab.Control, "/"), http: &http.Client{Timeout: 10 * time.Second}},
		strict:      *strict,
		callTimeout: *callTimeout,
		waitTimeout: *waitTimeout,
		installed:   map[string]bool{},
	}

	ctx := context.Background()

	// Refresh from the live state (lab.json may be older).
	if live, err := rn.ctl.state(ctx); err != nil {
		r.Fail("lab control GET /state", "%v", err)
	} else {
		r.Ok("lab control GET /state")

		rn.lab = live
	}

	rn.initial = rn.lab

	r.Info("lab: %d machines, context %q, CA %s, talosconfig %s", len(rn.lab.Machines), rn.lab.Context, rn.lab.CAAlgorithm, rn.lab.Talosconfig)

	for _, m := range rn.lab.Machines {
		r.Info("machine %s %s %s %s %s up=%v", m.Name, m.Address, m.Role, m.Mode, m.Version, m.Up)
	}

	want := map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		want[strings.TrimSpace(p)] = true
	}

	if want["read"] {
		rn.readPhase(ctx)
	}

	if want["write"] {
		rn.writePhase(ctx)
	}

	if want["maintenance"] {
		rn.maintenancePhase(ctx)
	}

	return r.Summary("client")
}

// missing reports that a check could not run for lack of a machine.
func (rn *runner) missing(check, why string) {
	if rn.strict {
		rn.r.Fail(check, "cannot run: %s", why)
	} else {
		rn.r.Skip(check, "%s", why)
	}
}

func errDetail(err error) string {
	if err == nil {
		return "<nil>"
	}

	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("gRPC %s: %s", st.Code(), st.Message())
	}

	return err.Error()
}

func callErr(call string, err error) error {
	return fmt.Errorf("%s: %s", call, errDetail(err))
}

// --- clients --------------------------------------------------------------------------

func (rn *runner) adminClient(ctx context.Context, endpoint string) (*client.Client, error) {
	return client.New(ctx,
		client.WithConfigFromFile(rn.lab.Talosconfig),
		client.WithContextName(rn.lab.Context),
		client.WithEndpoints(endpoint),
	)
}

func (rn *runner) readerClient(ctx context.Context, endpoint string) (*client.Client, error) {
	return client.New(ctx,
		client.WithConfigFromFile(rn.lab.Talosconfig),
		client.WithContextName(rn.lab.Context+"-reader"),
		client.WithEndpoints(endpoint),
	)
}

// insecureClient is talosctl --insecure: no client certificate, server not verified.
func (rn *runner) insecureClient(ctx context.Context, endpoint string) (*client.Client, error) {
	return client.New(ctx,
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), //nolint:gosec
		client.WithEndpoints(endpoint),
	)
}

// access is one way of reaching a machine: an endpoint, and maybe a node.
type access struct {
	name string // "direct" or "via <machine>"
	c    *client.Client
	node string
}

func (a access) ctx(ctx context.Context) context.Context {
	if a.node != "" {
		return client.WithNode(ctx, a.node)
	}

	return ctx
}

func (rn *runner) call(ctx context.Context, a access) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)

	return a.ctx(cctx), cancel
}

// firstControlPlane is the endpoint of the talosconfig (the lab puts the first
// control plane there).
func (rn *runner) firstControlPlane() (labMachine, bool) {
	for _, m := range rn.lab.Machines {
		if m.controlPlane() && m.Up {
			return m, true
		}
	}

	return labMachine{}, false
}

func (rn *runner) refresh(ctx context.Context) {
	if live, err := rn.ctl.state(ctx); err == nil {
		rn.lab = live
	} else {
		rn.r.Warn("refreshing lab state: %v", err)
	}
}

func (rn *runner) byName(name string) (labMachine, bool) {
	for _, m := range rn.lab.Machines {
		if m.Name == name {
			return m, true
		}
	}

	return labMachine{}, false
}

// expectCode checks that err carries the gRPC code want.
func expectCode(err error, want ...codes.Code) error {
	if err == nil {
		return fmt.Errorf("succeeded, want gRPC %v", want)
	}

	got := status.Code(err)
	if slices.Contains(want, got) {
		return nil
	}

	// client.FilterMessages wraps per-node errors: look inside.
	var ne *client.NodeError
	if errors.As(err, &ne) {
		if slices.Contains(want, status.Code(ne.Err)) {
			return nil
		}
	}

	return fmt.Errorf("want gRPC %v, got %s", want, errDetail(err))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}

	sort.Strings(out)

	return out
}

// highestVersion is the newest Talos version among the lab's machines.
func (rn *runner) highestVersion() string {
	best := ""

	for _, m := range rn.lab.Machines {
		if best == "" || semverLess(best, m.Version) {
			best = m.Version
		}
	}

	return best
}

func semverLess(a, b string) bool {
	pa := strings.SplitN(strings.TrimPrefix(a, "v"), ".", 3)
	pb := strings.SplitN(strings.TrimPrefix(b, "v"), ".", 3)

	for i := range 3 {
		var x, y int

		if i < len(pa) {
			fmt.Sscanf(pa[i], "%d", &x) //nolint:errcheck
		}

		if i < len(pb) {
			fmt.Sscanf(pb[i], "%d", &y) //nolint:errcheck
		}

		if x != y {
			return x < y
		}
	}

	return false
}
