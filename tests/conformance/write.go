package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc/codes"
)

const installerRepo = "ghcr.io/siderolabs/installer"

// pickWorker returns the first configured, up worker matching cond, not in used.
func (rn *runner) pickWorker(used map[string]bool, cond func(labMachine) bool) (labMachine, bool) {
	for _, m := range rn.lab.Machines {
		if m.configured() && m.Up && m.Role == "worker" && !used[m.Name] && cond(m) {
			return m, true
		}
	}

	return labMachine{}, false
}

func (rn *runner) writePhase(ctx context.Context) {
	rn.refresh(ctx)

	cp1, ok := rn.firstControlPlane()
	if !ok {
		rn.r.Fail("write", "no configured, up control plane in the lab")

		return
	}

	c, err := rn.adminClient(ctx, cp1.Address)
	if !rn.r.Check(fmt.Sprintf("write client.New admin endpoint=%s (%s)", cp1.Address, cp1.Name), err) {
		return
	}
	defer c.Close() //nolint:errcheck

	used := map[string]bool{}

	wReboot, okReboot := rn.pickWorker(used, func(m labMachine) bool { return versionAtLeast(m.Version, 1, 14) })
	if okReboot {
		used[wReboot.Name] = true
	}

	wLegacy, okLegacy := rn.pickWorker(used, func(m labMachine) bool { a, b := m.minor(); return a == 1 && b == 12 })
	if okLegacy {
		used[wLegacy.Name] = true
	}

	wLifecycle, okLifecycle := rn.pickWorker(used, func(m labMachine) bool { a, b := m.minor(); return a == 1 && b == 13 })
	if okLifecycle {
		used[wLifecycle.Name] = true
	}

	target := rn.highestVersion()
	rn.r.Info("write: endpoint %s; reboot/reset %s; legacy upgrade %s; lifecycle upgrade %s; target %s",
		cp1.Name, wReboot.Name, wLegacy.Name, wLifecycle.Name, target)

	// 0. os:reader is refused the write calls.
	if okReboot {
		rn.readerRefusals(ctx, cp1, wReboot)
	} else {
		rn.missing("write os:reader refusals", "no configured v1.14+ worker")
	}

	// 1. ApplyConfiguration dry run.
	for _, m := range []labMachine{wReboot, cp1} {
		if m.Name == "" {
			continue
		}

		rn.r.Check(fmt.Sprintf("write %s ApplyConfiguration dry_run AUTO changes nothing", m.Name), rn.dryRun(ctx, c, m))
	}

	// 1b. ApplyConfiguration AUTO of the unchanged config: applied without a reboot.
	if okReboot {
		rn.r.Check(fmt.Sprintf("write %s ApplyConfiguration AUTO (unchanged config) -> NO_REBOOT, no reboot", wReboot.Name), rn.applySame(ctx, c, wReboot))
	}

	// 2. Bootstrap.
	rn.r.Check(fmt.Sprintf("write %s Bootstrap", cp1.Name), rn.bootstrap(ctx, c, cp1))

	// 3. Kubeconfig.
	rn.r.Check(fmt.Sprintf("write %s Kubeconfig", cp1.Name), rn.kubeconfig(ctx, c, cp1))

	// 3b. EtcdSnapshot, read whole through machinery's client (a stream of common.Data).
	rn.r.Check(fmt.Sprintf("write %s EtcdSnapshot", cp1.Name), rn.etcdSnapshot(ctx, c, cp1))

	// 4. Reboot.
	if okReboot {
		rn.r.Check(fmt.Sprintf("write %s Reboot", wReboot.Name), rn.reboot(ctx, c, wReboot))
	} else {
		rn.missing("write Reboot", "no configured v1.14+ worker")
	}

	// 5. Legacy upgrade (1.12).
	if okLegacy {
		rn.r.Check(fmt.Sprintf("write %s legacy Upgrade %s -> %s", wLegacy.Name, wLegacy.Version, target), rn.legacyUpgrade(ctx, c, wLegacy, target))
	} else {
		rn.missing("write legacy Upgrade", "no configured v1.12 worker")
	}

	// 6. ImageService Pull + LifecycleService Upgrade + Reboot (1.13+).
	if okLifecycle {
		rn.r.Check(fmt.Sprintf("write %s ImageService.Pull + LifecycleService.Upgrade + Reboot %s -> %s", wLifecycle.Name, wLifecycle.Version, target), rn.lifecycleUpgrade(ctx, c, wLifecycle, target))
	} else {
		rn.missing("write lifecycle Upgrade", "no configured v1.13 worker")
	}

	// 7. etcd leadership moved away (a rollout before a control plane reboots), then membership changes.
	rn.refresh(ctx)
	rn.etcdForfeit(ctx, c, cp1)
	rn.refresh(ctx)
	rn.etcdChanges(ctx, c, cp1)

	// 8. Reset → maintenance.
	if okReboot {
		rn.refresh(ctx)

		m, _ := rn.byName(wReboot.Name)
		rn.resetConfig = m.MachineConfig

		if rn.r.Check(fmt.Sprintf("write %s Reset graceful reboot STATE+EPHEMERAL -> maintenance", m.Name), rn.reset(ctx, c, m)) {
			rn.resetMachine = m
			rn.installed[m.Name] = true
		}
	} else {
		rn.missing("write Reset", "no configured v1.14+ worker")
	}
}

func (rn *runner) nodeCall(ctx context.Context, m labMachine) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)

	return client.WithNode(cctx, m.Address), cancel
}

func (rn *runner) dryRun(ctx context.Context, c *client.Client, m labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.ApplyConfiguration(cctx, &machineapi.ApplyConfigurationRequest{
		Data:   []byte(m.MachineConfig),
		Mode:   machineapi.ApplyConfigurationRequest_AUTO,
		DryRun: true,
	})
	if err != nil {
		return callErr("ApplyConfiguration", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("%d messages, want 1", len(resp.GetMessages()))
	}

	rn.r.Info("%s dry run: mode=%s details=%q warnings=%v", m.Name, resp.GetMessages()[0].GetMode(), resp.GetMessages()[0].GetModeDetails(), resp.GetMessages()[0].GetWarnings())

	time.Sleep(500 * time.Millisecond)

	after, err := rn.ctl.machine(ctx, m.Name)
	if err != nil {
		return err
	}

	if !after.Up || after.Stage != "running" || after.MachineConfig != m.MachineConfig || after.Mode != m.Mode {
		return fmt.Errorf("the machine changed after a dry run: up=%v stage=%s mode=%s config changed=%v",
			after.Up, after.Stage, after.Mode, after.MachineConfig != m.MachineConfig)
	}

	return nil
}

func (rn *runner) applySame(ctx context.Context, c *client.Client, m labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.ApplyConfiguration(cctx, &machineapi.ApplyConfigurationRequest{
		Data: []byte(m.MachineConfig),
		Mode: machineapi.ApplyConfigurationRequest_AUTO,
	})
	if err != nil {
		return callErr("ApplyConfiguration", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("%d messages, want 1", len(resp.GetMessages()))
	}

	if got := resp.GetMessages()[0].GetMode(); got != machineapi.ApplyConfigurationRequest_NO_REBOOT {
		return fmt.Errorf("mode = %s, want NO_REBOOT", got)
	}

	time.Sleep(500 * time.Millisecond)

	after, err := rn.ctl.machine(ctx, m.Name)
	if err != nil {
		return err
	}

	if !after.Up || after.Stage != "running" || after.MachineConfig != m.MachineConfig {
		return fmt.Errorf("after applying the same config: up=%v stage=%s config changed=%v", after.Up, after.Stage, after.MachineConfig != m.MachineConfig)
	}

	return rn.checkMachineConfig(ctx, access{name: "via", c: c, node: m.Address}, m.MachineConfig)
}

func (rn *runner) bootstrap(ctx context.Context, c *client.Client, cp labMachine) error {
	bootstrapped := len(rn.expectedEtcdMembers(cp)) > 0

	cctx, cancel := rn.nodeCall(ctx, cp)
	defer cancel()

	err := c.Bootstrap(cctx, &machineapi.BootstrapRequest{})

	if bootstrapped {
		// Talos: "etcd data directory is not empty" (AlreadyExists).
		if e := expectCode(err, codes.AlreadyExists, codes.FailedPrecondition); e != nil {
			return fmt.Errorf("on a bootstrapped cluster: %w", e)
		}

		rn.r.Info("Bootstrap on a bootstrapped cluster: %s", errDetail(err))

		return nil
	}

	if err != nil {
		return callErr("Bootstrap", err)
	}

	m, err := rn.ctl.waitMachine(ctx, cp.Name, rn.waitTimeout, "an etcd member id", func(m labMachine) bool { return m.EtcdMemberID != 0 })
	if err != nil {
		return err
	}

	rn.refresh(ctx)

	return rn.checkEtcdMembers(ctx, access{name: "via", c: c, node: m.Address}, m, map[uint64]string{m.EtcdMemberID: m.Hostname})
}

func (rn *runner) etcdSnapshot(ctx context.Context, c *client.Client, cp labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, cp)
	defer cancel()

	r, err := c.EtcdSnapshot(cctx, &machineapi.EtcdSnapshotRequest{})
	if err != nil {
		return callErr("EtcdSnapshot", err)
	}

	raw, err := io.ReadAll(r)
	r.Close() //nolint:errcheck

	if err != nil {
		return callErr("EtcdSnapshot stream", err)
	}

	if len(raw) == 0 {
		return errors.New("EtcdSnapshot streamed no bytes")
	}

	rn.r.Info(fmt.Sprintf("EtcdSnapshot of %s: %d bytes", cp.Name, len(raw)))

	return nil
}

func (rn *runner) kubeconfig(ctx context.Context, c *client.Client, cp labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, cp)
	defer cancel()

	r, err := c.KubeconfigRaw(cctx)
	if err != nil {
		return callErr("Kubeconfig", err)
	}

	raw, err := io.ReadAll(r)
	r.Close() //nolint:errcheck

	if err != nil {
		return callErr("Kubeconfig stream", err)
	}

	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not gzip (%d bytes): %w", len(raw), err)
	}

	tr := tar.NewReader(gz)

	var (
		names []string
		kc    []byte
	)

	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}

		names = append(names, h.Name)

		if h.Name == "kubeconfig" {
			if kc, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("tar: %w", err)
			}
		}
	}

	if len(names) != 1 || kc == nil {
		return fmt.Errorf("tar entries %v, want exactly [kubeconfig]", names)
	}

	var doc struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Clusters   []struct {
			Name    string `yaml:"name"`
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			Name string `yaml:"name"`
			User struct {
				Cert string `yaml:"client-certificate-data"`
				Key  string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
		Contexts       []any  `yaml:"contexts"`
		CurrentContext string `yaml:"current-context"`
	}

	if err := yaml.Unmarshal(kc, &doc); err != nil {
		return fmt.Errorf("kubeconfig is not YAML: %w", err)
	}

	if doc.Kind != "Config" || doc.APIVersion != "v1" || len(doc.Clusters) == 0 || doc.Clusters[0].Cluster.Server == "" ||
		len(doc.Users) == 0 || len(doc.Contexts) == 0 || doc.CurrentContext == "" {
		return fmt.Errorf("kubeconfig lacks kind/apiVersion/clusters/users/contexts/current-context: %.300s", kc)
	}

	// the client's own extraction agrees
	cctx2, cancel2 := rn.nodeCall(ctx, cp)
	defer cancel2()

	kc2, err := c.Kubeconfig(cctx2)
	if err != nil {
		return callErr("Kubeconfig (client.Kubeconfig)", err)
	}

	if !bytes.Equal(kc, kc2) {
		rn.r.Info("Kubeconfig differs between two calls (fine if certificates are issued per call)")
	}

	return nil
}

// waitCycle waits for a machine to go down (or leave "running") and come back
// up with cond true.
func (rn *runner) waitCycle(ctx context.Context, name string, cond func(labMachine) bool, what string) (labMachine, error) {
	if _, err := rn.ctl.waitMachine(ctx, name, rn.waitTimeout, "the machine to go down", func(m labMachine) bool {
		return !m.Up || m.Stage != "running"
	}); err != nil {
		return labMachine{}, err
	}

	return rn.ctl.waitMachine(ctx, name, rn.waitTimeout, what, func(m labMachine) bool { return m.Up && cond(m) })
}

// versionDirect asks the machine itself (new connection) for its version.
func (rn *runner) versionDirect(ctx context.Context, m labMachine, want string) error {
	dc, err := rn.adminClient(ctx, m.Address)
	if err != nil {
		return err
	}
	defer dc.Close() //nolint:errcheck

	// the server certificate changes on every boot: allow the first dial to race.
	var last error

	for range 5 {
		if last = rn.checkVersion(ctx, access{name: "direct", c: dc}, want); last == nil {
			return nil
		}

		time.Sleep(200 * time.Millisecond)
	}

	return last
}

func (rn *runner) reboot(ctx context.Context, c *client.Client, m labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.RebootWithResponse(cctx)
	if err != nil {
		return callErr("Reboot", err)
	}

	if len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetActorId() == "" {
		return fmt.Errorf("Reboot reply: want 1 message with an actor_id, got %v", resp.GetMessages())
	}

	back, err := rn.waitCycle(ctx, m.Name, func(x labMachine) bool { return x.Stage == "running" && x.Mode == "configured" }, "the machine to come back running")
	if err != nil {
		return err
	}

	return rn.versionDirect(ctx, back, m.Version)
}

func (rn *runner) legacyUpgrade(ctx context.Context, c *client.Client, m labMachine, target string) error {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	image := installerRepo + ":" + target

	//nolint:staticcheck // the legacy API is what talosctl uses for nodes < 1.13
	resp, err := c.UpgradeWithOptions(cctx,
		client.WithUpgradeImage(image),
		client.WithUpgradeRebootMode(machineapi.UpgradeRequest_DEFAULT),
		client.WithUpgradePreserve(false),
		client.WithUpgradeStage(false),
		client.WithUpgradeForce(false),
	)
	if err != nil {
		return callErr("Upgrade", err)
	}

	if len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetAck() == "" {
		return fmt.Errorf("Upgrade reply: want 1 message with ack, got %v", resp.GetMessages())
	}

	rn.r.Info("%s Upgrade ack %q actor %q", m.Name, resp.GetMessages()[0].GetAck(), resp.GetMessages()[0].GetActorId())

	back, err := rn.waitCycle(ctx, m.Name, func(x labMachine) bool { return x.Stage == "running" && x.Version == target }, "the machine to come back at "+target)
	if err != nil {
		return err
	}

	return rn.versionDirect(ctx, back, target)
}

// talosctlUpgradeContainerd is the containerd instance talosctl 1.14 `upgrade` sends on ImageService.Pull
// and LifecycleService.Upgrade: its --namespace defaults to "system", which
// cmd/talosctl/cmd/talos/image.go containerdInstance() maps to driver CRI, namespace NS_SYSTEM (Talos's
// own provision tests send the same). Talos refuses an unset namespace (ctrhelper).
func talosctlUpgradeContainerd() *common.ContainerdInstance {
	return &common.ContainerdInstance{
		Driver:    common.ContainerDriver_CRI,
		Namespace: common.ContainerdNamespace_NS_SYSTEM,
	}
}

func (rn *runner) lifecycleUpgrade(ctx context.Context, c *client.Client, m labMachine, target string) error {
	image := installerRepo + ":" + target

	// ImageService.Pull (server stream, no messages/metadata wrapper).
	if err := func() error {
		cctx, cancel := rn.nodeCall(ctx, m)
		defer cancel()

		stream, err := c.ImageClient.Pull(cctx, &machineapi.ImageServicePullRequest{Containerd: talosctlUpgradeContainerd(), ImageRef: image})
		if err != nil {
			return callErr("ImageService.Pull", err)
		}

		name := ""

		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}

			if err != nil {
				return callErr("ImageService.Pull recv", err)
			}

			if n := resp.GetName(); n != "" {
				name = n
			}
		}

		if name == "" {
			return fmt.Errorf("ImageService.Pull: stream ended without the image name")
		}

		rn.r.Info("%s pulled %s", m.Name, name)

		return nil
	}(); err != nil {
		return err
	}

	// LifecycleService.Upgrade (server stream of progress, exit code last).
	if err := func() error {
		cctx, cancel := rn.nodeCall(ctx, m)
		defer cancel()

		stream, err := c.LifecycleClient.Upgrade(cctx, &machineapi.LifecycleServiceUpgradeRequest{
			Containerd: talosctlUpgradeContainerd(),
			Source:     &machineapi.InstallArtifactsSource{ImageName: image},
		})
		if err != nil {
			return callErr("LifecycleService.Upgrade", err)
		}

		exit := int32(-1)
		messages := 0

		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}

			if err != nil {
				return callErr("LifecycleService.Upgrade recv", err)
			}

			switch p := resp.GetProgress().GetResponse().(type) {
			case *machineapi.LifecycleServiceInstallProgress_Message:
				messages++
			case *machineapi.LifecycleServiceInstallProgress_ExitCode:
				exit = p.ExitCode
			}
		}

		if exit != 0 {
			return fmt.Errorf("LifecycleService.Upgrade: exit code %d (after %d progress messages); want 0", exit, messages)
		}

		return nil
	}(); err != nil {
		return err
	}

	// Not yet rebooted: still the old version.
	if err := rn.versionDirect(ctx, m, m.Version); err != nil {
		return fmt.Errorf("before the reboot: %w", err)
	}

	if err := rn.reboot(ctx, c, labMachine{Name: m.Name, Address: m.Address, Version: target}); err != nil {
		return fmt.Errorf("reboot after the upgrade: %w", err)
	}

	return nil
}

// etcdLeader is the leader's member id as m's etcd member sees it (EtcdStatus through the endpoint).
func (rn *runner) etcdLeader(ctx context.Context, c *client.Client, m labMachine) (uint64, error) {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.EtcdStatus(cctx)
	if err != nil {
		return 0, callErr("EtcdStatus", err)
	}

	if len(resp.GetMessages()) != 1 {
		return 0, fmt.Errorf("EtcdStatus: %d messages, want 1", len(resp.GetMessages()))
	}

	return resp.GetMessages()[0].GetMemberStatus().GetLeader(), nil
}

// forfeit calls EtcdForfeitLeadership on m and returns the one reply's member.
func (rn *runner) forfeit(ctx context.Context, c *client.Client, m labMachine) (string, error) {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.EtcdForfeitLeadership(cctx, &machineapi.EtcdForfeitLeadershipRequest{})
	if err != nil {
		return "", callErr("EtcdForfeitLeadership", err)
	}

	if len(resp.GetMessages()) != 1 {
		return "", fmt.Errorf("EtcdForfeitLeadership: %d messages, want 1", len(resp.GetMessages()))
	}

	return resp.GetMessages()[0].GetMember(), nil
}

// etcdForfeit: Talos v1.14.1's EtcdForfeitLeadership (internal/pkg/etcd ForfeitLeadership) answers "" on a member
// that does not lead and changes nothing; on the leader it moves the leadership to another member and answers that
// member's etcd name (Talos names a member by the machine's hostname: etcd's Member.Name, not its id); a worker is
// refused (checkControlplane: Unimplemented).
func (rn *runner) etcdForfeit(ctx context.Context, c *client.Client, cp1 labMachine) {
	var cps []labMachine

	for _, m := range rn.clusterMachines(cp1) {
		if m.controlPlane() && m.Up && m.EtcdMemberID != 0 {
			cps = append(cps, m)
		}
	}

	if len(cps) < 3 {
		rn.missing("write EtcdForfeitLeadership", fmt.Sprintf("need 3 bootstrapped control planes, have %d", len(cps)))

		return
	}

	members := rn.expectedEtcdMembers(cp1)

	leaderID, err := rn.etcdLeader(ctx, c, cp1)
	if !rn.r.Check(fmt.Sprintf("write %s EtcdStatus names a leader before EtcdForfeitLeadership", cp1.Name), func() error {
		if err != nil {
			return err
		}

		if _, ok := members[leaderID]; !ok {
			return fmt.Errorf("leader %x is not a member of %v", leaderID, members)
		}

		return nil
	}()) {
		return
	}

	var leader, follower labMachine

	for _, m := range cps {
		if m.EtcdMemberID == leaderID {
			leader = m
		} else if follower.Name == "" {
			follower = m
		}
	}

	rn.r.Check(fmt.Sprintf("write %s EtcdForfeitLeadership of a member that does not lead -> \"\", nothing moves", follower.Name), func() error {
		member, err := rn.forfeit(ctx, c, follower)
		if err != nil {
			return err
		}

		if member != "" {
			return fmt.Errorf("member = %q, want \"\" (%s does not lead)", member, follower.Name)
		}

		now, err := rn.etcdLeader(ctx, c, follower)
		if err != nil {
			return err
		}

		if now != leaderID {
			return fmt.Errorf("the leader moved from %x to %x", leaderID, now)
		}

		return nil
	}())

	rn.r.Check(fmt.Sprintf("write %s EtcdForfeitLeadership of the leader moves the leadership to the member it names", leader.Name), func() error {
		member, err := rn.forfeit(ctx, c, leader)
		if err != nil {
			return err
		}

		var named uint64

		for id, hostname := range members {
			if hostname == member {
				named = id
			}
		}

		if named == 0 || named == leaderID {
			return fmt.Errorf("member = %q, want the etcd name of another member (%v)", member, members)
		}

		for _, m := range cps {
			now, err := rn.etcdLeader(ctx, c, m)
			if err != nil {
				return err
			}

			if now != named {
				return fmt.Errorf("%s sees leader %x, want %x (%s)", m.Name, now, named, member)
			}
		}

		return nil
	}())

	if w, ok := rn.pickWorker(map[string]bool{}, func(labMachine) bool { return true }); ok {
		rn.r.Check(fmt.Sprintf("write %s EtcdForfeitLeadership on a worker is Unimplemented", w.Name), func() error {
			cctx, cancel := rn.nodeCall(ctx, w)
			defer cancel()

			_, err := c.EtcdForfeitLeadership(cctx, &machineapi.EtcdForfeitLeadershipRequest{})

			return expectCode(err, codes.Unimplemented)
		}())
	}
}

func (rn *runner) etcdChanges(ctx context.Context, c *client.Client, cp1 labMachine) {
	var cps []labMachine

	for _, m := range rn.clusterMachines(cp1) {
		if m.controlPlane() && m.Up && m.EtcdMemberID != 0 {
			cps = append(cps, m)
		}
	}

	if len(cps) < 3 {
		rn.missing("write EtcdLeaveCluster / EtcdRemoveMemberByID", fmt.Sprintf("need 3 bootstrapped control planes, have %d", len(cps)))

		return
	}

	// others than cp1, last one leaves, the one before is removed by id.
	var others []labMachine

	for _, m := range cps {
		if m.Name != cp1.Name {
			others = append(others, m)
		}
	}

	leaver, removed := others[len(others)-1], others[len(others)-2]
	cp1Access := access{name: "via", c: c, node: cp1.Address}

	rn.r.Check(fmt.Sprintf("write %s EtcdLeaveCluster", leaver.Name), func() error {
		cctx, cancel := rn.nodeCall(ctx, leaver)
		defer cancel()

		if err := c.EtcdLeaveCluster(cctx, &machineapi.EtcdLeaveClusterRequest{}); err != nil {
			return callErr("EtcdLeaveCluster", err)
		}

		want := rn.expectedEtcdMembers(cp1)
		delete(want, leaver.EtcdMemberID)

		return rn.checkEtcdMembers(ctx, cp1Access, cp1, want)
	}())

	rn.r.Check(fmt.Sprintf("write %s EtcdRemoveMemberByID %s (%d)", cp1.Name, removed.Name, removed.EtcdMemberID), func() error {
		rn.refresh(ctx)

		want := rn.expectedEtcdMembers(cp1)
		delete(want, leaver.EtcdMemberID)

		cctx, cancel := rn.nodeCall(ctx, cp1)
		defer cancel()

		if err := c.EtcdRemoveMemberByID(cctx, &machineapi.EtcdRemoveMemberByIDRequest{MemberId: removed.EtcdMemberID}); err != nil {
			return callErr("EtcdRemoveMemberByID", err)
		}

		delete(want, removed.EtcdMemberID)

		return rn.checkEtcdMembers(ctx, cp1Access, cp1, want)
	}())

	// etcd answers "member not found"; how machined wraps it (NotFound or
	// Unknown) is not pinned down here: any of those codes is accepted.
	rn.r.Check(fmt.Sprintf("write %s EtcdRemoveMemberByID of a non-member fails", cp1.Name), func() error {
		cctx, cancel := rn.nodeCall(ctx, cp1)
		defer cancel()

		err := c.EtcdRemoveMemberByID(cctx, &machineapi.EtcdRemoveMemberByIDRequest{MemberId: removed.EtcdMemberID})

		return expectCode(err, codes.NotFound, codes.Unknown, codes.FailedPrecondition)
	}())
}

func (rn *runner) reset(ctx context.Context, c *client.Client, m labMachine) error {
	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	resp, err := c.ResetGenericWithResponse(cctx, &machineapi.ResetRequest{
		Graceful: true,
		Reboot:   true,
		SystemPartitionsToWipe: []*machineapi.ResetPartitionSpec{
			{Label: "STATE", Wipe: true},
			{Label: "EPHEMERAL", Wipe: true},
		},
	})
	if err != nil {
		return callErr("Reset", err)
	}

	if len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetActorId() == "" {
		return fmt.Errorf("Reset reply: want 1 message with an actor_id, got %v", resp.GetMessages())
	}

	back, err := rn.waitCycle(ctx, m.Name, func(x labMachine) bool { return x.Mode == "maintenance" && x.Stage == "maintenance" }, "the machine to come back in maintenance")
	if err != nil {
		return err
	}

	// the admin talosconfig no longer verifies its (self-signed) certificate
	ac, err := rn.adminClient(ctx, back.Address)
	if err != nil {
		return err
	}
	defer ac.Close() //nolint:errcheck

	vctx, vcancel := context.WithTimeout(ctx, rn.callTimeout)
	defer vcancel()

	if _, err := ac.Version(vctx); err == nil {
		return fmt.Errorf("after the reset, the admin talosconfig still verifies the machine's certificate")
	}

	return nil
}

// maintenancePhase: reads of the reset machine, then ApplyConfiguration in
// maintenance to it and to the machines in maintenance from the start.
func (rn *runner) maintenancePhase(ctx context.Context) {
	rn.refresh(ctx)

	for _, m := range rn.lab.Machines {
		if m.Mode == "maintenance" && m.Up && m.Name != rn.resetMachine.Name {
			rn.installFresh(ctx, m)
		}
	}

	rn.refresh(ctx)

	if rn.resetMachine.Name == "" {
		rn.missing("maintenance ApplyConfiguration", "no machine was reset into maintenance by the write phase")

		return
	}

	m, ok := rn.byName(rn.resetMachine.Name)
	if !ok || m.Mode != "maintenance" || !m.Up {
		rn.r.Fail("maintenance "+rn.resetMachine.Name, "not up in maintenance (mode=%s up=%v)", m.Mode, m.Up)

		return
	}

	rn.readMaintenance(ctx, m)

	check := fmt.Sprintf("maintenance %s ApplyConfiguration (insecure) installs and the machine returns configured", m.Name)

	rn.r.Check(check, func() error {
		ic, err := rn.insecureClient(ctx, m.Address)
		if err != nil {
			return err
		}
		defer ic.Close() //nolint:errcheck

		cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)
		defer cancel()

		resp, err := ic.ApplyConfiguration(cctx, &machineapi.ApplyConfigurationRequest{
			Data: []byte(rn.resetConfig),
			Mode: machineapi.ApplyConfigurationRequest_AUTO,
		})
		if err != nil {
			return callErr("ApplyConfiguration", err)
		}

		if len(resp.GetMessages()) != 1 {
			return fmt.Errorf("%d messages, want 1", len(resp.GetMessages()))
		}

		back, err := rn.ctl.waitMachine(ctx, m.Name, rn.waitTimeout, "the machine to come back configured", func(x labMachine) bool {
			return x.Up && x.Mode == "configured" && x.Stage == "running"
		})
		if err != nil {
			return err
		}

		if err := rn.versionDirect(ctx, back, back.Version); err != nil {
			return fmt.Errorf("admin talosconfig after install: %w", err)
		}

		ac, err := rn.adminClient(ctx, back.Address)
		if err != nil {
			return err
		}
		defer ac.Close() //nolint:errcheck

		a := access{name: "direct", c: ac}

		if err := rn.checkHostnameRPC(ctx, a, back.Hostname); err != nil {
			return err
		}

		return rn.checkMachineConfig(ctx, a, rn.resetConfig)
	}())
}

// installFresh applies, in maintenance, the config of a configured worker of
// the same Talos minor (as the lab started) with the hostname changed, to a
// machine that was in maintenance from the start: it installs and comes back
// configured, reachable with the admin talosconfig.
func (rn *runner) installFresh(ctx context.Context, m labMachine) {
	check := fmt.Sprintf("maintenance %s (%s) ApplyConfiguration (insecure) installs a fresh machine", m.Name, m.Version)

	var donor labMachine

	for _, x := range rn.initial.Machines {
		if x.configured() && x.Role == "worker" && x.Name != m.Name {
			a, b := x.minor()
			c, d := m.minor()

			if donor.Name == "" || (a == c && b == d) {
				donor = x
			}
		}
	}

	if donor.Name == "" {
		rn.missing(check, "no configured worker to borrow a config from")

		return
	}

	old := "hostname: " + donor.Hostname + "\n"
	if strings.Count(donor.MachineConfig, old) != 1 {
		rn.missing(check, fmt.Sprintf("cannot find %q once in %s's config", strings.TrimSpace(old), donor.Name))

		return
	}

	body := strings.Replace(donor.MachineConfig, old, "hostname: "+m.Name+"\n", 1)

	rn.r.Check(check+" (config of "+donor.Name+")", func() error {
		ic, err := rn.insecureClient(ctx, m.Address)
		if err != nil {
			return err
		}
		defer ic.Close() //nolint:errcheck

		cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)
		defer cancel()

		if _, err := ic.ApplyConfiguration(cctx, &machineapi.ApplyConfigurationRequest{
			Data: []byte(body),
			Mode: machineapi.ApplyConfigurationRequest_AUTO,
		}); err != nil {
			return callErr("ApplyConfiguration", err)
		}

		back, err := rn.ctl.waitMachine(ctx, m.Name, rn.waitTimeout, "the machine to come back configured", func(x labMachine) bool {
			return x.Up && x.Mode == "configured" && x.Stage == "running"
		})
		if err != nil {
			return err
		}

		if err := rn.versionDirect(ctx, back, m.Version); err != nil {
			return fmt.Errorf("admin talosconfig after install: %w", err)
		}

		ac, err := rn.adminClient(ctx, back.Address)
		if err != nil {
			return err
		}
		defer ac.Close() //nolint:errcheck

		a := access{name: "direct", c: ac}

		if err := rn.checkHostnameRPC(ctx, a, m.Name); err != nil {
			return err
		}

		if err := rn.checkMachineConfig(ctx, a, body); err != nil {
			return err
		}

		// installed now: the system disk exists
		return rn.checkDisksRPC(ctx, a, back)
	}())
}
