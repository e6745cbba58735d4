package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	cosiv1alpha1 "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// yamlSpecTarget is one COSI resource (id set) or type (id empty: List).
type yamlSpecTarget struct {
	ns, typ, id string
	optional    bool // NotFound (Get) or no resource (List) is not a failure
}

var yamlSpecTargets = []yamlSpecTarget{
	{"cluster", "Identities.cluster.talos.dev", "local", false},
	{"cluster", "Infos.cluster.talos.dev", "current", false},
	{"cluster", "Members.cluster.talos.dev", "", false},
	{"runtime", "MachineStatuses.runtime.talos.dev", "machine", false},
	{"hardware", "SystemInformations.hardware.talos.dev", "systeminformation", false},
	{"network", "HostnameStatuses.net.talos.dev", "hostname", false},
	{"runtime", "DiscoveredVolumes.block.talos.dev", "", false},
	{"runtime", "VolumeStatuses.block.talos.dev", "", false},
	{"runtime", "Disks.block.talos.dev", "", false},
	{"runtime", "SystemDisks.block.talos.dev", "system-disk", false},
	{"config", "MachineConfigs.config.talos.dev", "v1alpha1", false},
	{"runtime", "Versions.runtime.talos.dev", "version", true},
	{"k8s", "KubePrismStatuses.kubernetes.talos.dev", "k8s-loadbalancer", true},
	{"k8s", "Nodenames.kubernetes.talos.dev", "nodename", true},
	// one per system extension: a machine that runs none has none (an empty List is no failure)
	{"runtime", "ExtensionStatuses.runtime.talos.dev", "", true},
}

// checkYAMLSpecs reads resources with the raw COSI State client and checks
// that yaml_spec is what Talos would send for the spec in proto_spec: Talos
// (cosi runtime protobuf.FromResource) sets yaml_spec = yaml.Marshal(spec).
// The collection reads yaml_spec, the Go client reads proto_spec: they must
// agree.
func (rn *runner) checkYAMLSpecs(ctx context.Context, pfx string, a access, targets []yamlSpecTarget) {
	sc := cosiv1alpha1.NewStateClient(a.c.Conn())

	for _, t := range targets {
		name := t.typ
		if t.id != "" {
			name += "/" + t.id
		}

		rn.r.Check(fmt.Sprintf("%s COSI %s yaml_spec == yaml(proto_spec)", pfx, name), func() error {
			cctx, cancel := rn.call(ctx, a)
			defer cancel()

			var resources []*cosiv1alpha1.Resource

			if t.id != "" {
				resp, err := sc.Get(cctx, &cosiv1alpha1.GetRequest{Namespace: t.ns, Type: t.typ, Id: t.id})
				if err != nil && t.optional && status.Code(err) == codes.NotFound {
					rn.r.Info("%s: %s not served by the lab (optional)", pfx, name)

					return nil
				}

				if err != nil {
					return callErr("Get", err)
				}

				resources = append(resources, resp.GetResource())
			} else {
				stream, err := sc.List(cctx, &cosiv1alpha1.ListRequest{Namespace: t.ns, Type: t.typ})
				if err != nil {
					return callErr("List", err)
				}

				for {
					resp, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}

					if err != nil {
						return callErr("List recv", err)
					}

					resources = append(resources, resp.GetResource())
				}

				if len(resources) == 0 && t.optional {
					rn.r.Info("%s: the lab serves no %s here (optional)", pfx, name)

					return nil
				}

				if len(resources) == 0 {
					return fmt.Errorf("List returned no resources")
				}
			}

			for _, res := range resources {
				if err := compareYAMLSpec(res); err != nil {
					return fmt.Errorf("%s: %w", res.GetMetadata().GetId(), err)
				}
			}

			return nil
		}())
	}
}

func compareYAMLSpec(res *cosiv1alpha1.Resource) error {
	md := res.GetMetadata()
	if md.GetVersion() == "" || md.GetPhase() == "" || md.GetOwner() == "" && md.GetNamespace() != "config" {
		return fmt.Errorf("metadata incomplete: version=%q phase=%q owner=%q", md.GetVersion(), md.GetPhase(), md.GetOwner())
	}

	if md.GetCreated() == nil || md.GetUpdated() == nil {
		return fmt.Errorf("metadata lacks created/updated")
	}

	if len(res.GetSpec().GetProtoSpec()) == 0 {
		return fmt.Errorf("proto_spec is empty (Talos fills both proto_spec and yaml_spec)")
	}

	if res.GetSpec().GetYamlSpec() == "" {
		return fmt.Errorf("yaml_spec is empty (Talos fills both proto_spec and yaml_spec)")
	}

	pr, err := protobuf.Unmarshal(res)
	if err != nil {
		return fmt.Errorf("protobuf.Unmarshal: %w", err)
	}

	typed, err := protobuf.UnmarshalResource(pr)
	if err != nil {
		return fmt.Errorf("decoding proto_spec: %w", err)
	}

	if _, still := typed.(*protobuf.Resource); still {
		return fmt.Errorf("type %s is not registered in machinery", md.GetType())
	}

	want, err := yaml.Marshal(typed.Spec())
	if err != nil {
		return fmt.Errorf("yaml.Marshal(spec): %w", err)
	}

	var w, g any

	if err := yaml.Unmarshal(want, &w); err != nil {
		return fmt.Errorf("re-reading the expected YAML: %w", err)
	}

	if err := yaml.Unmarshal([]byte(res.GetSpec().GetYamlSpec()), &g); err != nil {
		return fmt.Errorf("yaml_spec is not YAML: %w", err)
	}

	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("yaml_spec differs from yaml(proto_spec): %s", yamlDiff("", w, g))
	}

	return nil
}

// yamlDiff lists the differences between want and got (at most 10).
func yamlDiff(path string, want, got any) string {
	var out []string

	collectDiffs(path, want, got, &out)

	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... and %d more", len(out)-10))
	}

	return strings.Join(out, "; ")
}

func collectDiffs(path string, want, got any, out *[]string) {
	if path == "" {
		path = "."
	}

	join := func(k string) string {
		if path == "." {
			return k
		}

		return path + "/" + k
	}

	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want a mapping, got %T %v", path, got, trunc(got)))

			return
		}

		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}

		for k := range g {
			keys[k] = true
		}

		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}

		sort.Strings(names)

		for _, k := range names {
			wv, wok := w[k]
			gv, gok := g[k]

			switch {
			case !gok:
				*out = append(*out, fmt.Sprintf("%s: missing (want %v)", join(k), trunc(wv)))
			case !wok:
				*out = append(*out, fmt.Sprintf("%s: unexpected (got %q)", join(k), trunc(gv)))
			case !reflect.DeepEqual(wv, gv):
				collectDiffs(join(k), wv, gv, out)
			}
		}

		return
	case []any:
		g, ok := got.([]any)
		if ok && len(g) == len(w) {
			for i := range w {
				if !reflect.DeepEqual(w[i], g[i]) {
					collectDiffs(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
				}
			}

			return
		}
	}

	*out = append(*out, fmt.Sprintf("%s: want %T %v, got %T %v", path, want, trunc(want), got, trunc(got)))
}

func trunc(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 160 {
		return s[:160] + "..."
	}

	return s
}
