package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// Register the real Talos / COSI protos in protoregistry.GlobalFiles.
	_ "github.com/cosi-project/runtime/api/v1alpha1"
	_ "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	_ "github.com/siderolabs/talos/pkg/machinery/api/common"
	_ "github.com/siderolabs/talos/pkg/machinery/api/inspect"
	_ "github.com/siderolabs/talos/pkg/machinery/api/machine"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/config"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/block"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/cluster"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/containers"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/cri"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/enums"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/etcd"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/extensions"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/files"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/k8s"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/kubeaccess"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/kubespan"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/network"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/perf"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/proto"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/secrets"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/security"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/siderolink"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/storage"
	_ "github.com/siderolabs/talos/pkg/machinery/api/resource/network"
	_ "github.com/siderolabs/talos/pkg/machinery/api/security"
	_ "github.com/siderolabs/talos/pkg/machinery/api/storage"
	_ "github.com/siderolabs/talos/pkg/machinery/api/time"
)

// resourceDefinitionsPrefix is the proto package prefix of the Talos resource
// spec messages; ours may use another package, then they are matched by name.
const resourceDefinitionsPrefix = "talos.resource.definitions."

func runDescriptors(args []string) int {
	fs := flag.NewFlagSet("descriptors", flag.ExitOnError)
	setPath := fs.String("set", "", "FileDescriptorSet (binary) of our protos")
	verbose := fs.Bool("v", false, "print every compared element")

	_ = fs.Parse(args)

	if *setPath == "" {
		fmt.Fprintln(os.Stderr, "descriptors: --set is required")

		return 2
	}

	r := &reporter{}

	ours, err := loadDescriptorSet(*setPath)
	if err != nil {
		r.Fail("load "+*setPath, "%v", err)

		return r.Summary("descriptors")
	}

	d := &descCompare{r: r, ours: ours, verbose: *verbose, mapping: map[protoreflect.FullName]protoreflect.FullName{}}
	d.run()

	return r.Summary("descriptors")
}

// loadDescriptorSet builds a private registry from the set. Only
// google/protobuf/* files missing from the set are taken from the global
// registry: anything else must come from our set, or we would compare the
// real protos with themselves.
func loadDescriptorSet(path string) (*protoregistry.Files, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	var set descriptorpb.FileDescriptorSet
	if err = proto.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("decoding FileDescriptorSet: %w", err)
	}

	if len(set.GetFile()) == 0 {
		return nil, errors.New("the FileDescriptorSet is empty")
	}

	byPath := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range set.GetFile() {
		byPath[f.GetName()] = f
	}

	files := &protoregistry.Files{}
	res := &setResolver{local: files}

	var add func(name string, stack []string) error

	add = func(name string, stack []string) error {
		if _, err := files.FindFileByPath(name); err == nil {
			return nil
		}

		fdp, ok := byPath[name]
		if !ok {
			if strings.HasPrefix(name, "google/protobuf/") {
				fd, err := protoregistry.GlobalFiles.FindFileByPath(name)
				if err != nil {
					return fmt.Errorf("well-known import %q: %w", name, err)
				}

				return files.RegisterFile(fd)
			}

			return fmt.Errorf("%s imports %q, which is not in the set (build it with --include_imports)", strings.Join(stack, " -> "), name)
		}

		for _, dep := range fdp.GetDependency() {
			if err := add(dep, append(stack, name)); err != nil {
				return err
			}
		}

		fd, err := protodesc.NewFile(fdp, res)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}

		return files.RegisterFile(fd)
	}

	names := make([]string, 0, len(byPath))
	for n := range byPath {
		names = append(names, n)
	}

	sort.Strings(names)

	for _, n := range names {
		if err := add(n, nil); err != nil {
			return nil, err
		}
	}

	return files, nil
}

type setResolver struct {
	local *protoregistry.Files
}

func (s *setResolver) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	return s.local.FindFileByPath(p)
}

func (s *setResolver) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	return s.local.FindDescriptorByName(n)
}

type descCompare struct {
	r       *reporter
	ours    *protoregistry.Files
	verbose bool

	// mapping from our full names to the registry's, for messages and enums
	// matched by short name in the resource definitions packages.
	mapping map[protoreflect.FullName]protoreflect.FullName

	// short name -> registry full names, under talos.resource.definitions.
	defsByShort map[protoreflect.Name][]protoreflect.FullName
}

func (d *descCompare) indexDefinitions() {
	d.defsByShort = map[protoreflect.Name][]protoreflect.FullName{}

	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), resourceDefinitionsPrefix) {
			return true
		}

		var walkMsgs func(ms protoreflect.MessageDescriptors)

		walkMsgs = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				m := ms.Get(i)
				if m.IsMapEntry() {
					continue
				}

				d.defsByShort[m.Name()] = append(d.defsByShort[m.Name()], m.FullName())
				walkEnums(m.Enums(), d.defsByShort)
				walkMsgs(m.Messages())
			}
		}

		walkMsgs(fd.Messages())
		walkEnums(fd.Enums(), d.defsByShort)

		return true
	})
}

func walkEnums(es protoreflect.EnumDescriptors, idx map[protoreflect.Name][]protoreflect.FullName) {
	for i := range es.Len() {
		idx[es.Get(i).Name()] = append(idx[es.Get(i).Name()], es.Get(i).FullName())
	}
}

// counterpart finds the registry descriptor for one of ours.
func (d *descCompare) counterpart(ours protoreflect.Descriptor) (protoreflect.Descriptor, string) {
	if theirs, err := protoregistry.GlobalFiles.FindDescriptorByName(ours.FullName()); err == nil {
		return theirs, ""
	}

	if _, isSvc := ours.(protoreflect.ServiceDescriptor); isSvc {
		return nil, "no service of that name in machinery"
	}

	cands := d.defsByShort[ours.Name()]

	// Nested types: only match when the parent is mapped.
	if parent, ok := ours.Parent().(protoreflect.MessageDescriptor); ok {
		if mp, ok := d.mapping[parent.FullName()]; ok {
			full := mp.Append(ours.Name())
			if theirs, err := protoregistry.GlobalFiles.FindDescriptorByName(full); err == nil {
				return theirs, ""
			}
		}

		return nil, "not in machinery's registry"
	}

	switch len(cands) {
	case 0:
		return nil, "not in machinery's registry (no message/enum of that name under " + resourceDefinitionsPrefix + "*)"
	case 1:
		theirs, err := protoregistry.GlobalFiles.FindDescriptorByName(cands[0])
		if err != nil {
			return nil, err.Error()
		}

		return theirs, ""
	default:
		// prefer a candidate whose package ends with our package's last element
		pkg := string(ours.ParentFile().Package())
		last := pkg[strings.LastIndex(pkg, ".")+1:]

		for _, c := range cands {
			if strings.HasSuffix(string(c.Parent()), "."+last) {
				theirs, err := protoregistry.GlobalFiles.FindDescriptorByName(c)
				if err == nil {
					return theirs, ""
				}
			}
		}

		return nil, fmt.Sprintf("ambiguous: %d messages named %s in the resource definitions (%v)", len(cands), ours.Name(), cands)
	}
}

func (d *descCompare) run() {
	d.indexDefinitions()

	type pair struct {
		ours, theirs protoreflect.Descriptor
	}

	var (
		msgs  []pair
		enums []pair
		svcs  []pair
	)

	var files []protoreflect.FileDescriptor

	d.ours.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(fd.Path(), "google/protobuf/") {
			return true
		}

		files = append(files, fd)

		return true
	})

	sort.Slice(files, func(i, j int) bool { return files[i].Path() < files[j].Path() })

	// First pass: pair up everything (parents before children), so that
	// message references can be translated through the mapping.
	var walk func(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors)

	walk = func(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors) {
		for i := range es.Len() {
			e := es.Get(i)

			theirs, why := d.counterpart(e)
			if theirs == nil {
				d.r.Warn("enum %s (%s): %s", e.FullName(), e.ParentFile().Path(), why)

				continue
			}

			d.mapping[e.FullName()] = theirs.FullName()
			enums = append(enums, pair{e, theirs})
		}

		for i := range ms.Len() {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}

			theirs, why := d.counterpart(m)
			if theirs == nil {
				d.r.Warn("message %s (%s): %s", m.FullName(), m.ParentFile().Path(), why)

				continue
			}

			d.mapping[m.FullName()] = theirs.FullName()
			msgs = append(msgs, pair{m, theirs})

			walk(m.Messages(), m.Enums())
		}
	}

	for _, fd := range files {
		walk(fd.Messages(), fd.Enums())

		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)

			theirs, why := d.counterpart(s)
			if theirs == nil {
				d.r.Warn("service %s (%s): %s", s.FullName(), fd.Path(), why)

				continue
			}

			svcs = append(svcs, pair{s, theirs})
		}
	}

	for _, p := range enums {
		theirs, ok := p.theirs.(protoreflect.EnumDescriptor)
		if !ok {
			d.r.Fail("enum "+string(p.ours.FullName()), "its counterpart %s is not an enum", p.theirs.FullName())

			continue
		}

		d.compareEnum(p.ours.(protoreflect.EnumDescriptor), theirs)
	}

	for _, p := range msgs {
		theirs, ok := p.theirs.(protoreflect.MessageDescriptor)
		if !ok {
			d.r.Fail("message "+string(p.ours.FullName()), "its counterpart %s is not a message", p.theirs.FullName())

			continue
		}

		d.compareMessage(p.ours.(protoreflect.MessageDescriptor), theirs)
	}

	for _, p := range svcs {
		theirs, ok := p.theirs.(protoreflect.ServiceDescriptor)
		if !ok {
			d.r.Fail("service "+string(p.ours.FullName()), "its counterpart %s is not a service", p.theirs.FullName())

			continue
		}

		d.compareService(p.ours.(protoreflect.ServiceDescriptor), theirs)
	}

	d.r.Info("compared %d messages, %d enums, %d services from %d files", len(msgs), len(enums), len(svcs), len(files))
}

func label(ours, theirs protoreflect.Descriptor) string {
	if ours.FullName() == theirs.FullName() {
		return string(ours.FullName())
	}

	return fmt.Sprintf("%s (= %s)", ours.FullName(), theirs.FullName())
}

func (d *descCompare) compareEnum(ours, theirs protoreflect.EnumDescriptor) {
	check := "enum " + label(ours, theirs)

	var problems []string

	for i := range ours.Values().Len() {
		v := ours.Values().Get(i)

		tv := theirs.Values().ByName(v.Name())
		if tv == nil {
			if byNum := theirs.Values().ByNumber(v.Number()); byNum != nil {
				problems = append(problems, fmt.Sprintf("value %s = %d: theirs names %d %s", v.Name(), v.Number(), v.Number(), byNum.Name()))
			} else {
				problems = append(problems, fmt.Sprintf("value %s = %d does not exist in theirs", v.Name(), v.Number()))
			}

			continue
		}

		if tv.Number() != v.Number() {
			problems = append(problems, fmt.Sprintf("value %s: ours = %d, theirs = %d", v.Name(), v.Number(), tv.Number()))
		}
	}

	var missing []string

	for i := range theirs.Values().Len() {
		tv := theirs.Values().Get(i)
		if ours.Values().ByName(tv.Name()) == nil {
			missing = append(missing, fmt.Sprintf("%s=%d", tv.Name(), tv.Number()))
		}
	}

	if len(missing) > 0 {
		// A value we lack decodes as an unknown number: not fatal, but worth knowing.
		d.r.Warn("%s: values of theirs that ours lacks: %s", check, strings.Join(missing, ", "))
	}

	d.result(check, problems)
}

func (d *descCompare) result(check string, problems []string) {
	if len(problems) == 0 {
		d.r.Ok("%s", check)

		return
	}

	for _, p := range problems {
		d.r.Fail(check, "%s", p)
	}
}

func cardinality(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.IsList():
		return "repeated"
	case f.HasOptionalKeyword():
		return "optional"
	case f.Cardinality() == protoreflect.Required:
		return "required"
	default:
		return "singular"
	}
}

// typeName is the referenced message/enum type (after mapping ours to theirs).
func (d *descCompare) typeName(f protoreflect.FieldDescriptor, mapOurs bool) string {
	var n protoreflect.FullName

	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s, %s>", d.typeOf(f.MapKey(), mapOurs), d.typeOf(f.MapValue(), mapOurs))
	case f.Message() != nil:
		n = f.Message().FullName()
	case f.Enum() != nil:
		n = f.Enum().FullName()
	default:
		return ""
	}

	if mapOurs {
		if m, ok := d.mapping[n]; ok {
			n = m
		}
	}

	return string(n)
}

func (d *descCompare) typeOf(f protoreflect.FieldDescriptor, mapOurs bool) string {
	if tn := d.typeName(f, mapOurs); tn != "" {
		return tn
	}

	return f.Kind().String()
}

func oneofName(f protoreflect.FieldDescriptor) string {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return string(o.Name())
	}

	return ""
}

func (d *descCompare) compareMessage(ours, theirs protoreflect.MessageDescriptor) {
	check := "message " + label(ours, theirs)

	var problems []string

	for i := range ours.Fields().Len() {
		f := ours.Fields().Get(i)

		tf := theirs.Fields().ByName(f.Name())
		if tf == nil {
			tf = theirs.Fields().ByNumber(f.Number())
			if tf == nil {
				problems = append(problems, fmt.Sprintf("field %s = %d does not exist in theirs", f.Name(), f.Number()))

				continue
			}

			problems = append(problems, fmt.Sprintf("field %s = %d: theirs calls field %d %q", f.Name(), f.Number(), tf.Number(), tf.Name()))
		}

		prefix := fmt.Sprintf("field %s", f.Name())

		if tf.Number() != f.Number() {
			problems = append(problems, fmt.Sprintf("%s: number ours = %d, theirs = %d", prefix, f.Number(), tf.Number()))
		}

		if tf.Kind() != f.Kind() {
			problems = append(problems, fmt.Sprintf("%s: kind ours = %s, theirs = %s", prefix, f.Kind(), tf.Kind()))
		}

		if co, ct := cardinality(f), cardinality(tf); co != ct {
			problems = append(problems, fmt.Sprintf("%s: cardinality ours = %s, theirs = %s", prefix, co, ct))
		}

		if f.IsList() && tf.IsList() && f.IsPacked() != tf.IsPacked() {
			problems = append(problems, fmt.Sprintf("%s: packed ours = %v, theirs = %v", prefix, f.IsPacked(), tf.IsPacked()))
		}

		if to, tt := d.typeName(f, true), d.typeName(tf, false); to != tt {
			problems = append(problems, fmt.Sprintf("%s: type ours = %s, theirs = %s", prefix, d.typeName(f, false), tt))
		}

		if oo, ot := oneofName(f), oneofName(tf); oo != ot {
			problems = append(problems, fmt.Sprintf("%s: oneof ours = %q, theirs = %q", prefix, oo, ot))
		}
	}

	// A field number we use for something theirs does not have is fine; a
	// field of theirs we do not declare is fine too (kept as unknown).
	if d.verbose {
		var missing []string

		for i := range theirs.Fields().Len() {
			tf := theirs.Fields().Get(i)
			if ours.Fields().ByNumber(tf.Number()) == nil {
				missing = append(missing, fmt.Sprintf("%s=%d", tf.Name(), tf.Number()))
			}
		}

		if len(missing) > 0 {
			d.r.Info("%s: fields of theirs not declared by ours: %s", check, strings.Join(missing, ", "))
		}
	}

	d.result(check, problems)
}

func (d *descCompare) compareService(ours, theirs protoreflect.ServiceDescriptor) {
	check := "service " + label(ours, theirs)

	var problems []string

	for i := range ours.Methods().Len() {
		m := ours.Methods().Get(i)

		tm := theirs.Methods().ByName(m.Name())
		if tm == nil {
			problems = append(problems, fmt.Sprintf("method %s does not exist in theirs", m.Name()))

			continue
		}

		in, out := m.Input().FullName(), m.Output().FullName()
		if mp, ok := d.mapping[in]; ok {
			in = mp
		}

		if mp, ok := d.mapping[out]; ok {
			out = mp
		}

		if in != tm.Input().FullName() {
			problems = append(problems, fmt.Sprintf("method %s: input ours = %s, theirs = %s", m.Name(), m.Input().FullName(), tm.Input().FullName()))
		}

		if out != tm.Output().FullName() {
			problems = append(problems, fmt.Sprintf("method %s: output ours = %s, theirs = %s", m.Name(), m.Output().FullName(), tm.Output().FullName()))
		}

		if m.IsStreamingClient() != tm.IsStreamingClient() {
			problems = append(problems, fmt.Sprintf("method %s: client streaming ours = %v, theirs = %v", m.Name(), m.IsStreamingClient(), tm.IsStreamingClient()))
		}

		if m.IsStreamingServer() != tm.IsStreamingServer() {
			problems = append(problems, fmt.Sprintf("method %s: server streaming ours = %v, theirs = %v", m.Name(), m.IsStreamingServer(), tm.IsStreamingServer()))
		}

		if d.verbose {
			d.r.Info("%s/%s compared", theirs.FullName(), m.Name())
		}
	}

	d.result(check, problems)
}
