package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	cfgdoc "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
)

// runtimeMode implements validation.RuntimeMode for the modes Talos runs in
// (the real type lives in Talos's internal/app/machined/pkg/runtime, outside machinery).
type runtimeMode string

func (m runtimeMode) String() string { return string(m) }

// RequiresInstall: metal and cloud install to disk; container does not.
func (m runtimeMode) RequiresInstall() bool { return m == "metal" }

func (m runtimeMode) InContainer() bool { return m == "container" }

// IsAgent is present on newer RuntimeMode interfaces; harmless otherwise.
func (m runtimeMode) IsAgent() bool { return false }

var _ validation.RuntimeMode = runtimeMode("metal")

func cmdValidate(args []string) (bool, error) {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	strict := fs.Bool("strict", false, "strict mode: warnings are errors (validation.WithStrict)")
	mode := fs.String("mode", "metal", "runtime mode: metal, cloud or container")
	expect := fs.Int("expect-count", 0, "fail when fewer than N files are given")

	if err := fs.Parse(args); err != nil {
		return false, err
	}

	files := fs.Args()

	switch *mode {
	case "metal", "cloud", "container":
	default:
		return false, fmt.Errorf("unknown mode %q", *mode)
	}

	failed := false

	for _, f := range files {
		if reason := validateFile(f, runtimeMode(*mode), *strict); reason != "" {
			fmt.Printf("FAIL %s: %s\n", f, reason)

			failed = true
		} else {
			fmt.Printf("ok %s\n", f)
		}
	}

	if len(files) < *expect {
		fmt.Printf("FAIL received %d configs, expected at least %d\n", len(files), *expect)

		failed = true
	}

	fmt.Printf("validated %d configs (machinery %s, mode %s, strict %s)\n", len(files), machineryVersion(), *mode, strconv.FormatBool(*strict))

	return failed, nil
}

func validateFile(path string, mode runtimeMode, strict bool) string {
	cfg, err := configloader.NewFromFile(path)
	if err != nil {
		return "load: " + oneLine(err)
	}

	var opts []validation.Option
	if strict {
		opts = append(opts, validation.WithStrict())
	}

	warnings, err := validateConfig(cfg, mode, opts...)
	if err != nil {
		return oneLine(err)
	}

	if strict && len(warnings) > 0 {
		return "warnings: " + strings.Join(warnings, "; ")
	}

	return ""
}

// oneLine flattens an error to one line and cuts it (a decoding error can quote a whole document, secrets included).
func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")

	const limit = 300
	if len(s) > limit {
		s = s[:limit] + "... (cut)"
	}

	return s
}

// canonical loads a config with machinery's loader and re-encodes it without comments.
// With sortDocs the typed documents are put in (kind, name) order after the v1alpha1 document.
func canonical(path string, sortDocs bool) ([]byte, error) {
	cfg, err := configloader.NewFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}

	if !sortDocs {
		return encodeBare(cfg)
	}

	docs := slices.Clone(cfg.Documents())

	key := func(d cfgdoc.Document) string {
		if _, ok := d.(*v1alpha1.Config); ok {
			return ""
		}

		name := ""
		if nd, ok := d.(cfgdoc.NamedDocument); ok {
			name = nd.Name()
		}

		return d.Kind() + "\x00" + name
	}

	slices.SortStableFunc(docs, func(a, b cfgdoc.Document) int { return strings.Compare(key(a), key(b)) })

	sorted, err := container.New(docs...)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", path, err)
	}

	return sorted.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
}

func encodeBare(cfg config.Provider) ([]byte, error) {
	return cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
}

func cmdCompare(args []string) (bool, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	ignoreOrder := fs.Bool("ignore-order", false, "compare typed documents sorted by (kind, name) instead of in file order")

	if err := fs.Parse(args); err != nil {
		return false, err
	}

	args = fs.Args()

	if len(args) != 2 {
		return false, errors.New("compare takes exactly two files: [--ignore-order] A B")
	}

	a, err := canonical(args[0], *ignoreOrder)
	if err != nil {
		return false, err
	}

	b, err := canonical(args[1], *ignoreOrder)
	if err != nil {
		return false, err
	}

	if string(a) == string(b) {
		fmt.Printf("same %s %s\n", args[0], args[1])

		return false, nil
	}

	fmt.Print(unifiedDiff(args[0], args[1], string(a), string(b)))

	return true, nil
}

func cmdEncode(args []string) error {
	if len(args) != 1 {
		return errors.New("encode takes exactly one file")
	}

	out, err := canonical(args[0], false)
	if err != nil {
		return err
	}

	_, err = os.Stdout.Write(out)

	return err
}

// cmdReencode loads every case of an older generator's output and writes it re-encoded by this machinery.
func cmdReencode(args []string) error {
	fs := flag.NewFlagSet("reencode", flag.ContinueOnError)
	in := fs.String("in", "", "input directory (one sub-directory per case)")
	out := fs.String("out", "", "output directory")

	if err := fs.Parse(args); err != nil {
		return err
	}

	if *in == "" || *out == "" {
		return errors.New("reencode needs --in DIR --out DIR")
	}

	entries, err := os.ReadDir(*in)
	if err != nil {
		return err
	}

	n := 0

	for _, e := range entries {
		if !e.IsDir() {
			continue
		}

		src := filepath.Join(*in, e.Name())
		dst := filepath.Join(*out, e.Name())

		if err = os.MkdirAll(dst, 0o755); err != nil {
			return err
		}

		for _, name := range []string{"controlplane.conf", "worker.conf"} {
			data, err := canonical(filepath.Join(src, name), false)
			if err != nil {
				return err
			}

			if err = os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
				return err
			}
		}

		secretsData, err := os.ReadFile(filepath.Join(src, "secrets.yaml"))
		if err != nil {
			return err
		}

		if err = os.WriteFile(filepath.Join(dst, "secrets.yaml"), secretsData, 0o600); err != nil {
			return err
		}

		if err = rewriteCaseJSON(filepath.Join(src, "case.json"), filepath.Join(dst, "case.json")); err != nil {
			return err
		}

		n++
	}

	fmt.Printf("re-encoded %d cases from %s with machinery %s into %s\n", n, *in, machineryVersion(), *out)

	return nil
}
