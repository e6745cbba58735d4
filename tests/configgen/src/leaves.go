package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

// The drift oracle: which leaves two configs differ in, as machinery sees them. Each config is loaded
// with machinery's loader and re-encoded canonically (no comments); the YAML of each document is then
// walked here, independently of the Python engine, into leaves:
//
//	<label>:<path>   label = "v1alpha1" for the legacy document, else Kind or Kind/name;
//	                 path  = keys joined by ".", list items as [index]; apiVersion, kind and name of a
//	                         typed document are its label, not leaves
//	<label>:         the document itself (listed when a document is on one side only)
//
// A leaf is a scalar (compared by tag and value), an empty mapping or an empty list. A leaf differs
// when it is on one side only or its value differs. Documents are matched by label, so the order of
// documents is not a leaf.

// leafValue is a leaf's value as compared: the YAML tag and the scalar text ("{}"/"[]" for empty ones).
type leafValue struct {
	tag   string
	value string
}

// canonicalLeaves loads a config with machinery and returns its leaves.
func canonicalLeaves(path string) (map[string]leafValue, error) {
	cfg, err := configloader.NewFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load: %s", oneLine(err))
	}

	return providerLeaves(cfg)
}

func providerLeaves(cfg config.Provider) (map[string]leafValue, error) {
	data, err := encodeBare(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode: %s", oneLine(err))
	}

	return yamlLeaves(data)
}

// yamlLeaves walks a multi-document YAML stream into leaves (see above).
func yamlLeaves(data []byte) (map[string]leafValue, error) {
	out := map[string]leafValue{}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))

	for {
		var doc yaml.Node

		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return nil, fmt.Errorf("decode the canonical form: %s", oneLine(err))
		}

		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}

		body := doc.Content[0]
		label := "v1alpha1"
		typed := false

		if kind := mappingValue(body, "kind"); kind != "" {
			label = kind
			typed = true

			if name := mappingValue(body, "name"); name != "" {
				label += "/" + name
			}
		}

		out[label+":"] = leafValue{tag: "document"}

		for i := 0; i+1 < len(body.Content); i += 2 {
			key := body.Content[i].Value
			if typed && (key == "apiVersion" || key == "kind" || key == "name") {
				continue
			}

			walkLeaves(label+":"+key, body.Content[i+1], out)
		}
	}

	return out, nil
}

func mappingValue(node *yaml.Node, key string) string {
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == key && node.Content[i+1].Kind == yaml.ScalarNode {
			return node.Content[i+1].Value
		}
	}

	return ""
}

func walkLeaves(path string, node *yaml.Node, out map[string]leafValue) {
	switch node.Kind {
	case yaml.MappingNode:
		if len(node.Content) == 0 {
			out[path] = leafValue{tag: "!!map", value: "{}"}

			return
		}

		for i := 0; i+1 < len(node.Content); i += 2 {
			walkLeaves(path+"."+node.Content[i].Value, node.Content[i+1], out)
		}
	case yaml.SequenceNode:
		if len(node.Content) == 0 {
			out[path] = leafValue{tag: "!!seq", value: "[]"}

			return
		}

		for i, item := range node.Content {
			walkLeaves(fmt.Sprintf("%s[%d]", path, i), item, out)
		}
	case yaml.AliasNode:
		walkLeaves(path, node.Alias, out)
	default:
		out[path] = leafValue{tag: node.ShortTag(), value: node.Value}
	}
}

// differingLeaves lists the leaves in which a and b differ, sorted.
func differingLeaves(a, b map[string]leafValue) []string {
	var out []string

	for path, va := range a {
		if vb, ok := b[path]; !ok || vb != va {
			out = append(out, path)
		}
	}

	for path := range b {
		if _, ok := a[path]; !ok {
			out = append(out, path)
		}
	}

	sort.Strings(out)

	return out
}

type leavesResult struct {
	A      string   `json:"a"`
	B      string   `json:"b"`
	Leaves []string `json:"leaves"`
	Error  string   `json:"error,omitempty"`
}

func leavesOf(a, b string) leavesResult {
	res := leavesResult{A: a, B: b, Leaves: []string{}}

	la, err := canonicalLeaves(a)
	if err != nil {
		res.Error = "A: " + err.Error()

		return res
	}

	lb, err := canonicalLeaves(b)
	if err != nil {
		res.Error = "B: " + err.Error()

		return res
	}

	if d := differingLeaves(la, lb); d != nil {
		res.Leaves = d
	}

	return res
}

// cmdLeaves prints one JSON line per pair: {"a", "b", "leaves": [...]} or {"a", "b", "error"}.
// Pairs are the two arguments, or the lines "A<TAB>B" of --pairs FILE ("-" for stdin).
func cmdLeaves(args []string) error {
	fs := flag.NewFlagSet("leaves", flag.ContinueOnError)
	pairs := fs.String("pairs", "", `file of "A<TAB>B" lines ("-": stdin)`)

	if err := fs.Parse(args); err != nil {
		return err
	}

	enc := json.NewEncoder(os.Stdout)

	if *pairs == "" {
		if fs.NArg() != 2 {
			return errors.New("leaves takes two files, or --pairs FILE")
		}

		return enc.Encode(leavesOf(fs.Arg(0), fs.Arg(1)))
	}

	in := os.Stdin

	if *pairs != "-" {
		f, err := os.Open(*pairs)
		if err != nil {
			return err
		}

		defer f.Close() //nolint:errcheck

		in = f
	}

	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)

	for scanner.Scan() {
		line := scanner.Text()
		if line == "" {
			continue
		}

		a, b, ok := strings.Cut(line, "\t")
		if !ok {
			return fmt.Errorf("not an A<TAB>B line: %q", line)
		}

		if err := enc.Encode(leavesOf(a, b)); err != nil {
			return err
		}
	}

	return scanner.Err()
}

// redactMarker replaces every secret in the redact subcommand's redacted copy.
const redactMarker = "ICHOR-REDACTED-BY-MACHINERY"

// isMarker: the redacted value is the marker, holds it (SideroLink's apiUrl keeps the URL and replaces the
// jointoken parameter) or is its base64 (v1alpha1 keys are []byte, written as base64).
func isMarker(value string) bool {
	if strings.Contains(value, redactMarker) {
		return true
	}

	decoded, err := base64.StdEncoding.DecodeString(value)

	return err == nil && string(decoded) == redactMarker
}

type redactResult struct {
	File  string   `json:"file"`
	Paths []string `json:"paths"`
	Error string   `json:"error,omitempty"`
}

// cmdRedact prints one JSON line per file: the leaves machinery's RedactSecrets (of the config container)
// replaces, i.e. the leaves whose value differs between the canonical form and that of the redacted copy.
func cmdRedact(args []string) error {
	if len(args) == 0 {
		return errors.New("redact takes one or more files")
	}

	enc := json.NewEncoder(os.Stdout)

	for _, path := range args {
		res := redactResult{File: path, Paths: []string{}}

		cfg, err := configloader.NewFromFile(path)
		if err != nil {
			res.Error = "load: " + oneLine(err)
		} else if plain, err := providerLeaves(cfg); err != nil {
			res.Error = err.Error()
		} else if redacted, err := providerLeaves(cfg.RedactSecrets(redactMarker)); err != nil {
			res.Error = err.Error()
		} else {
			for _, leaf := range differingLeaves(plain, redacted) {
				if !isMarker(redacted[leaf].value) {
					res.Error = "a leaf changed to something other than the marker: " + leaf

					break
				}

				res.Paths = append(res.Paths, leaf)
			}
		}

		if err := enc.Encode(res); err != nil {
			return err
		}
	}

	return nil
}
