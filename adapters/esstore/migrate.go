package esstore

import (
	"context"
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// Migrate creates the index with an explicit mapping derived from the
// model, the sequence index and the lock index of TryLock. Strings map to keyword, integers to long,
// floats to double, booleans to boolean, times to date, []byte to binary,
// and any other column (JSON, custom types) to a disabled object kept only
// in _source; the mapping is strict, so a document with an unknown field
// is refused. An index that already exists is left as it is, so Migrate
// is idempotent. Errors are mapped as every other call's.
func (s *esDriver[T]) Migrate(ctx context.Context) error {
	props := obj{}
	for _, c := range s.cols {
		props[c.name] = mappingOf(c.kind)
	}
	if err := s.createIndex(ctx, s.index, obj{"mappings": obj{"dynamic": "strict", "properties": props}}); err != nil {
		return err
	}
	if err := s.createIndex(ctx, s.seqIndex, obj{"mappings": obj{
		"dynamic":    "strict",
		"properties": obj{"next": obj{"type": "long", "index": false}},
	}}); err != nil {
		return err
	}
	return s.createIndex(ctx, s.lockIndex(), lockMapping)
}

func mappingOf(k kind) obj {
	switch k {
	case kindInt, kindUint:
		return obj{"type": "long"}
	case kindFloat:
		return obj{"type": "double"}
	case kindString, kindUUID:
		return obj{"type": "keyword"}
	case kindBool:
		return obj{"type": "boolean"}
	case kindTime:
		return obj{"type": "date", "format": "strict_date_optional_time||epoch_millis"}
	case kindBytes:
		return obj{"type": "binary"}
	}
	return obj{"type": "object", "enabled": false}
}

func (s *esDriver[T]) createIndex(ctx context.Context, name string, body obj) error {
	r, err := jsonBody(body)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, _, esErr, err := s.do(ctx, "migrate "+name, esapi.IndicesCreateRequest{Index: name, Body: r})
	if err != nil {
		return err
	}
	if esErr != nil && esErr.Type != "resource_already_exists_exception" {
		return wrapES("migrate "+name, esErr)
	}
	return nil
}

// Drop deletes the index, the sequence index and the lock index of store, an Elasticsearch
// store built by [New], with all their documents. Indexes that do not
// exist are ignored. A store of another backend is
// dao.ErrInvalidArgument.
func Drop[T any](ctx context.Context, store *dao.Table[T]) error {
	var d *esDriver[T]
	if !store.As(&d) {
		return fmt.Errorf("claimstore: drop: %w: not an Elasticsearch store", dao.ErrInvalidArgument)
	}
	if err := d.drop(ctx); err != nil {
		return fmt.Errorf("claimstore: drop: %w", err)
	}
	return nil
}

// drop deletes the driver's indexes.
func (s *esDriver[T]) drop(ctx context.Context) error {
	for _, name := range []string{s.index, s.seqIndex, s.lockIndex()} {
		_, _, esErr, err := s.do(ctx, "drop "+name, esapi.IndicesDeleteRequest{Index: []string{name}})
		if err != nil {
			return err
		}
		if esErr != nil && esErr.Status != 404 {
			return wrapES("drop "+name, esErr)
		}
	}
	return nil
}
