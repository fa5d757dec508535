package esstore

import (
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// The painless scripts the store sends. Their sources are constants: every
// value travels in params, never in the source, so Elasticsearch compiles
// each script once and caches it.

// FieldCompareScript is the script query that compares two fields of a
// document (field-to-field criteria such as dao.LtField). It reads doc
// values, so both fields must be searchable (not binary or object). params:
// a, b (field names), op (eq, ne, lt, le, gt, ge). A document where either
// field has no value does not match, as a comparison with NULL in SQL.
// Longs compare exactly; a long against a double compares as doubles; dates
// compare at the index's millisecond resolution.
const FieldCompareScript = `def a = doc[params.a]; def b = doc[params.b];
if (a.size() == 0 || b.size() == 0) { return false; }
def x = a.value; def y = b.value;
int c = 0;
if (x instanceof Long && y instanceof Long) { c = Long.compare(x, y); }
else if (x instanceof Number) { c = Double.compare(x.doubleValue(), y.doubleValue()); }
else { c = x.compareTo(y); }
String op = params.op;
if (op == 'eq') { return c == 0; }
if (op == 'ne') { return c != 0; }
if (op == 'lt') { return c < 0; }
if (op == 'le') { return c <= 0; }
if (op == 'gt') { return c > 0; }
return c >= 0;`

// WriteScript is the update script of Update, run by the update-by-query
// API on every matching document. params:
//
//   - set: a map of column name to new value (null writes null);
//   - incr: a map of column name to a long added to the current value (a
//     null column stays null, as NULL + n in SQL).
//
// Update needs a script, not for any guard, but because update by query
// changes documents only through one (it has no partial-document form) and
// an increment must add to each document's own current value on the
// server. The claim writes send no script (see esDriver.ClaimRow).
const WriteScript = `for (def e : params.set.entrySet()) { ctx._source[e.getKey()] = e.getValue(); }
for (def e : params.incr.entrySet()) {
  def cur = ctx._source[e.getKey()];
  if (cur != null) { long n = e.getValue(); ctx._source[e.getKey()] = cur + n; }
}`

var opNames = map[dao.Op]string{
	dao.OpEq: "eq", dao.OpNe: "ne", dao.OpLt: "lt", dao.OpLe: "le", dao.OpGt: "gt", dao.OpGe: "ge",
}

var rangeOps = map[dao.Op]string{dao.OpLt: "lt", dao.OpLe: "lte", dao.OpGt: "gt", dao.OpGe: "gte"}

// obj is a JSON object of the query DSL.
type obj = map[string]any

// searchableColumn returns the column name, or an error wrapping
// dao.ErrInvalidArgument when criteria or sorting cannot use it.
func (s *esDriver[T]) searchableColumn(name string) (column, error) {
	c, ok := s.byName[name]
	if !ok {
		return column{}, fmt.Errorf("%w: unknown field %q", dao.ErrInvalidArgument, name)
	}
	if !c.kind.searchable() {
		return column{}, fmt.Errorf("%w: field %q is stored but not indexed (binary or object) and cannot be searched or sorted on", dao.ErrInvalidArgument, name)
	}
	return c, nil
}

// query translates checked criteria into the query DSL.
func (s *esDriver[T]) query(c dao.Criteria) (obj, error) {
	switch c.Op() {
	case dao.OpAll:
		return obj{"match_all": obj{}}, nil
	case dao.OpAnd, dao.OpOr:
		if c.IsAll() {
			return obj{"match_all": obj{}}, nil
		}
		subs := make([]any, len(c.Children()))
		for i, ch := range c.Children() {
			q, err := s.query(ch)
			if err != nil {
				return nil, err
			}
			subs[i] = q
		}
		if c.Op() == dao.OpAnd {
			return obj{"bool": obj{"filter": subs}}, nil
		}
		return obj{"bool": obj{"should": subs, "minimum_should_match": 1}}, nil
	}
	col, err := s.searchableColumn(c.Field())
	if err != nil {
		return nil, err
	}
	f := col.name
	exists := obj{"exists": obj{"field": f}}
	switch c.Op() {
	case dao.OpIsNull:
		return obj{"bool": obj{"must_not": []any{exists}}}, nil
	case dao.OpNotNull:
		return exists, nil
	case dao.OpIn:
		vs := make([]any, len(c.Values()))
		for i, v := range c.Values() {
			if vs[i], err = encodeValue(f, col.kind, v); err != nil {
				return nil, err
			}
		}
		return obj{"terms": obj{f: vs}}, nil
	}
	if ref := c.RefField(); ref != "" {
		other, err := s.searchableColumn(ref)
		if err != nil {
			return nil, err
		}
		return obj{"script": obj{"script": obj{
			"source": FieldCompareScript,
			"lang":   "painless",
			"params": obj{"a": f, "b": other.name, "op": opNames[c.Op()]},
		}}}, nil
	}
	v, err := encodeValue(f, col.kind, c.Value())
	if err != nil {
		return nil, err
	}
	switch c.Op() {
	case dao.OpEq:
		return obj{"term": obj{f: obj{"value": v}}}, nil
	case dao.OpNe:
		// SQL semantics: NULL <> v is not true, so the field must exist.
		return obj{"bool": obj{
			"filter":   []any{exists},
			"must_not": []any{obj{"term": obj{f: obj{"value": v}}}},
		}}, nil
	case dao.OpLt, dao.OpLe, dao.OpGt, dao.OpGe:
		return obj{"range": obj{f: obj{rangeOps[c.Op()]: v}}}, nil
	}
	return nil, fmt.Errorf("%w: unknown operator %v", dao.ErrInvalidArgument, c.Op())
}

// sort translates checked ordering terms (the primary key last) into sort
// clauses. NULLs sort after every value ascending and first descending, as
// in PostgreSQL and driver.Model.Less.
func (s *esDriver[T]) sort(order []dao.Order) ([]any, error) {
	out := make([]any, len(order))
	for i, o := range order {
		col, err := s.searchableColumn(o.Field)
		if err != nil {
			return nil, err
		}
		dir, missing := "asc", "_last"
		if o.Desc {
			dir, missing = "desc", "_first"
		}
		out[i] = obj{col.name: obj{"order": dir, "missing": missing}}
	}
	return out, nil
}

// setParams splits a checked Set into the set and incr maps of
// WriteScript, with values in their JSON form; a value the index cannot
// hold is dao.ErrInvalidArgument.
func (s *esDriver[T]) setParams(set dao.Set) (obj, obj, error) {
	plain, incr := obj{}, obj{}
	for _, name := range driver.SetColumns(set) {
		c := s.byName[name]
		v := set[name]
		if inc, ok := v.(dao.Increment); ok {
			incr[name] = inc.N
			continue
		}
		ev, err := encodeValue(name, c.kind, v)
		if err != nil {
			return nil, nil, err
		}
		plain[name] = ev
	}
	return plain, incr, nil
}
