package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseIdempotencyKey(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   string
		err    string
	}{
		{"quoted", []string{`"order-1042"`}, "order-1042", ""},
		{"escapes", []string{`"a \"b\" \\c"`}, `a "b" \c`, ""},
		{"bare token", []string{"order-1042:x/y"}, "order-1042:x/y", ""},
		{"spaces around", []string{` "k" `}, "k", ""},
		{"missing", nil, "", "missing"},
		{"twice", []string{`"a"`, `"b"`}, "", "more than once"},
		{"empty quoted", []string{`""`}, "", "empty"},
		{"empty", []string{""}, "", "empty"},
		{"no closing quote", []string{`"abc`}, "", "no closing quote"},
		{"parameters", []string{`"abc";x=1`}, "", "after the closing quote"},
		{"bad escape", []string{`"a\n"`}, "", "backslash"},
		{"control", []string{"\"a\x01\""}, "", "printable ASCII"},
		{"non-ASCII", []string{"\"caf\xc3\xa9\""}, "", "printable ASCII"},
		{"bare digit first", []string{"1042"}, "", "quote it"},
		{"bare with space", []string{"order 1"}, "", "quote the key"},
		{"at the limit", []string{`"` + strings.Repeat("k", MaxKeyBytes) + `"`}, strings.Repeat("k", MaxKeyBytes), ""},
		{"over the limit", []string{`"` + strings.Repeat("k", MaxKeyBytes+1) + `"`}, "", "over the limit of 255"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseIdempotencyKey(c.values)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestPreferWait(t *testing.T) {
	for v, want := range map[string]int{"wait=5": 5, "respond-async, wait=2": 2, "WAIT=3;x": 3, "wait=0": 1} {
		got, ok := preferWait([]string{v})
		require.True(t, ok, v)
		require.Equal(t, want, int(got.Seconds()), v)
	}
	for _, v := range []string{"", "wait=soon", "wait=-1", "return=minimal"} {
		_, ok := preferWait([]string{v})
		require.False(t, ok, v)
	}
}
