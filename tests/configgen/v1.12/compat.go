package main

import (
	"errors"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
)

// supportedContracts are the version contracts this binary generates (its own).
var supportedContracts = []string{"v1.12"}

func validateBundle(b *secrets.Bundle, _ *config.VersionContract) error { return b.Validate() }

func customCNIOption(string) (generate.Option, error) {
	return nil, errors.New("WithCustomCNIUrl is machinery >= v1.14; legacy contracts use a cluster.network.cni patch")
}

func validateConfig(cfg config.Provider, mode validation.RuntimeMode, opts ...validation.Option) ([]string, error) {
	return cfg.Validate(mode, opts...)
}

// encryptionProviders: the legacy contracts have no KubeEtcdEncryptionConfig (machinery >= v1.14).
func encryptionProviders(config.Provider) (any, error) {
	return nil, errors.New("KubeEtcdEncryptionConfig is contract v1.14")
}

// withEncryptionProviders: the legacy contracts have no KubeEtcdEncryptionConfig (machinery >= v1.14).
func withEncryptionProviders(config.Provider, []any) (config.Provider, error) {
	return nil, errors.New("KubeEtcdEncryptionConfig is contract v1.14")
}
