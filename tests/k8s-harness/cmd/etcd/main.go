// Command etcd is the upstream etcd server entry point, built inside the
// harness module so the test lab gets etcd 3.6 without a separate download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
