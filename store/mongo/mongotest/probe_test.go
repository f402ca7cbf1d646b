package mongotest

import (
	"context"
	"testing"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestProbe(t *testing.T) {
	_ = ferretdb.New
	_ = mongo.Connect
	_ = context.Background
}
