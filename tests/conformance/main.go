// Command conformance checks the maesh.ichor Talos simulator (tests/lab) and our
// .proto files against the real Talos client library
// (github.com/siderolabs/talos/pkg/machinery).
//
//	conformance descriptors --set tests/fixtures/talos-api.binpb
//	conformance client --lab DIR/lab.json [--only read,write,maintenance]
//	conformance requests --lab DIR/lab.json --ours NAME --reference NAME --image REF
//	conformance serve --secret VALUE --dir DIR [--listen ADDR] [--ca-crt FILE --ca-key FILE]
//
// Every check prints "ok <check>" or "FAIL <check>: <detail>"; the program
// exits 1 when any check failed.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  conformance descriptors --set FILE.binpb
  conformance client --lab lab.json [--phases read,write,maintenance] [--timeout 10m]
  conformance requests --lab lab.json --ours NAME --reference NAME --image REF
  conformance serve --secret VALUE --dir DIR [--listen 127.0.0.1:0] [--ca-crt FILE --ca-key FILE]
  conformance cluster --talosconfig FILE --context NAME --controlplanes A,B --workers C,D [--cluster-name NAME] [--expect-network FILE]`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}

	var code int

	switch os.Args[1] {
	case "descriptors":
		code = runDescriptors(os.Args[2:])
	case "client":
		code = runClient(os.Args[2:])
	case "requests":
		code = runRequests(os.Args[2:])
	case "serve":
		code = runServe(os.Args[2:])
	case "cluster":
		code = runCluster(os.Args[2:])
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		usage()
	}

	os.Exit(code)
}
