// Command configgen generates reference Talos machine configs with the real
// machinery code (what `talosctl gen secrets` and `talosctl gen config` run),
// validates configs with machinery's validator, and compares two configs after
// a round trip through machinery's loader and encoder.
//
// The same sources are built once per machinery version; see ../build.sh.
// Per-version API differences live in compat.go of each version directory.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

const usage = `usage:
  configgen version
      print the machinery version this binary is built with and the contracts it generates
  configgen generate --out DIR --contract v1.X [--case NAME]...
      write DIR/<case>/{secrets.yaml,controlplane.conf,worker.conf,case.json} for the case matrix
  configgen bundles --out DIR --contract v1.X
      write DIR/<variant>/{secrets.yaml,controlplane.conf,worker.conf,variant.json}: a machinery bundle with each
      optional secret present or absent (secretbox, aescbc or both; RSA or ECDSA service account key) and its configs
  configgen reencode --in DIR --out DIR
      load DIR/<case>/*.yaml (as written by an older generator) and write them re-encoded by this
      machinery (no comments), i.e. the legacy form a machine upgraded in place keeps
  configgen validate [--strict] [--mode metal|container|cloud] [--expect-count N] FILE...
      load each config with configloader and validate it; "ok FILE" or "FAIL FILE: reason"; exit 1 on any FAIL
  configgen compare A B
      load both, re-encode without comments, compare bytes; unified diff and exit 1 when they differ
  configgen encode FILE
      print FILE re-encoded by this machinery without comments
  configgen leaves A B | leaves --pairs FILE
      the drift oracle: the leaves two configs differ in after machinery's load and canonical re-encoding,
      one JSON line per pair {"a", "b", "leaves": [...]} (or "error"); FILE has "A<TAB>B" lines ("-": stdin)
  configgen redact FILE...
      one JSON line per file {"file", "paths": [...]}: the leaves machinery's RedactSecrets replaces
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}

	var err error

	args := os.Args[2:]

	switch os.Args[1] {
	case "version":
		fmt.Printf("machinery %s\ncontracts %s\n", machineryVersion(), strings.Join(supportedContracts, " "))
	case "generate":
		err = cmdGenerate(args)
	case "bundles":
		err = cmdBundles(args)
	case "reencode":
		err = cmdReencode(args)
	case "validate":
		var failed bool

		failed, err = cmdValidate(args)
		if err == nil && failed {
			os.Exit(1)
		}
	case "compare":
		var differ bool

		differ, err = cmdCompare(args)
		if err == nil && differ {
			os.Exit(1)
		}
	case "encode":
		err = cmdEncode(args)
	case "leaves":
		err = cmdLeaves(args)
	case "redact":
		err = cmdRedact(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}

	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(2)
	}
}

// machineryVersion returns the version of github.com/siderolabs/talos/pkg/machinery linked in.
func machineryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}

	for _, dep := range info.Deps {
		if dep.Path == "github.com/siderolabs/talos/pkg/machinery" {
			if dep.Replace != nil {
				return dep.Replace.Version
			}

			return dep.Version
		}
	}

	return "unknown"
}
