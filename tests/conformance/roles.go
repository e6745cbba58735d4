package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// drain reads a server stream to its end, returning the first error.
func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}

			return err
		}
	}
}

// readerRefusals: admin-only (and operator) calls made with the os:reader
// certificate must be refused with PermissionDenied. Nothing may change.
func (rn *runner) readerRefusals(ctx context.Context, cp1, target labMachine) {
	rc, err := rn.readerClient(ctx, cp1.Address)
	if !rn.r.Check("write client.New reader endpoint="+cp1.Address, err) {
		return
	}
	defer rc.Close() //nolint:errcheck

	type call struct {
		name string
		on   labMachine
		do   func(context.Context) error
	}

	calls := []call{
		{"Reboot", target, func(c context.Context) error { return rc.Reboot(c) }},
		{"Reset", target, func(c context.Context) error { return rc.Reset(c, true, true) }},
		{"Upgrade (legacy)", target, func(c context.Context) error {
			_, err := rc.UpgradeWithOptions(c, client.WithUpgradeImage(installerRepo+":"+target.Version)) //nolint:staticcheck

			return err
		}},
		{"ImageService.Pull", target, func(c context.Context) error {
			s, err := rc.ImageClient.Pull(c, &machineapi.ImageServicePullRequest{Containerd: talosctlUpgradeContainerd(), ImageRef: installerRepo + ":" + target.Version})
			if err != nil {
				return err
			}

			return drain(s.Recv)
		}},
		{"LifecycleService.Upgrade", target, func(c context.Context) error {
			s, err := rc.LifecycleClient.Upgrade(c, &machineapi.LifecycleServiceUpgradeRequest{
				Containerd: talosctlUpgradeContainerd(),
				Source:     &machineapi.InstallArtifactsSource{ImageName: installerRepo + ":" + target.Version},
			})
			if err != nil {
				return err
			}

			return drain(s.Recv)
		}},
		{"ApplyConfiguration dry_run", target, func(c context.Context) error {
			_, err := rc.ApplyConfiguration(c, &machineapi.ApplyConfigurationRequest{
				Data: []byte(target.MachineConfig), Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true,
			})

			return err
		}},
		{"Bootstrap", cp1, func(c context.Context) error { return rc.Bootstrap(c, &machineapi.BootstrapRequest{}) }},
		{"Kubeconfig", cp1, func(c context.Context) error {
			_, err := rc.Kubeconfig(c)

			return err
		}},
		{"EtcdSnapshot", cp1, func(c context.Context) error {
			r, err := rc.EtcdSnapshot(c, &machineapi.EtcdSnapshotRequest{})
			if err != nil {
				return err
			}

			_, err = io.ReadAll(r)
			r.Close() //nolint:errcheck

			return err
		}},
		{"EtcdLeaveCluster", cp1, func(c context.Context) error {
			return rc.EtcdLeaveCluster(c, &machineapi.EtcdLeaveClusterRequest{})
		}},
		{"EtcdRemoveMemberByID", cp1, func(c context.Context) error {
			return rc.EtcdRemoveMemberByID(c, &machineapi.EtcdRemoveMemberByIDRequest{MemberId: cp1.EtcdMemberID})
		}},
		{"EtcdForfeitLeadership", cp1, func(c context.Context) error {
			_, err := rc.EtcdForfeitLeadership(c, &machineapi.EtcdForfeitLeadershipRequest{})

			return err
		}},
	}

	for _, cl := range calls {
		rn.r.Check(fmt.Sprintf("write %s %s as os:reader is PermissionDenied", cl.on.Name, cl.name), func() error {
			cctx, cancel := rn.nodeCall(ctx, cl.on)
			defer cancel()

			return expectCode(cl.do(cctx), codes.PermissionDenied)
		}())
	}

	// nothing happened
	rn.r.Check("write refused calls changed nothing", func() error {
		for _, m := range []labMachine{cp1, target} {
			after, err := rn.ctl.machine(ctx, m.Name)
			if err != nil {
				return err
			}

			if !after.Up || after.Stage != m.Stage || after.Mode != m.Mode || after.Version != m.Version || after.EtcdMemberID != m.EtcdMemberID {
				return fmt.Errorf("%s changed: up=%v stage=%s mode=%s version=%s etcd=%d", m.Name, after.Up, after.Stage, after.Mode, after.Version, after.EtcdMemberID)
			}
		}

		return nil
	}())
}

// maintenanceRefusals: what a maintenance machine refuses to a caller without
// a certificate (1.13+: os:reader → PermissionDenied; 1.12: Unimplemented).
func (rn *runner) maintenanceRefusals(ctx context.Context, pfx string, a access, m labMachine) {
	want := codes.PermissionDenied
	if !versionAtLeast(m.Version, 1, 13) {
		want = codes.Unimplemented
	}

	calls := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Reset", func(c context.Context) error { return a.c.Reset(c, true, true) }},
		{"Upgrade (legacy)", func(c context.Context) error {
			_, err := a.c.UpgradeWithOptions(c, client.WithUpgradeImage(installerRepo+":"+m.Version)) //nolint:staticcheck

			return err
		}},
	}

	for _, cl := range calls {
		rn.r.Check(fmt.Sprintf("%s %s is %s", pfx, cl.name, want), func() error {
			cctx, cancel := rn.call(ctx, a)
			defer cancel()

			return expectCode(cl.do(cctx), want)
		}())
	}
}

// fanOut: the deprecated "nodes" metadata (apid fan-out): one message per node,
// metadata.hostname = the node as given. The lab may decline it with
// InvalidArgument (talosctl 1.14 and the collection send one call per node):
// that is a warning, not a failure.
func (rn *runner) fanOut(ctx context.Context, c *client.Client, nodes []labMachine) {
	var addrs []string
	for _, m := range nodes {
		addrs = append(addrs, m.Address)
	}

	check := fmt.Sprintf("read fan-out nodes=%v Version", addrs)

	cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)
	defer cancel()

	resp, err := c.Version(client.WithNodes(cctx, addrs...)) //nolint:staticcheck
	if status.Code(err) == codes.InvalidArgument {
		rn.r.Warn("%s: not implemented by the lab: %s", check, errDetail(err))

		return
	}

	if err != nil {
		rn.r.Fail(check, "%s", errDetail(err))

		return
	}

	got := map[string]string{}
	for _, msg := range resp.GetMessages() {
		got[msg.GetMetadata().GetHostname()] = msg.GetVersion().GetTag()
	}

	want := map[string]string{}
	for _, m := range nodes {
		want[m.Address] = m.Version
	}

	rn.r.Check(check, compareMaps("metadata.hostname -> tag", got, want))
}
