package main

// serve: a Talos API peer that does not share our code, for our client to talk to. It is machinery's own
// generated MachineService server (the Unimplemented server embedded) behind mTLS, answering two calls
// the way Talos's machined does, so a test can check what our client makes of a real server's status.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

type serveServer struct {
	machineapi.UnimplementedMachineServiceServer

	secret string
}

// ApplyConfiguration decodes the data as machined does (configloader.NewFromBytes, a failure answered as
// InvalidArgument with the decoder's text). Empty data stands for a config with a misspelt key holding
// the --secret value, so the decoder quotes that value, as it quotes whatever an unknown key holds.
func (s *serveServer) ApplyConfiguration(_ context.Context, in *machineapi.ApplyConfigurationRequest) (*machineapi.ApplyConfigurationResponse, error) {
	data := in.GetData()
	if len(data) == 0 {
		data = fmt.Appendf(nil, "version: v1alpha1\nmachine:\n  type: worker\n  tokn: %s\n", s.secret)
	}

	if _, err := configloader.NewFromBytes(data); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	return nil, status.Error(codes.InvalidArgument, "serve: the config decoded; send one with an unknown key")
}

// EtcdMemberList answers as machined's checkControlplane does on a worker.
func (s *serveServer) EtcdMemberList(context.Context, *machineapi.EtcdMemberListRequest) (*machineapi.EtcdMemberListResponse, error) {
	return nil, status.Error(codes.Unimplemented, "member list is only available on control plane nodes")
}

func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	secret := fs.String("secret", "", "value the ApplyConfiguration refusal quotes (required)")
	caCrt := fs.String("ca-crt", "", "CA certificate (PEM); with --ca-key; generated (Ed25519) when absent")
	caKey := fs.String("ca-key", "", "CA private key (PEM, PKCS#8)")
	dir := fs.String("dir", "", "where to write ca.crt, client.crt, client.key and talosconfig (required)")
	_ = fs.Parse(args)

	if *secret == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "serve: --secret and --dir are required")

		return 2
	}

	if err := serve(*listen, *secret, *caCrt, *caKey, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "serve: %v\n", err)

		return 1
	}

	return 0
}

func serve(listen, secret, caCrtPath, caKeyPath, dir string) error {
	ca, caKey, err := loadOrMakeCA(caCrtPath, caKeyPath)
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}

	host, _, _ := net.SplitHostPort(lis.Addr().String())

	serverCert, err := issue(ca, caKey, "serve", nil, host, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}

	// Talos's client certificates name their role in the organization.
	clientCert, err := issue(ca, caKey, "admin", []string{"os:admin"}, "", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}

	if err := writeCredentials(dir, ca, clientCert, lis.Addr().String()); err != nil {
		return err
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca)

	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	})

	srv := grpc.NewServer(grpc.Creds(creds))
	machineapi.RegisterMachineServiceServer(srv, &serveServer{secret: secret})

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)

	go func() {
		<-stop
		srv.Stop()
	}()

	fmt.Printf("ready %s\n", lis.Addr())

	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}

	return nil
}

func loadOrMakeCA(crtPath, keyPath string) (*x509.Certificate, any, error) {
	if crtPath == "" && keyPath == "" {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, err
		}

		tmpl := certTemplate("talos", []string{"talos"})
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature

		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
		if err != nil {
			return nil, nil, err
		}

		ca, err := x509.ParseCertificate(der)

		return ca, key, err
	}

	if crtPath == "" || keyPath == "" {
		return nil, nil, errors.New("--ca-crt and --ca-key go together")
	}

	ca, err := readPEM(crtPath, "CERTIFICATE", x509.ParseCertificate)
	if err != nil {
		return nil, nil, err
	}

	key, err := readPEM(keyPath, "", x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, nil, err
	}

	return ca, key, nil
}

func readPEM[T any](path, want string, parse func([]byte) (T, error)) (T, error) {
	var zero T

	raw, err := os.ReadFile(path)
	if err != nil {
		return zero, err
	}

	block, _ := pem.Decode(raw)
	if block == nil || (want != "" && block.Type != want) {
		return zero, fmt.Errorf("%s: no %s PEM block", path, want)
	}

	return parse(block.Bytes)
}

func certTemplate(cn string, org []string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))

	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: org},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// issue signs an Ed25519 leaf certificate; host (an IP or a name) goes into the SANs of a server certificate.
func issue(ca *x509.Certificate, caKey any, cn string, org []string, host string, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}

	tmpl := certTemplate(cn, org)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}

	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else if host != "" {
		tmpl.DNSNames = []string{host}
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}

	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// writeCredentials writes the CA and the client certificate as PEM files and as a talosconfig
// (machinery's client config type: base64 of the PEM blocks), context "serve", the endpoint addr.
func writeCredentials(dir string, ca *x509.Certificate, client tls.Certificate, addr string) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(client.PrivateKey)
	if err != nil {
		return err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	crtPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.Certificate[0]})
	// Talos labels Ed25519 keys this way (PKCS#8 inside).
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "ED25519 PRIVATE KEY", Bytes: keyDER})

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	for name, data := range map[string][]byte{"ca.crt": caPEM, "client.crt": crtPEM, "client.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}

	cfg := &clientconfig.Config{
		Context: "serve",
		Contexts: map[string]*clientconfig.Context{"serve": {
			Endpoints: []string{addr},
			CA:        base64.StdEncoding.EncodeToString(caPEM),
			Crt:       base64.StdEncoding.EncodeToString(crtPEM),
			Key:       base64.StdEncoding.EncodeToString(keyPEM),
		}},
	}

	return cfg.Save(filepath.Join(dir, "talosconfig"))
}
