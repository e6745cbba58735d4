package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"
)

func (rn *runner) readPhase(ctx context.Context) {
	cp1, ok := rn.firstControlPlane()
	if !ok {
		rn.r.Fail("read", "no configured, up control plane in the lab")

		return
	}

	via, err := rn.adminClient(ctx, cp1.Address)
	if !rn.r.Check(fmt.Sprintf("read client.New admin endpoint=%s (%s)", cp1.Address, cp1.Name), err) {
		return
	}
	defer via.Close() //nolint:errcheck

	viaReader, err := rn.readerClient(ctx, cp1.Address)
	if !rn.r.Check(fmt.Sprintf("read client.New reader endpoint=%s (%s)", cp1.Address, cp1.Name), err) {
		return
	}
	defer viaReader.Close() //nolint:errcheck

	var fan []labMachine

	for _, m := range rn.lab.Machines {
		if m.configured() && m.Up && len(fan) < 3 {
			fan = append(fan, m)
		}
	}

	rn.fanOut(ctx, via, fan)

	rn.r.Check(fmt.Sprintf("read via %s node with no machine is Unavailable", cp1.Name), func() error {
		cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)
		defer cancel()

		_, err := via.Version(client.WithNode(cctx, unusedAddress(rn.lab)))

		return expectCode(err, codes.Unavailable)
	}())

	for _, m := range rn.lab.Machines {
		if !m.Up {
			rn.r.Info("%s is down; not read", m.Name)

			continue
		}

		if !m.configured() {
			rn.readMaintenance(ctx, m)

			continue
		}

		direct, err := rn.adminClient(ctx, m.Address)
		if !rn.r.Check(fmt.Sprintf("read %s client.New admin direct", m.Name), err) {
			continue
		}

		directReader, err := rn.readerClient(ctx, m.Address)
		if !rn.r.Check(fmt.Sprintf("read %s client.New reader direct", m.Name), err) {
			direct.Close() //nolint:errcheck

			continue
		}

		paths := []struct {
			admin, reader access
		}{
			{access{name: "direct", c: direct}, access{name: "direct", c: directReader}},
			{access{name: "via " + cp1.Name, c: via, node: m.Address}, access{name: "via " + cp1.Name, c: viaReader, node: m.Address}},
		}

		for _, p := range paths {
			rn.readConfigured(ctx, m, p.admin, p.reader)
		}

		// A configured machine does not serve a client without a certificate.
		if ic, err := rn.insecureClient(ctx, m.Address); err == nil {
			cctx, cancel := context.WithTimeout(ctx, rn.callTimeout)
			_, verr := ic.Version(cctx)

			cancel()
			ic.Close() //nolint:errcheck

			check := fmt.Sprintf("read %s no client certificate is refused", m.Name)
			if verr == nil {
				rn.r.Fail(check, "Version succeeded without a client certificate")
			} else {
				rn.r.Ok("%s (%s)", check, errDetail(verr))
			}
		}

		direct.Close()       //nolint:errcheck
		directReader.Close() //nolint:errcheck
	}
}

// readConfigured runs every read check on a configured machine through a.
func (rn *runner) readConfigured(ctx context.Context, m labMachine, a, reader access) {
	pfx := fmt.Sprintf("read %s [%s]", m.Name, a.name)

	rn.r.Check(pfx+" Version", rn.checkVersion(ctx, a, m.Version))
	rn.r.Check(pfx+" Hostname", rn.checkHostnameRPC(ctx, a, m.Hostname))
	rn.r.Check(pfx+" ServiceList", rn.checkServiceList(ctx, a))
	rn.r.Check(pfx+" Disks", rn.checkDisksRPC(ctx, a, m))

	rn.cosiReads(ctx, pfx, a, m)

	if a.node == "" {
		rn.checkYAMLSpecs(ctx, pfx, a, yamlSpecTargets)
	}

	// machine config: admin reads it (Sensitive), the reader is refused.
	rn.r.Check(pfx+" COSI MachineConfig (admin) equals the applied config", rn.checkMachineConfig(ctx, a, m.MachineConfig))
	rn.r.Check(pfx+" COSI MachineConfig refused to os:reader", func() error {
		cctx, cancel := rn.call(ctx, reader)
		defer cancel()

		_, err := safe.StateGet[*config.MachineConfig](cctx, reader.c.COSI, machineConfigPtr())

		return expectCode(err, codes.PermissionDenied)
	}())
	rn.r.Check(pfx+" Version as os:reader", rn.checkVersion(ctx, reader, m.Version))
	rn.r.Check(pfx+" ls /etc/cni/net.d", rn.checkListCNI(ctx, a, m))
	rn.r.Check(pfx+" ls /etc/cni/net.d as os:reader", rn.checkListCNI(ctx, reader, m))
	rn.r.Check(pfx+" ls of a missing directory is Unknown", func() error {
		_, err := rn.list(ctx, a, "/no/such/dir")

		return expectCode(err, codes.Unknown)
	}())

	if m.controlPlane() && len(rn.expectedEtcdMembers(m)) == 0 {
		rn.r.Info("%s: cluster not bootstrapped, etcd not checked", pfx)
	} else if m.controlPlane() {
		rn.r.Check(pfx+" EtcdMemberList", rn.checkEtcdMembers(ctx, a, m, nil))
		rn.r.Check(pfx+" EtcdStatus", rn.checkEtcdStatus(ctx, a, m))
	}
}

func (rn *runner) checkVersion(ctx context.Context, a access, want string) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := a.c.Version(cctx)
	if err != nil {
		return callErr("Version", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("Version: %d messages, want 1", len(resp.GetMessages()))
	}

	msg := resp.GetMessages()[0]

	if got := msg.GetVersion().GetTag(); got != want {
		return fmt.Errorf("Version tag = %q, want %q", got, want)
	}

	if msg.GetVersion().GetArch() == "" || msg.GetVersion().GetOs() == "" {
		return fmt.Errorf("Version: os/arch empty (%q/%q)", msg.GetVersion().GetOs(), msg.GetVersion().GetArch())
	}

	return nil
}

func (rn *runner) checkHostnameRPC(ctx context.Context, a access, want string) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := client.FilterMessages(a.c.MachineClient.Hostname(cctx, &emptypb.Empty{}))
	if err != nil {
		return callErr("Hostname", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("Hostname: %d messages, want 1", len(resp.GetMessages()))
	}

	if got := resp.GetMessages()[0].GetHostname(); got != want {
		return fmt.Errorf("hostname = %q, want %q", got, want)
	}

	return nil
}

func (rn *runner) checkServiceList(ctx context.Context, a access) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := a.c.ServiceList(cctx)
	if err != nil {
		return callErr("ServiceList", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("ServiceList: %d messages, want 1", len(resp.GetMessages()))
	}

	svcs := resp.GetMessages()[0].GetServices()
	if len(svcs) == 0 {
		return fmt.Errorf("ServiceList: no services")
	}

	var ids []string

	for _, s := range svcs {
		if s.GetId() == "" || s.GetState() == "" {
			return fmt.Errorf("ServiceList: service with empty id/state: %v", s)
		}

		ids = append(ids, s.GetId())
	}

	if !slices.Contains(ids, "apid") && !slices.Contains(ids, "machined") {
		return fmt.Errorf("ServiceList: neither apid nor machined among %v", ids)
	}

	return nil
}

func (rn *runner) checkDisksRPC(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := a.c.Disks(cctx)
	if err != nil {
		return callErr("Disks", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("Disks: %d messages, want 1", len(resp.GetMessages()))
	}

	got := map[string]string{}

	for _, d := range resp.GetMessages()[0].GetDisks() {
		got[d.GetDeviceName()] = fmt.Sprintf("size=%d model=%q serial=%q system=%v", d.GetSize(), d.GetModel(), d.GetSerial(), d.GetSystemDisk())
	}

	want := map[string]string{}

	for _, d := range m.Disks {
		// A machine never installed (maintenance from ISO/PXE) has no system
		// disk, whatever the lab plans to install to; a machine reset into
		// maintenance (STATE+EPHEMERAL wiped) is still installed.
		system := d.SystemDisk && (m.configured() || rn.installed[m.Name])
		want[d.DevPath] = fmt.Sprintf("size=%d model=%q serial=%q system=%v", d.Size, d.Model, d.Serial, system)
	}

	return compareMaps("Disks (device_name)", got, want)
}

func compareMaps(what string, got, want map[string]string) error {
	var problems []string

	for _, k := range sortedKeys(want) {
		g, ok := got[k]

		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s missing", k))
		case g != want[k]:
			problems = append(problems, fmt.Sprintf("%s: got %s, want %s", k, g, want[k]))
		}
	}

	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s unexpected (%s)", k, got[k]))
		}
	}

	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", what, strings.Join(problems, "; "))
	}

	return nil
}

// clusterMachines are the configured machines of m's cluster (discovery members).
func (rn *runner) clusterMachines(m labMachine) []labMachine {
	var out []labMachine

	for _, x := range rn.lab.Machines {
		if x.configured() && x.ClusterID == m.ClusterID {
			out = append(out, x)
		}
	}

	return out
}

func (rn *runner) cosiReads(ctx context.Context, pfx string, a access, m labMachine) {
	st := a.c.COSI

	rn.r.Check(pfx+" COSI Identity", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*cluster.Identity](cctx, st, cluster.NewIdentity(cluster.NamespaceName, cluster.LocalIdentity).Metadata())
		if err != nil {
			return callErr("Get Identities.cluster.talos.dev/local", err)
		}

		if got := r.TypedSpec().NodeID; got != m.NodeID {
			return fmt.Errorf("nodeId = %q, want %q", got, m.NodeID)
		}

		return nil
	}())

	rn.r.Check(pfx+" COSI Info", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*cluster.Info](cctx, st, cluster.NewInfo().Metadata())
		if err != nil {
			return callErr("Get Infos.cluster.talos.dev/current", err)
		}

		spec := r.TypedSpec()
		if spec.ClusterID != m.ClusterID || spec.ClusterName != m.ClusterName {
			return fmt.Errorf("cluster id/name = %q/%q, want %q/%q", spec.ClusterID, spec.ClusterName, m.ClusterID, m.ClusterName)
		}

		if spec.ClusterID != rn.lab.Cluster.ID || spec.ClusterName != rn.lab.Cluster.Name {
			return fmt.Errorf("cluster id/name = %q/%q, lab cluster is %q/%q", spec.ClusterID, spec.ClusterName, rn.lab.Cluster.ID, rn.lab.Cluster.Name)
		}

		return nil
	}())

	rn.r.Check(pfx+" COSI Members", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		list, err := safe.StateListAll[*cluster.Member](cctx, st)
		if err != nil {
			return callErr("List Members.cluster.talos.dev", err)
		}

		got := map[string]string{}

		for r := range list.All() {
			s := r.TypedSpec()

			addrs := make([]string, 0, len(s.Addresses))
			for _, ad := range s.Addresses {
				addrs = append(addrs, ad.String())
			}

			if r.Metadata().ID() != s.NodeID {
				return fmt.Errorf("member id %q != spec nodeId %q", r.Metadata().ID(), s.NodeID)
			}

			got[s.NodeID] = fmt.Sprintf("hostname=%s type=%s addresses=%v", s.Hostname, s.MachineType, addrs)
		}

		want := map[string]string{}
		for _, x := range rn.clusterMachines(m) {
			want[x.NodeID] = fmt.Sprintf("hostname=%s type=%s addresses=%v", x.Hostname, x.Role, []string{x.Address})
		}

		// machineType "init" is a control plane too.
		for k, v := range got {
			if w, ok := want[k]; ok && strings.Replace(v, "type=init", "type=controlplane", 1) == w {
				got[k] = w
			}
		}

		return compareMaps("members (by node id)", got, want)
	}())

	rn.r.Check(pfx+" COSI MachineStatus", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*runtime.MachineStatus](cctx, st, runtime.NewMachineStatus().Metadata())
		if err != nil {
			return callErr("Get MachineStatuses.runtime.talos.dev/machine", err)
		}

		if got := r.TypedSpec().Stage.String(); got != m.Stage {
			return fmt.Errorf("stage = %q, want %q", got, m.Stage)
		}

		return nil
	}())

	rn.r.Check(pfx+" COSI SystemInformation", rn.checkSystemInformation(ctx, a, m))

	rn.r.Check(pfx+" COSI HostnameStatus", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*network.HostnameStatus](cctx, st, network.NewHostnameStatus(network.NamespaceName, network.HostnameID).Metadata())
		if err != nil {
			return callErr("Get HostnameStatuses.net.talos.dev/hostname", err)
		}

		if got := r.TypedSpec().Hostname; got != m.Hostname {
			return fmt.Errorf("hostname = %q, want %q", got, m.Hostname)
		}

		return nil
	}())

	// the Node name the collection waits for: Talos's, the hostname lowercased (the lab sets no registerWithFQDN)
	rn.r.Check(pfx+" COSI Nodename", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*k8s.Nodename](cctx, st, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata())
		if err != nil {
			return callErr("Get Nodenames.kubernetes.talos.dev/nodename", err)
		}

		if got, want := r.TypedSpec().Nodename, strings.ToLower(m.Hostname); got != want {
			return fmt.Errorf("nodename = %q, want %q", got, want)
		}

		return nil
	}())

	// the system extensions the collection keeps through an upgrade: one resource per extension, the Image
	// Factory's virtual "schematic" one among them, decoded by machinery's typed client (extensions.Layer)
	rn.r.Check(pfx+" COSI ExtensionStatuses", rn.checkExtensionStatuses(ctx, a, m))

	rn.r.Check(pfx+" COSI Disks", rn.checkDiskResources(ctx, a, m))
	rn.r.Check(pfx+" COSI DiscoveredVolumes", rn.checkDiscoveredVolumes(ctx, a, m))

	rn.r.Check(pfx+" COSI SystemDisk", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*block.SystemDisk](cctx, st, block.NewSystemDisk(block.NamespaceName, block.SystemDiskID).Metadata())
		if err != nil {
			return callErr("Get SystemDisks.block.talos.dev/system-disk", err)
		}

		want := ""

		for _, d := range m.Disks {
			if d.SystemDisk {
				want = d.DevPath
			}
		}

		if got := r.TypedSpec().DevPath; got != want {
			return fmt.Errorf("devPath = %q, want %q", got, want)
		}

		if r.TypedSpec().DiskID == "" {
			return fmt.Errorf("diskID is empty")
		}

		return nil
	}())

	rn.r.Check(pfx+" COSI VolumeStatuses", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		list, err := safe.StateListAll[*block.VolumeStatus](cctx, st)
		if err != nil {
			return callErr("List VolumeStatuses.block.talos.dev", err)
		}

		got := map[string]string{}

		for r := range list.All() {
			s := r.TypedSpec()
			got[r.Metadata().ID()] = fmt.Sprintf("encryption=%s", s.EncryptionProvider)

			if s.Phase.String() != "ready" && slices.ContainsFunc(m.Volumes, func(v labVolume) bool { return v.ID == r.Metadata().ID() }) {
				return fmt.Errorf("volume %s phase = %s, want ready", r.Metadata().ID(), s.Phase)
			}
		}

		want := map[string]string{}

		for _, v := range m.Volumes {
			enc := block.EncryptionProviderNone
			if v.Encrypted {
				enc = block.EncryptionProviderLUKS2
			}

			want[v.ID] = fmt.Sprintf("encryption=%s", enc)
		}

		// Only the lab's volumes are compared; Talos may have more (ignored).
		for k := range got {
			if _, ok := want[k]; !ok {
				delete(got, k)
			}
		}

		return compareMaps("volume statuses", got, want)
	}())
}

func (rn *runner) checkSystemInformation(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	r, err := safe.StateGet[*hardware.SystemInformation](cctx, a.c.COSI, hardware.NewSystemInformation(hardware.SystemInformationID).Metadata())
	if err != nil {
		return callErr("Get SystemInformations.hardware.talos.dev/systeminformation", err)
	}

	if got := r.TypedSpec().UUID; got != m.UUID {
		return fmt.Errorf("uuid = %q, want %q", got, m.UUID)
	}

	return nil
}

func (rn *runner) checkDiskResources(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	list, err := safe.StateListAll[*block.Disk](cctx, a.c.COSI)
	if err != nil {
		return callErr("List Disks.block.talos.dev", err)
	}

	got := map[string]string{}

	for r := range list.All() {
		s := r.TypedSpec()
		got[s.DevPath] = fmt.Sprintf("size=%d model=%q serial=%q", s.Size, s.Model, s.Serial)

		if "/dev/"+r.Metadata().ID() != s.DevPath {
			return fmt.Errorf("disk id %q does not match dev_path %q", r.Metadata().ID(), s.DevPath)
		}
	}

	want := map[string]string{}
	for _, d := range m.Disks {
		want[d.DevPath] = fmt.Sprintf("size=%d model=%q serial=%q", d.Size, d.Model, d.Serial)
	}

	return compareMaps("disks (dev_path)", got, want)
}

func (rn *runner) checkDiscoveredVolumes(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	list, err := safe.StateListAll[*block.DiscoveredVolume](cctx, a.c.COSI)
	if err != nil {
		return callErr("List DiscoveredVolumes.block.talos.dev", err)
	}

	var devs []string

	for r := range list.All() {
		s := r.TypedSpec()
		if s.DevPath == "" {
			return fmt.Errorf("discovered volume %s has an empty dev_path", r.Metadata().ID())
		}

		devs = append(devs, s.DevPath)
	}

	sort.Strings(devs)

	for _, d := range m.Disks {
		if !slices.Contains(devs, d.DevPath) {
			return fmt.Errorf("disk %s not among the discovered volumes %v", d.DevPath, devs)
		}
	}

	return nil
}

func (rn *runner) checkMachineConfig(ctx context.Context, a access, want string) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	// Typed get: the client decodes the spec with configloader (so the
	// simulator's config must also be a valid Talos config).
	r, err := safe.StateGet[*config.MachineConfig](cctx, a.c.COSI, machineConfigPtr())
	if err != nil {
		return callErr("Get MachineConfigs.config.talos.dev/v1alpha1", err)
	}

	got, err := r.Provider().Bytes()
	if err != nil {
		return fmt.Errorf("config bytes: %w", err)
	}

	if string(got) != want {
		return fmt.Errorf("config differs from the lab's machine_config (%d vs %d bytes)%s", len(got), len(want), firstDiff(string(got), want))
	}

	return nil
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")

	for i := range max(len(la), len(lb)) {
		var x, y string

		if i < len(la) {
			x = la[i]
		}

		if i < len(lb) {
			y = lb[i]
		}

		if x != y {
			return fmt.Sprintf("; first difference at line %d: got %q, want %q", i+1, x, y)
		}
	}

	return ""
}

// expectedEtcdMembers: member id -> hostname, from the lab.
func (rn *runner) expectedEtcdMembers(m labMachine) map[uint64]string {
	out := map[uint64]string{}

	for _, x := range rn.clusterMachines(m) {
		if x.controlPlane() && x.EtcdMemberID != 0 {
			out[x.EtcdMemberID] = x.Hostname
		}
	}

	return out
}

// checkEtcdMembers compares EtcdMemberList with the lab (or with want, when given).
func (rn *runner) checkEtcdMembers(ctx context.Context, a access, m labMachine, want map[uint64]string) error {
	if want == nil {
		want = rn.expectedEtcdMembers(m)
	}

	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := a.c.EtcdMemberList(cctx, &machineapi.EtcdMemberListRequest{})
	if err != nil {
		return callErr("EtcdMemberList", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("EtcdMemberList: %d messages, want 1", len(resp.GetMessages()))
	}

	got := map[string]string{}

	for _, mem := range resp.GetMessages()[0].GetMembers() {
		got[fmt.Sprint(mem.GetId())] = mem.GetHostname()

		if len(mem.GetPeerUrls()) == 0 || len(mem.GetClientUrls()) == 0 {
			return fmt.Errorf("member %d (%s): empty peer/client urls", mem.GetId(), mem.GetHostname())
		}
	}

	w := map[string]string{}
	for id, h := range want {
		w[fmt.Sprint(id)] = h
	}

	return compareMaps("etcd members (id -> hostname)", got, w)
}

func (rn *runner) checkEtcdStatus(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	resp, err := a.c.EtcdStatus(cctx)
	if err != nil {
		return callErr("EtcdStatus", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("EtcdStatus: %d messages, want 1", len(resp.GetMessages()))
	}

	ms := resp.GetMessages()[0].GetMemberStatus()
	if ms.GetMemberId() != m.EtcdMemberID {
		return fmt.Errorf("member_id = %d, want %d", ms.GetMemberId(), m.EtcdMemberID)
	}

	if _, ok := rn.expectedEtcdMembers(m)[ms.GetLeader()]; !ok {
		return fmt.Errorf("leader %d is not a member", ms.GetLeader())
	}

	return nil
}

// checkExtensionStatuses lists ExtensionStatuses.runtime.talos.dev with the typed client: ids "0", "1", ... in the
// order the lab lists the machine's extensions, each with its name, version, image, author and compatibility.
func (rn *runner) checkExtensionStatuses(ctx context.Context, a access, m labMachine) error {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	list, err := safe.StateListAll[*runtime.ExtensionStatus](cctx, a.c.COSI)
	if err != nil {
		return callErr("List ExtensionStatuses.runtime.talos.dev", err)
	}

	got := []string{}

	for r := range list.All() {
		spec := r.TypedSpec()
		if spec.Image == "" || spec.Metadata.Author == "" || spec.Metadata.Compatibility.Talos.Version == "" {
			return fmt.Errorf("%s: image, author or compatibility is empty", r.Metadata().ID())
		}

		got = append(got, fmt.Sprintf("%s=%s %s", r.Metadata().ID(), spec.Metadata.Name, spec.Metadata.Version))
	}

	want := []string{}
	for i, e := range m.Extensions {
		want = append(want, fmt.Sprintf("%d=%s %s", i, e.Name, e.Version))
	}

	sort.Strings(got)
	sort.Strings(want)

	if !slices.Equal(got, want) {
		return fmt.Errorf("extensions = %v, want %v", got, want)
	}

	return nil
}

// readMaintenance: talosctl --insecure against a machine in maintenance mode.
func (rn *runner) readMaintenance(ctx context.Context, m labMachine) {
	pfx := fmt.Sprintf("maintenance %s (%s)", m.Name, m.Version)

	ic, err := rn.insecureClient(ctx, m.Address)
	if !rn.r.Check(pfx+" client.New insecure", err) {
		return
	}
	defer ic.Close() //nolint:errcheck

	a := access{name: "insecure", c: ic}

	if versionAtLeast(m.Version, 1, 13) {
		rn.r.Check(pfx+" Version", rn.checkVersion(ctx, a, m.Version))
		rn.r.Check(pfx+" ServiceList", rn.checkServiceList(ctx, a))
	} else {
		rn.r.Check(pfx+" Version is Unimplemented", func() error {
			cctx, cancel := rn.call(ctx, a)
			defer cancel()

			_, err := ic.Version(cctx)

			return expectCode(err, codes.Unimplemented)
		}())
	}

	rn.r.Check(pfx+" Disks", rn.checkDisksRPC(ctx, a, m))
	rn.r.Check(pfx+" COSI SystemInformation", rn.checkSystemInformation(ctx, a, m))
	rn.r.Check(pfx+" COSI Disks", rn.checkDiskResources(ctx, a, m))
	rn.r.Check(pfx+" COSI DiscoveredVolumes", rn.checkDiscoveredVolumes(ctx, a, m))
	rn.r.Check(pfx+" COSI MachineStatus", func() error {
		cctx, cancel := rn.call(ctx, a)
		defer cancel()

		r, err := safe.StateGet[*runtime.MachineStatus](cctx, ic.COSI, runtime.NewMachineStatus().Metadata())
		if err != nil {
			return callErr("Get MachineStatuses.runtime.talos.dev/machine", err)
		}

		if got := r.TypedSpec().Stage.String(); got != "maintenance" {
			return fmt.Errorf("stage = %q, want maintenance", got)
		}

		return nil
	}())

	rn.maintenanceRefusals(ctx, pfx, a, m)

	rn.checkYAMLSpecs(ctx, pfx, a, []yamlSpecTarget{
		{"runtime", "MachineStatuses.runtime.talos.dev", "machine", false},
		{"hardware", "SystemInformations.hardware.talos.dev", "systeminformation", false},
		{"runtime", "DiscoveredVolumes.block.talos.dev", "", false},
		{"runtime", "Disks.block.talos.dev", "", false},
	})

	if versionAtLeast(m.Version, 1, 13) {
		// maintenance callers are os:reader: a Sensitive resource is refused.
		rn.r.Check(pfx+" COSI MachineConfig refused", func() error {
			cctx, cancel := rn.call(ctx, a)
			defer cancel()

			_, err := safe.StateGet[*config.MachineConfig](cctx, ic.COSI, machineConfigPtr())

			return expectCode(err, codes.PermissionDenied, codes.NotFound)
		}())
	}
}

func machineConfigPtr() *resource.Metadata {
	md := resource.NewMetadata(config.NamespaceName, config.MachineConfigType, config.ActiveID, resource.VersionUndefined)

	return &md
}

// unusedAddress is an address in the lab's /24 where no machine listens.
func unusedAddress(l *labState) string {
	used := map[string]bool{}
	for _, m := range l.Machines {
		used[m.Address] = true
	}

	base := l.Machines[0].Address
	base = base[:strings.LastIndex(base, ".")]

	for i := 250; i > 1; i-- {
		a := fmt.Sprintf("%s.%d", base, i)
		if !used[a] {
			return a
		}
	}

	return "127.0.0.2"
}

// list reads a directory listing as talosctl ls does (depth 1: no recursion) until the stream ends.
func (rn *runner) list(ctx context.Context, a access, root string) ([]*machineapi.FileInfo, error) {
	cctx, cancel := rn.call(ctx, a)
	defer cancel()

	stream, err := a.c.LS(cctx, &machineapi.ListRequest{Root: root})
	if err != nil {
		return nil, err
	}

	var out []*machineapi.FileInfo

	for {
		info, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}

		if err != nil {
			return out, err
		}

		if info.GetMetadata().GetError() != "" {
			return out, fmt.Errorf("metadata error: %s", info.GetMetadata().GetError())
		}

		out = append(out, info)
	}
}

// checkListCNI: the root comes first as ".", then the CNI configs the lab says the machine has, in order.
func (rn *runner) checkListCNI(ctx context.Context, a access, m labMachine) error {
	const root = "/etc/cni/net.d"

	infos, err := rn.list(ctx, a, root)
	if err != nil {
		return callErr("List", err)
	}

	if len(infos) == 0 || infos[0].GetRelativeName() != "." || !infos[0].GetIsDir() || infos[0].GetName() != root {
		return fmt.Errorf("List: the first entry is not the root directory as \".\": %v", infos)
	}

	if fs.FileMode(infos[0].GetMode())&fs.ModeDir == 0 {
		return fmt.Errorf("List: the root's mode %o has no directory bit", infos[0].GetMode())
	}

	var names []string

	for _, info := range infos[1:] {
		if info.GetError() != "" {
			return fmt.Errorf("List: %s: %s", info.GetName(), info.GetError())
		}

		if info.GetName() != root+"/"+info.GetRelativeName() {
			return fmt.Errorf("List: name %q and relative name %q disagree", info.GetName(), info.GetRelativeName())
		}

		if !fs.FileMode(info.GetMode()).IsRegular() || info.GetSize() <= 0 {
			return fmt.Errorf("List: %s: not a non-empty regular file (mode %o, size %d)", info.GetName(), info.GetMode(), info.GetSize())
		}

		names = append(names, info.GetRelativeName())
	}

	want := slices.Clone(m.CNIFiles)
	sort.Strings(want)

	if !slices.Equal(names, want) {
		return fmt.Errorf("List: entries %v, want %v (lexical order)", names, want)
	}

	return nil
}
