package esstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// kind is how a column is stored and compared in Elasticsearch.
type kind int

// The kinds share dao's values (driver.KindOf), plus one of this package for
// columns written through a GORM serializer.
const (
	kindOther  = kind(driver.KindOther)  // object with "enabled": false: kept in _source, not searchable
	kindInt    = kind(driver.KindInt)    // long
	kindUint   = kind(driver.KindUint)   // long; values above math.MaxInt64 are refused
	kindFloat  = kind(driver.KindFloat)  // double
	kindString = kind(driver.KindString) // keyword
	kindBool   = kind(driver.KindBool)   // boolean
	kindTime   = kind(driver.KindTime)   // date (millisecond resolution in the index)
	kindBytes  = kind(driver.KindBytes)  // binary: kept in _source, not searchable
	kindUUID   = kind(driver.KindUUID)   // keyword holding the canonical text
	// kindSerialized is a GORM serializer's output, kept in _source, not
	// searchable.
	kindSerialized kind = -1
)

// textual reports whether values of kind k are strings (keyword fields).
func (k kind) textual() bool { return k == kindString || k == kindUUID }

func fieldKind(f *schema.Field) kind {
	if f.Serializer != nil {
		return kindSerialized
	}
	return kind(driver.KindOf(f))
}

// searchable reports whether criteria and sorting may use a column of kind k.
func (k kind) searchable() bool { return k != kindOther && k != kindBytes && k != kindSerialized }

// timeLayout is the wire form of times: RFC 3339 with up to nine fraction
// digits, always in UTC ("Z"). Elasticsearch's strict_date_optional_time
// parses it; the document's _source keeps the string as written, so a
// round trip returns the instant the caller stored, to the nanosecond.
const timeLayout = time.RFC3339Nano

// encodeValue turns a plain value of a column of kind k (as returned by
// driver.Model.Value, or a checked Set value) into its JSON form.
// Values Elasticsearch cannot hold are dao.ErrInvalidArgument.
func encodeValue(name string, k kind, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch x := v.(type) {
	case time.Time:
		u := x.UTC()
		if u.Year() < 0 || u.Year() > 9999 {
			return nil, fmt.Errorf("%w: field %q: time %v outside years 0000-9999", dao.ErrInvalidArgument, name, x)
		}
		return u.Format(timeLayout), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: field %q: %v cannot be stored", dao.ErrInvalidArgument, name, x)
		}
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("%w: field %q: %d exceeds the long range", dao.ErrInvalidArgument, name, x)
		}
		return int64(x), nil
	case int64, string, bool, []byte:
		return x, nil
	}
	if k == kindOther {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: field %q: %w", dao.ErrInvalidArgument, name, err)
		}
		return json.RawMessage(b), nil
	}
	return nil, fmt.Errorf("%w: field %q: unsupported value type %T", dao.ErrInvalidArgument, name, v)
}

// encodeDoc returns the document of row: every column by its name.
func (s *esDriver[T]) encodeDoc(row *T) (map[string]any, error) {
	doc := make(map[string]any, len(s.cols))
	for _, c := range s.cols {
		v, _ := s.model.Value(row, c.name)
		ev, err := encodeValue(c.name, c.kind, v)
		if err != nil {
			return nil, err
		}
		doc[c.name] = ev
	}
	return doc, nil
}

// decodeDoc builds a T from a document's _source. Columns missing or null
// in the source stay at their zero value (nil for pointers).
func (s *esDriver[T]) decodeDoc(src json.RawMessage) (T, error) {
	var row T
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(src, &fields); err != nil {
		return row, fmt.Errorf("decode _source: %w", err)
	}
	rv := reflect.ValueOf(&row).Elem()
	ctx := context.Background()
	for _, c := range s.cols {
		raw, ok := fields[c.name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		v, err := decodeValue(c, raw)
		if err != nil {
			return row, fmt.Errorf("decode field %q: %w", c.name, err)
		}
		if c.kind == kindSerialized {
			if err := c.field.Serializer.Scan(ctx, c.field, rv, v); err != nil {
				return row, fmt.Errorf("deserialize field %q: %w", c.name, err)
			}
			continue
		}
		if err := c.field.Set(ctx, rv, v); err != nil {
			return row, fmt.Errorf("set field %q: %w", c.name, err)
		}
	}
	return row, nil
}

func decodeValue(c column, raw json.RawMessage) (any, error) {
	switch c.kind {
	case kindInt:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, err
		}
		return strconv.ParseInt(n.String(), 10, 64)
	case kindUint:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, err
		}
		return strconv.ParseUint(n.String(), 10, 64)
	case kindFloat:
		var f float64
		err := json.Unmarshal(raw, &f)
		return f, err
	case kindString, kindUUID:
		var str string
		err := json.Unmarshal(raw, &str)
		return str, err
	case kindBool:
		var b bool
		err := json.Unmarshal(raw, &b)
		return b, err
	case kindTime:
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, err
		}
		return time.Parse(timeLayout, str)
	case kindBytes:
		var b []byte
		err := json.Unmarshal(raw, &b)
		return b, err
	case kindSerialized:
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return i, nil
			}
			return n.Float64()
		}
		return v, nil
	}
	p := reflect.New(c.field.FieldType)
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return nil, err
	}
	return p.Elem().Interface(), nil
}

// docID renders a plain primary-key value as a document _id.
func docID(v any) (string, error) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case string:
		if x == "" {
			return "", fmt.Errorf("%w: empty primary key", dao.ErrInvalidArgument)
		}
		if len(x) > 512 {
			return "", fmt.Errorf("%w: primary key longer than 512 bytes", dao.ErrInvalidArgument)
		}
		return x, nil
	}
	return "", fmt.Errorf("%w: primary key of type %T", dao.ErrInvalidArgument, v)
}
