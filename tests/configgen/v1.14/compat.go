package main

import (
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
)

// supportedContracts are the version contracts this binary generates: its own and the older ones a
// newer talosctl writes with --talos-version.
var supportedContracts = []string{"v1.12", "v1.13", "v1.14"}

func validateBundle(b *secrets.Bundle, vc *config.VersionContract) error { return b.Validate(vc) }

func customCNIOption(url string) (generate.Option, error) { return generate.WithCustomCNIUrl(url), nil }

// validateConfig runs the client-side validation (Validate is a deprecated alias of it at v1.14).
func validateConfig(cfg config.Provider, mode validation.RuntimeMode, opts ...validation.Option) ([]string, error) {
	return cfg.ValidateAsClient(mode, opts...)
}
