// Benthos (github.com/redpanda-data/benthos/v4, MIT), Redpanda Connect's
// stream engine, with only its `pure` and `io` components: the Go peer of
// the local_pipeline benchmark (tests/benches/common/benthos.rs builds it
// with `go build` and runs it on a config of the same work as Weir's).
package main

import (
	"context"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
)

func main() {
	service.RunCLI(context.Background())
}
