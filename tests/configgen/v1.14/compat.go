package main

import (
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/types/k8s"
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

// encryptionProviders is the providers list of the config's KubeEtcdEncryptionConfig secrets block.
func encryptionProviders(cfg config.Provider) (any, error) {
	enc := cfg.K8sEtcdEncryptionConfig()
	if enc == nil {
		return nil, errors.New("the control plane config has no KubeEtcdEncryptionConfig")
	}

	resources, _ := enc.EtcdEncryptionConfig()["resources"].([]any)
	if len(resources) != 1 {
		return nil, fmt.Errorf("the KubeEtcdEncryptionConfig has %d resource blocks, not 1", len(resources))
	}

	block, _ := resources[0].(map[string]any)

	return block["providers"], nil
}

// withEncryptionProviders is a copy of the config whose KubeEtcdEncryptionConfig states these providers for secrets.
func withEncryptionProviders(cfg config.Provider, providers []any) (config.Provider, error) {
	docs := cfg.Clone().Documents()
	found := false

	for _, doc := range docs {
		if enc, ok := doc.(*k8s.KubeEtcdEncryptionConfigV1Alpha1); ok {
			enc.Config.Object = map[string]any{"resources": []any{map[string]any{"providers": providers, "resources": []any{"secrets"}}}}
			found = true
		}
	}

	if !found {
		return nil, errors.New("the control plane config has no KubeEtcdEncryptionConfig")
	}

	return container.New(docs...)
}
