package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// unifiedDiff returns a unified diff (3 lines of context) of two texts, LCS-based.
func unifiedDiff(nameA, nameB, a, b string) string {
	al := strings.SplitAfter(a, "\n")
	bl := strings.SplitAfter(b, "\n")

	if al[len(al)-1] == "" {
		al = al[:len(al)-1]
	}

	if bl[len(bl)-1] == "" {
		bl = bl[:len(bl)-1]
	}

	n, m := len(al), len(bl)
	lcs := make([][]int32, n+1)

	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}

	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}

	type op struct {
		kind byte // ' ', '-', '+'
		line string
		ai   int
		bi   int
	}

	var ops []op

	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			ops = append(ops, op{' ', al[i], i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, op{'+', bl[j], i, j})
			j++
		default:
			ops = append(ops, op{'-', al[i], i, j})
			i++
		}
	}

	const ctx = 3

	var out strings.Builder

	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)

	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++

			continue
		}

		start := max(k-ctx, 0)
		end := k

		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++

				continue
			}

			// run of equal lines: does another change follow within 2*ctx?
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}

			if run < len(ops) && run-end <= 2*ctx {
				end = run

				continue
			}

			end = min(end+ctx, len(ops))

			break
		}

		aStart, bStart, aCount, bCount := ops[start].ai, ops[start].bi, 0, 0

		for _, o := range ops[start:end] {
			if o.kind != '+' {
				aCount++
			}

			if o.kind != '-' {
				bCount++
			}
		}

		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aStart+1, aCount, bStart+1, bCount)

		for _, o := range ops[start:end] {
			line := o.line
			if !strings.HasSuffix(line, "\n") {
				line += "\n\\ No newline at end of file\n"
			}

			out.WriteString(string(o.kind) + line)
		}

		k = end
	}

	return out.String()
}

func rewriteCaseJSON(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}

	var c map[string]any

	if err = json.Unmarshal(data, &c); err != nil {
		return err
	}

	mv := machineryVersion()
	c["talos_version"] = mv
	c["upgraded_by"] = "loaded and re-encoded (no comments) by machinery " + mv +
		": the legacy form a machine generated at " + fmt.Sprint(c["machinery_version"]) + " keeps after upgrading Talos"
	c["comments"] = "none (re-encoded by machinery)"

	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}

	return os.WriteFile(dst, append(out, '\n'), 0o644)
}
