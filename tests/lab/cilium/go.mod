// The lab's Cilium charts: github.com/cilium/cilium at the versions go.sum pins (see README.md).
// Nothing is built from this module; it exists so that `go mod download` checks each module zip
// against go.sum. Fetch with `python -m tests.lab.cilium fetch`.
module maesh.dev/ichor/lab/cilium

go 1.24
