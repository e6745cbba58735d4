// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3/etcdmain),
// built through the Go module proxy for the ichor test lab.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
