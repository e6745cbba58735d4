package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// reporter prints one line per check and counts the results.
type reporter struct {
	mu       sync.Mutex
	ok       int
	failed   int
	warnings int
	skipped  int
}

func (r *reporter) Ok(check string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.ok++
	fmt.Printf("ok %s\n", fmt.Sprintf(check, args...))
}

func (r *reporter) Fail(check string, detail string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.failed++
	fmt.Printf("FAIL %s: %s\n", check, oneLine(fmt.Sprintf(detail, args...)))
}

// Check records ok when err is nil, FAIL otherwise; it returns err == nil.
func (r *reporter) Check(check string, err error) bool {
	if err != nil {
		r.Fail(check, "%v", err)

		return false
	}

	r.Ok("%s", check)

	return true
}

func (r *reporter) Warn(msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.warnings++
	fmt.Printf("WARN %s\n", oneLine(fmt.Sprintf(msg, args...)))
}

func (r *reporter) Skip(check string, why string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.skipped++
	fmt.Printf("SKIP %s: %s\n", check, oneLine(fmt.Sprintf(why, args...)))
}

func (r *reporter) Info(msg string, args ...any) {
	fmt.Fprintf(os.Stdout, "# %s\n", fmt.Sprintf(msg, args...))
}

// Summary prints the closing line and returns the exit code.
func (r *reporter) Summary(mode string) int {
	r.mu.Lock()
	defer r.mu.Unlock()

	fmt.Printf("summary (%s): %d ok, %d FAIL, %d warnings, %d skipped\n", mode, r.ok, r.failed, r.warnings, r.skipped)

	if r.failed > 0 {
		return 1
	}

	return 0
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", "")

	return strings.ReplaceAll(s, "\n", " | ")
}
