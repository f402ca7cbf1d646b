package storetest

import (
	"context"
	"testing"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var lifecycleTests = []namedTest{
	{"PingClose", func(t *testing.T, d store.Driver) {
		ctx := context.Background()
		requireNoError(t, d.Ping(ctx), "Ping")
		requireNoError(t, d.Close(), "Close")
		requireNoError(t, d.Close(), "Close twice")
		requireIs(t, d.Ping(ctx), model.ErrUnavailable, "Ping after Close")
	}},
}
