package jobs

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"unicode/utf8"

	"github.com/claimstore/claimstore/internal/argerr"
)

// DefaultMaxArgsSize is the largest encoded args, in bytes, a client
// inserts when Config.MaxArgsSize is zero: 1 MiB.
const DefaultMaxArgsSize = 1 << 20

// replaced is what encoding/json writes for a byte of a string that is
// not UTF-8 ("coerced to valid UTF-8, replacing invalid bytes with the
// Unicode replacement rune", package encoding/json); a valid U+FFFD in a
// string is written as itself.
var replaced = []byte(`\ufffd`)

// encodeArgs returns args as JSON. Errors wrap dao.ErrInvalidArgument:
// args that do not encode, that encode to more than limit bytes (limit >
// 0), or that hold text that is not UTF-8 (encoding/json would store it
// altered; a NUL is carried as \u0000 and decodes back intact).
func encodeArgs(kind string, args Args, limit int) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", argerr.Errorf("args of kind %s do not encode as JSON: %v", kind, err)
	}
	if limit > 0 && len(b) > limit {
		return "", argerr.Errorf("args of kind %s are %d bytes of JSON, more than the limit of %d (Config.MaxArgsSize)", kind, len(b), limit)
	}
	if !utf8.Valid(b) || (bytes.Contains(b, replaced) && !validText(reflect.ValueOf(args), 0)) {
		return "", argerr.Errorf("args of kind %s hold text that is not UTF-8", kind)
	}
	return string(b), nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// validText reports whether every string encoding/json would write of v
// (strings, map keys, through structs, pointers, interfaces, slices and
// arrays; not what a marshaler of its own writes, which encodeArgs checks
// as bytes) is UTF-8. It is called only on a value json.Marshal encoded,
// so v holds no cycle; depth bounds it anyway.
func validText(v reflect.Value, depth int) bool {
	if !v.IsValid() || depth > 1000 {
		return true
	}
	if t := v.Type(); t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		return true
	}
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || validText(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() || v.Type().Field(i).Anonymous {
				if !validText(v.Field(i), depth+1) {
					return false
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true // base64
		}
		for i := range v.Len() {
			if !validText(v.Index(i), depth+1) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !validText(it.Key(), depth+1) || !validText(it.Value(), depth+1) {
				return false
			}
		}
	}
	return true
}
