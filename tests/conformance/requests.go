package main

// The `requests` mode: what OUR client sent for a Talos upgrade, as the simulator recorded it, against
// what machinery's client sends for the same operation (the way talosctl 1.14 `upgrade` builds it),
// both decoded with machinery's own types. The simulator only records bytes; the judging is here.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const (
	pathImagePull        = "/machine.ImageService/Pull"
	pathLifecycleUpgrade = "/machine.LifecycleService/Upgrade"
	pathReboot           = "/machine.MachineService/Reboot"
)

func runRequests(args []string) int {
	fs := flag.NewFlagSet("requests", flag.ExitOnError)
	labPath := fs.String("lab", "", "lab.json written by the simulator")
	ours := fs.String("ours", "", "the machine our client upgraded (v1.13+)")
	reference := fs.String("reference", "", "another v1.13+ machine, upgraded here by machinery's client as talosctl does")
	image := fs.String("image", "", "the installer image both were given")
	callTimeout := fs.Duration("call-timeout", 15*time.Second, "timeout of one API call")

	_ = fs.Parse(args)

	if *labPath == "" || *ours == "" || *reference == "" || *image == "" {
		fmt.Fprintln(os.Stderr, "requests: --lab, --ours, --reference and --image are required")

		return 2
	}

	r := &reporter{}

	lab, err := loadLab(*labPath)
	if err != nil {
		r.Fail("load lab", "%v", err)

		return r.Summary("requests")
	}

	rn := &runner{
		r:           r,
		lab:         lab,
		ctl:         &labControl{base: strings.TrimRight(lab.Control, "/"), http: &http.Client{Timeout: 10 * time.Second}},
		callTimeout: *callTimeout,
	}

	ctx := context.Background()
	rn.refresh(ctx)

	ourRequests, err := rn.ctl.requests(ctx, *ours)
	if !r.Check(fmt.Sprintf("requests GET /machines/%s/requests (what our client sent)", *ours), err) {
		return r.Summary("requests")
	}

	ref, ok := rn.byName(*reference)
	if !ok || !ref.configured() || !versionAtLeast(ref.Version, 1, 13) {
		r.Fail("requests reference machine", "%q is not a configured v1.13+ machine of the lab", *reference)

		return r.Summary("requests")
	}

	pulled, err := rn.talosctlUpgrade(ctx, ref, *image)
	if !r.Check(fmt.Sprintf("requests machinery's client upgrades %s as talosctl does (Pull, Upgrade, Reboot)", ref.Name), err) {
		return r.Summary("requests")
	}

	theirRequests, err := rn.ctl.requests(ctx, ref.Name)
	if !r.Check(fmt.Sprintf("requests GET /machines/%s/requests (what machinery's client sent)", ref.Name), err) {
		return r.Summary("requests")
	}

	compareRequests(r, ourRequests, theirRequests, pulled)

	return r.Summary("requests")
}

// talosctlUpgrade replays talosctl 1.14 `upgrade --image IMAGE` (cmd/talosctl/cmd/talos/upgrade.go) on
// one node through the first control plane: Pull, LifecycleService.Upgrade, Reboot (mode DEFAULT, as
// client.RebootWithResponse builds it). It returns the name the Pull reported.
func (rn *runner) talosctlUpgrade(ctx context.Context, m labMachine, image string) (string, error) {
	cp1, ok := rn.firstControlPlane()
	if !ok {
		return "", errors.New("no configured, up control plane in the lab")
	}

	c, err := rn.adminClient(ctx, cp1.Address)
	if err != nil {
		return "", err
	}
	defer c.Close() //nolint:errcheck

	cctx, cancel := rn.nodeCall(ctx, m)
	defer cancel()

	pull, err := c.ImageClient.Pull(cctx, &machineapi.ImageServicePullRequest{Containerd: talosctlUpgradeContainerd(), ImageRef: image})
	if err != nil {
		return "", callErr("ImageService.Pull", err)
	}

	pulled := ""

	for {
		resp, err := pull.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return "", callErr("ImageService.Pull recv", err)
		}

		if n := resp.GetName(); n != "" {
			pulled = n
		}
	}

	upgrade, err := c.LifecycleClient.Upgrade(cctx, &machineapi.LifecycleServiceUpgradeRequest{
		Containerd: talosctlUpgradeContainerd(),
		Source:     &machineapi.InstallArtifactsSource{ImageName: image},
	})
	if err != nil {
		return "", callErr("LifecycleService.Upgrade", err)
	}

	exit := int32(-1)

	for {
		resp, err := upgrade.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			// talosctl names the image as given; a store that knows it only pinned refuses it. The request
			// was sent (and recorded) all the same.
			rn.r.Info("%s: talosctl's LifecycleService.Upgrade with the image as given: %s", m.Name, errDetail(err))

			break
		}

		if p, ok := resp.GetProgress().GetResponse().(*machineapi.LifecycleServiceInstallProgress_ExitCode); ok {
			exit = p.ExitCode
		}
	}

	rn.r.Info("%s: pulled %q, installer exit code %d", m.Name, pulled, exit)

	if err := c.Reboot(cctx, client.WithRebootMode(machineapi.RebootRequest_DEFAULT)); err != nil {
		return "", callErr("Reboot", err)
	}

	return pulled, nil
}

// compareRequests decodes both sides with machinery's types: ours must equal theirs, except that our
// Upgrade names the image as the Pull reported it (InstallArtifactsSource.image_name: "The reference
// name of the image, as returned by `talosctl image pull`"; talosctl debug does so, talosctl upgrade
// passes the reference as given, which a tag+digest reference is not stored under).
func compareRequests(r *reporter, ours, theirs map[string][]byte, pulled string) {
	for _, c := range []struct {
		path string
		new  func() proto.Message
		want func(proto.Message)
	}{
		{pathImagePull, func() proto.Message { return &machineapi.ImageServicePullRequest{} }, nil},
		{pathLifecycleUpgrade, func() proto.Message { return &machineapi.LifecycleServiceUpgradeRequest{} }, func(m proto.Message) {
			m.(*machineapi.LifecycleServiceUpgradeRequest).Source.ImageName = pulled
		}},
		{pathReboot, func() proto.Message { return &machineapi.RebootRequest{} }, nil},
	} {
		check := "requests " + c.path + ": ours = machinery's"

		our, err := decodeRecorded(ours, c.path, c.new())
		if err != nil {
			r.Fail(check, "ours: %v", err)

			continue
		}

		their, err := decodeRecorded(theirs, c.path, c.new())
		if err != nil {
			r.Fail(check, "machinery's: %v", err)

			continue
		}

		if c.want != nil {
			c.want(their)
		}

		if !proto.Equal(our, their) {
			r.Fail(check, "ours %s, want %s", compact(our), compact(their))

			continue
		}

		r.Ok("%s (%s)", check, compact(our))
	}

	// the field issue 11 is about, said explicitly
	if upgrade, err := decodeRecorded(ours, pathLifecycleUpgrade, &machineapi.LifecycleServiceUpgradeRequest{}); err == nil {
		ci := upgrade.(*machineapi.LifecycleServiceUpgradeRequest).GetContainerd()
		want := talosctlUpgradeContainerd()
		r.Check("requests our containerd instance is talosctl upgrade's (driver CRI, namespace NS_SYSTEM)", func() error {
			if ci.GetDriver() != want.GetDriver() || ci.GetNamespace() != want.GetNamespace() {
				return fmt.Errorf("ours is driver %s namespace %s", ci.GetDriver(), ci.GetNamespace())
			}

			return nil
		}())
	}
}

func compact(m proto.Message) string {
	return protojson.MarshalOptions{Multiline: false}.Format(m)
}

// decodeRecorded unmarshals a recorded request with machinery's type and refuses fields machinery does not know.
func decodeRecorded(recorded map[string][]byte, path string, msg proto.Message) (proto.Message, error) {
	raw, ok := recorded[path]
	if !ok {
		return nil, fmt.Errorf("no %s request was recorded", path)
	}

	if err := proto.Unmarshal(raw, msg); err != nil {
		return nil, fmt.Errorf("%s: not a %s: %w", path, msg.ProtoReflect().Descriptor().FullName(), err)
	}

	if unknown := unknownFields(msg.ProtoReflect(), ""); len(unknown) > 0 {
		return nil, fmt.Errorf("%s: fields machinery does not know: %s", path, strings.Join(unknown, ", "))
	}

	return msg, nil
}

func unknownFields(m protoreflect.Message, prefix string) []string {
	var out []string

	if len(m.GetUnknown()) > 0 {
		out = append(out, fmt.Sprintf("%s(%d bytes)", prefix, len(m.GetUnknown())))
	}

	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			out = append(out, unknownFields(v.Message(), prefix+string(fd.Name())+".")...)
		}

		return true
	})

	return out
}
