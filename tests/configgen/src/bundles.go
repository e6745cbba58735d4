package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
)

// BundleVariant is one combination of the secrets a machinery bundle may hold or not: the Secrets encryption keys
// (secretbox, aescbc or both; a bundle needs one) and the service account key type.
type BundleVariant struct {
	Name      string `json:"name"`
	Secretbox bool   `json:"secretbox"`
	AESCBC    bool   `json:"aescbc"`
	// ServiceAccountKey is "RSA" (contracts since Talos 1.7) or "ECDSA" (before).
	ServiceAccountKey string `json:"service_account_key"`
	// Encryption says where the config holds the encryption keys and who put them there.
	Encryption string `json:"encryption"`
	// GeneratorEncryption is machinery's own KubeEtcdEncryptionConfig providers when the config states other ones
	// (contract v1.14 with an aescbc secret), as JSON.
	GeneratorEncryption string `json:"generator_encryption,omitempty"`
	Case                Case   `json:"case"`
}

func bundleVariants() []BundleVariant {
	var out []BundleVariant

	for _, enc := range []struct {
		name              string
		secretbox, aescbc bool
	}{{"secretbox", true, false}, {"aescbc", false, true}, {"both", true, true}} {
		for _, sa := range []string{"RSA", "ECDSA"} {
			out = append(out, BundleVariant{
				Name: enc.name + "-" + strings.ToLower(sa), Secretbox: enc.secretbox, AESCBC: enc.aescbc, ServiceAccountKey: sa,
			})
		}
	}

	return out
}

// cmdBundles writes, per variant, a secrets bundle machinery made and the configs `talosctl gen config --with-secrets`
// makes from it: DIR/<variant>/{secrets.yaml,controlplane.conf,worker.conf,variant.json}, configs without comments.
//
// The current contract's bundle (secretbox, RSA service account key) and a Talos 1.2 one (`talosctl gen secrets
// --talos-version v1.2`: aescbc, ECDSA service account key) are both made by secrets.NewBundle; a variant takes each
// optional secret from the one that has it, or leaves it out.
func cmdBundles(args []string) error {
	fs := flag.NewFlagSet("bundles", flag.ContinueOnError)
	out := fs.String("out", "", "output directory (one sub-directory per variant)")
	contractFlag := fs.String("contract", "", "version contract, e.g. v1.12")

	if err := fs.Parse(args); err != nil {
		return err
	}

	if *out == "" || *contractFlag == "" {
		return errors.New("bundles needs --out DIR and --contract v1.X")
	}

	vc, err := supportedContract(*contractFlag)
	if err != nil {
		return err
	}

	for _, v := range bundleVariants() {
		if err := generateVariant(v, *contractFlag, vc, filepath.Join(*out, v.Name)); err != nil {
			return fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}

	fmt.Printf("generated %d bundle variants for contract %s with machinery %s into %s\n", len(bundleVariants()), *contractFlag,
		machineryVersion(), *out)

	return nil
}

func variantBundle(v BundleVariant, vc *config.VersionContract) (*secrets.Bundle, error) {
	clock := secrets.NewFixedClock(time.Now())

	current, err := secrets.NewBundle(clock, vc)
	if err != nil {
		return nil, err
	}

	old, err := secrets.NewBundle(clock, config.TalosVersion1_2)
	if err != nil {
		return nil, err
	}

	if old.Secrets.AESCBCEncryptionSecret == "" || current.Secrets.SecretboxEncryptionSecret == "" {
		return nil, errors.New("machinery no longer makes an aescbc secret at contract v1.2 or a secretbox one at this contract")
	}

	if v.AESCBC {
		current.Secrets.AESCBCEncryptionSecret = old.Secrets.AESCBCEncryptionSecret
	}

	if !v.Secretbox {
		current.Secrets.SecretboxEncryptionSecret = ""
	}

	if v.ServiceAccountKey == "ECDSA" {
		current.Certs.K8sServiceAccount = old.Certs.K8sServiceAccount
	}

	return current, nil
}

// talosEncryptionProviders are the providers Talos gives kube-apiserver for a bundle's encryption secrets when the
// config states the secrets in v1alpha1 (machined's k8stemplates.APIServerEncryptionConfig, without its final
// identity provider, as machinery's contract v1.14 generator leaves it out): what a cluster moved to contract v1.14
// must keep to read its Secrets.
func talosEncryptionProviders(b *secrets.Bundle) []any {
	var providers []any

	if b.Secrets.SecretboxEncryptionSecret != "" {
		providers = append(providers, map[string]any{"secretbox": map[string]any{"keys": []any{
			map[string]any{"name": "key2", "secret": b.Secrets.SecretboxEncryptionSecret}}}})
	}

	if b.Secrets.AESCBCEncryptionSecret != "" {
		providers = append(providers, map[string]any{"aescbc": map[string]any{"keys": []any{
			map[string]any{"name": "key1", "secret": b.Secrets.AESCBCEncryptionSecret}}}})
	}

	return providers
}

func generateVariant(v BundleVariant, contract string, vc *config.VersionContract, dir string) error {
	b, err := variantBundle(v, vc)
	if err != nil {
		return fmt.Errorf("secrets bundle: %w", err)
	}

	// machinery's Validate allows one encryption secret only; NewBundleFromConfig recovers both, and Talos runs both
	if v.Secretbox != v.AESCBC {
		if err = validateBundle(b, vc); err != nil {
			return fmt.Errorf("secrets bundle validation: %w", err)
		}
	}

	c := baseCase("bundle-"+v.Name, "talosctl defaults with a bundle holding "+v.Name)
	c.Contract = contract
	c.TalosVersion = machineryVersion()
	c.MachineryVersion = machineryVersion()
	c.Generator = "tests/configgen bundles (machinery " + machineryVersion() + ")"
	c.Comments = "none"
	c.KubernetesVersion = k8sDefaults[contract][0]
	c.InstallImage = "ghcr.io/siderolabs/installer:" + machineryVersion()

	typed := typedContract(vc)

	switch {
	case !v.AESCBC:
		v.Encryption = "machinery's generator"
	case typed:
		v.Encryption = "KubeEtcdEncryptionConfig set to Talos's providers for the bundle (secretbox key2, aescbc key1): " +
			"machinery's generator writes the aescbc secret as a secretbox key key1"
	default:
		// the legacy generator writes the secretbox secret only (SecretboxEncryptionSupported); a cluster made before
		// Talos 1.3 keeps cluster.aescbcEncryptionSecret, upgraded in place
		v.Encryption = "cluster.aescbcEncryptionSecret by a control-plane patch, as a cluster made before Talos 1.3 keeps it"
		c.extraPatches = func(_ *Case, _ string, _ bool) []PatchRecord {
			return []PatchRecord{{Target: "controlplane", Patch: "cluster:\n  aescbcEncryptionSecret: " + b.Secrets.AESCBCEncryptionSecret + "\n"}}
		}
	}

	configBundle, err := configBundleFor(&c, vc, b)
	if err != nil {
		return err
	}

	if v.AESCBC && typed {
		generated, err := encryptionProviders(configBundle.ControlPlaneCfg)
		if err != nil {
			return err
		}

		raw, err := json.Marshal(generated)
		if err != nil {
			return err
		}

		v.GeneratorEncryption = string(raw)

		if configBundle.ControlPlaneCfg, err = withEncryptionProviders(configBundle.ControlPlaneCfg, talosEncryptionProviders(b)); err != nil {
			return err
		}
	}

	v.Case = c

	if err = writeConfigs(dir, b, configBundle, encoder.CommentsDisabled); err != nil {
		return err
	}

	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}

	return os.WriteFile(filepath.Join(dir, "variant.json"), append(raw, '\n'), 0o644)
}
