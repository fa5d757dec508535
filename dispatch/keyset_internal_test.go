package dispatch

import "testing"

// TestKeySet checks the matching of outcome keys to the keys a write
// returned: by fmt.Sprint equality, as they always were, whether a key
// is looked up as it is or by its print, and never a key that is not
// there.
func TestKeySet(t *testing.T) {
	s := newKeySet([]any{int64(1), int64(300), "a", []byte("b"), int32(7)})
	for _, tc := range []struct {
		key  any
		want bool
	}{
		{int64(1), true},
		{int64(300), true},
		{int32(300), true}, // another integer type, printed alike
		{int64(7), true},
		{"a", true},
		{"b", false},        // []byte("b") prints as [98]
		{[]byte("b"), true}, // not comparable: matched by its print
		{int64(2), false},
		{"300", true}, // prints as int64(300) does
		{"c", false},
		{[]byte("a"), false},
	} {
		if got := s.has(tc.key); got != tc.want {
			t.Errorf("has(%T %v) = %v, want %v", tc.key, tc.key, got, tc.want)
		}
	}
	if s := newKeySet(nil); s.has(int64(1)) {
		t.Error("an empty set has a key")
	}
}
