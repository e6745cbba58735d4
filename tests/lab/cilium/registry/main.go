// An OCI registry on loopback for the lab: go-containerregistry's in-memory registry, served over TLS with the
// certificate the test made, so that the real helm pushes and pulls charts as it does from any OCI registry.
//
// usage: registry ADDRESS CERT KEY   (prints "listening <address>" once it accepts connections)
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: registry ADDRESS CERT KEY")
		os.Exit(2)
	}

	listener, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		log.Fatal(err)
	}

	fmt.Printf("listening %s\n", listener.Addr())

	server := &http.Server{Handler: registry.New(registry.Logger(log.New(os.Stderr, "registry: ", 0)))}
	log.Fatal(server.ServeTLS(listener, os.Args[2], os.Args[3]))
}
