package memstore_test

import (
	"testing"

	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
	"github.com/surfaced/surfaced/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
}

func TestZeroValue(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return new(memstore.Store) })
}

func TestArtifacts(t *testing.T) {
	storetest.RunArtifacts(t, func(t *testing.T) store.Store { return memstore.New() })
}
