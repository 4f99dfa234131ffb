package opkey

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// keyVectors is testdata/key_vectors.json, written by gen_key_vectors.py
// from an independent Python implementation of docs/keys.md.
type keyVectors struct {
	Namespace string `json:"namespace"`
	Vectors   []struct {
		Name                     string    `json:"name"`
		Operation                Operation `json:"operation"`
		KeyNameHex               string    `json:"key_name_hex"`
		Payload                  string    `json:"payload"`
		Key                      string    `json:"key"`
		CanonicalPayload         string    `json:"canonical_payload"`
		Fingerprint              string    `json:"fingerprint"`
		SameFingerprintAs        string    `json:"same_fingerprint_as"`
		DifferentFingerprintFrom string    `json:"different_fingerprint_from"`
		DifferentKeyFrom         string    `json:"different_key_from"`
	} `json:"vectors"`
	InvalidPayloads []struct {
		Name       string `json:"name"`
		Payload    string `json:"payload"`
		PayloadHex string `json:"payload_hex"`
		Reason     string `json:"reason"`
	} `json:"invalid_payloads"`
	InvalidOperations []struct {
		Name      string    `json:"name"`
		Operation Operation `json:"operation"`
		Field     string    `json:"field"`
	} `json:"invalid_operations"`
}

func loadKeyVectors(tb testing.TB) keyVectors {
	tb.Helper()
	raw, err := os.ReadFile("testdata/key_vectors.json")
	require.NoError(tb, err)
	var kv keyVectors
	require.NoError(tb, json.Unmarshal(raw, &kv))
	return kv
}

func TestKeyVectors(t *testing.T) {
	kv := loadKeyVectors(t)
	require.Equal(t, KeyNamespace.String(), kv.Namespace)
	require.GreaterOrEqual(t, len(kv.Vectors), 16)
	fingerprints, keys := map[string]string{}, map[string]string{}
	for _, v := range kv.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			require.NoError(t, v.Operation.Validate())
			require.Equal(t, v.KeyNameHex, hex.EncodeToString(v.Operation.canonical()))
			require.Equal(t, v.Key, Key(v.Operation))

			canon, err := CanonicalJSON([]byte(v.Payload))
			require.NoError(t, err)
			require.Equal(t, v.CanonicalPayload, string(canon))
			fp, err := Fingerprint([]byte(v.Payload))
			require.NoError(t, err)
			require.Equal(t, v.Fingerprint, fp)

			again, err := CanonicalJSON(canon)
			require.NoError(t, err)
			require.Equal(t, string(canon), string(again), "canonical form is a fixed point")
		})
		fingerprints[v.Name], keys[v.Name] = v.Fingerprint, v.Key
	}
	for _, v := range kv.Vectors {
		if v.SameFingerprintAs != "" {
			require.Equal(t, fingerprints[v.SameFingerprintAs], v.Fingerprint, v.Name)
		}
		if v.DifferentFingerprintFrom != "" {
			require.NotEqual(t, fingerprints[v.DifferentFingerprintFrom], v.Fingerprint, v.Name)
		}
		if v.DifferentKeyFrom != "" {
			require.NotEqual(t, keys[v.DifferentKeyFrom], v.Key, v.Name)
		}
	}
}

// Go error text for each reason in the vectors file.
var reasonText = map[string]string{
	"not an object":         "payload: must be a JSON object",
	"invalid JSON":          "payload: invalid JSON at offset ",
	"trailing data":         "payload: trailing data at offset ",
	"duplicate member name": "payload: duplicate member name ",
	"lone surrogate":        "is a lone UTF-16 surrogate",
	"invalid UTF-8":         "payload: invalid UTF-8 at offset ",
}

func TestInvalidPayloadVectors(t *testing.T) {
	kv := loadKeyVectors(t)
	for _, v := range kv.InvalidPayloads {
		t.Run(v.Name, func(t *testing.T) {
			payload := []byte(v.Payload)
			if v.PayloadHex != "" {
				var err error
				payload, err = hex.DecodeString(v.PayloadHex)
				require.NoError(t, err)
			}
			want, ok := reasonText[v.Reason]
			require.True(t, ok, "unknown reason %q", v.Reason)
			_, err := CanonicalJSON(payload)
			require.ErrorContains(t, err, want)
			_, err = Fingerprint(payload)
			require.ErrorContains(t, err, want)

			// Only the I-JSON rules reject what encoding/json accepts.
			iJSON := v.Reason == "duplicate member name" || v.Reason == "lone surrogate" || v.Reason == "invalid UTF-8"
			objectLike := bytes.HasPrefix(bytes.TrimLeft(payload, " \t\r\n"), []byte("{"))
			require.Equal(t, iJSON, json.Valid(payload) && objectLike)
		})
	}
}

func TestInvalidOperationVectors(t *testing.T) {
	kv := loadKeyVectors(t)
	for _, v := range kv.InvalidOperations {
		require.ErrorContains(t, v.Operation.Validate(), v.Field+": ", v.Name)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	require.NoError(t, ok.Validate())
	require.NoError(t, Operation{Destination: "d", Operation: "o", BusinessID: "b"}.Validate(), "tenant is optional")
	long := strings.Repeat("x", MaxFieldBytes)
	require.NoError(t, Operation{Tenant: long, Destination: long, Operation: long, BusinessID: long}.Validate())

	cases := []struct {
		edit func(*Operation)
		want string
	}{
		{func(o *Operation) { o.Destination = "" }, "destination: required, got an empty string"},
		{func(o *Operation) { o.Operation = "" }, "operation: required, got an empty string"},
		{func(o *Operation) { o.BusinessID = "" }, "business_id: required, got an empty string"},
		{func(o *Operation) { o.Tenant = long + "x" }, "tenant: 256 bytes, the limit is 255"},
		{func(o *Operation) { o.Destination = long + "x" }, "destination: 256 bytes, the limit is 255"},
		{func(o *Operation) { o.Operation = long + "x" }, "operation: 256 bytes, the limit is 255"},
		{func(o *Operation) { o.BusinessID = strings.Repeat("€", 86) }, "business_id: 258 bytes, the limit is 255"},
		{func(o *Operation) { o.Tenant = "acme\xff" }, "tenant: not valid UTF-8"},
		{func(o *Operation) { o.Destination = "\xc3" }, "destination: not valid UTF-8"},
		{func(o *Operation) { o.Operation = "\xed\xa0\x80" }, "operation: not valid UTF-8"},
		{func(o *Operation) { o.BusinessID = "id-\xc0\xaf" }, "business_id: not valid UTF-8"},
	}
	for _, c := range cases {
		op := ok
		c.edit(&op)
		require.EqualError(t, op.Validate(), c.want)
	}
}

// TestValidateRefusesWhatIsNotPlainText: each class of refused character,
// in each field, named with its code point and byte offset; characters
// beside them stay accepted.
func TestValidateRefusesWhatIsNotPlainText(t *testing.T) {
	ok := Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	// The escape's text, and the space and invisible characters that
	// change no line and no direction, are plain text.
	for _, s := range []string{"Zürich-商店", "order 7", "a/b?c#d", "..", "😀", `\u202e`, "\u00a0\u200b\u200d\ufeff\u2028"} {
		op := ok
		op.Tenant, op.Destination, op.Operation, op.BusinessID = s, s, s, s
		require.NoError(t, op.Validate(), "%q", s)
	}

	cases := []struct {
		edit func(*Operation)
		want string
	}{
		{func(o *Operation) { o.BusinessID = "a\x00b" }, "business_id: control character U+0000 at offset 1: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Tenant = "acme\r\nforged" }, "tenant: control character U+000D at offset 4: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Operation = "create\tticket" }, "operation: control character U+0009 at offset 6: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Destination = "help\x1fdesk" }, "destination: control character U+001F at offset 4: identifiers are plain text; remove it"},
		{func(o *Operation) { o.BusinessID = "id\x7f" }, "business_id: control character U+007F at offset 2: identifiers are plain text; remove it"},
		{func(o *Operation) { o.BusinessID = "é\u0085" }, "business_id: control character U+0085 at offset 2: identifiers are plain text; remove it"},
		{func(o *Operation) { o.BusinessID = "\u0080" }, "business_id: control character U+0080 at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.BusinessID = "\u009f" }, "business_id: control character U+009F at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.BusinessID = "invoice-\u202efdp.exe" }, "business_id: bidirectional formatting character U+202E at offset 8: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Tenant = "\u061c" }, "tenant: bidirectional formatting character U+061C at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Tenant = "\u200e" }, "tenant: bidirectional formatting character U+200E at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Tenant = "\u200f" }, "tenant: bidirectional formatting character U+200F at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Operation = "\u202a" }, "operation: bidirectional formatting character U+202A at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Operation = "\u2066" }, "operation: bidirectional formatting character U+2066 at offset 0: identifiers are plain text; remove it"},
		{func(o *Operation) { o.Operation = "\u2069" }, "operation: bidirectional formatting character U+2069 at offset 0: identifiers are plain text; remove it"},
		// Every other check, in every field, comes first.
		{func(o *Operation) { o.Tenant, o.BusinessID = "\n", "" }, "business_id: required, got an empty string"},
		{func(o *Operation) { o.Tenant, o.Destination = "\u202e", "\xff" }, "destination: not valid UTF-8"},
		{func(o *Operation) { o.Tenant, o.BusinessID = "t\n", "\u202e" }, "tenant: control character U+000A at offset 1: identifiers are plain text; remove it"},
	}
	for _, c := range cases {
		op := ok
		c.edit(&op)
		err := op.Validate()
		require.EqualError(t, err, c.want)
		var ce *CharacterError
		require.Equal(t, strings.Contains(c.want, "identifiers are plain text"), errors.As(err, &ce), c.want)
	}

	// Not every character in those blocks: the ones around them pass.
	for _, r := range []rune{0x20, 0x7E, 0xA0, 0x061B, 0x061D, 0x200D, 0x2010, 0x2029, 0x202F, 0x2065, 0x206A} {
		op := ok
		op.BusinessID = "x" + string(r)
		require.NoError(t, op.Validate(), "U+%04X", r)
	}
}

// The length prefixes make the encoding injective: no choice of fields,
// separators and digits included, gives two operations one key.
func TestKeyHasNoCollisions(t *testing.T) {
	require.NotEqual(t,
		Key(Operation{Tenant: "a:b", Destination: "c", Operation: "o", BusinessID: "id"}),
		Key(Operation{Tenant: "a", Destination: "b:c", Operation: "o", BusinessID: "id"}))
	require.NotEqual(t,
		Key(Operation{Tenant: "a;b", Destination: "c", Operation: "o", BusinessID: "id"}),
		Key(Operation{Tenant: "a", Destination: "b;c", Operation: "o", BusinessID: "id"}))

	parts := []string{"", "a", ":", ";", "1", "1:", "a;", "1:a;", "0:;", "é"}
	seen := map[string]Operation{}
	for _, t0 := range parts {
		for _, d := range parts {
			for _, o := range parts {
				for _, b := range parts {
					op := Operation{Tenant: t0, Destination: d, Operation: o, BusinessID: b}
					k := Key(op)
					prev, dup := seen[k]
					require.False(t, dup, "%+v and %+v share key %s", prev, op)
					seen[k] = op
				}
			}
		}
	}
	require.Equal(t, Key(Operation{Destination: "d", Operation: "o", BusinessID: "b"}),
		Key(Operation{Destination: "d", Operation: "o", BusinessID: "b"}), "a pure function")
}

func TestCanonicalJSONErrors(t *testing.T) {
	cases := map[string]string{
		`[1]`:                   `payload: must be a JSON object, e.g. {"subject": "..."}`,
		``:                      `payload: must be a JSON object, e.g. {"subject": "..."}`,
		`{"a":1,"b":2,"a":3}`:   `payload: duplicate member name "a"`,
		`{"x":{"\n":1,"\n":2}}`: `payload: duplicate member name "\n"`,
		`{"a":1} {}`:            `payload: trailing data at offset 8 after the JSON object`,
		`{"a":01}`:              `payload: invalid JSON at offset 6: invalid character '1' after object key:value pair`,
		`{"a":}`:                `payload: invalid JSON at offset 5: invalid character '}' looking for beginning of value`,
		`{"a":1`:                `payload: invalid JSON at offset 6: unexpected end of input`,
		`{"a":"\q"}`:            `payload: invalid JSON at offset 7: invalid character 'q' in string escape code`,
		"{\"a\":\"\x01\"}":      `payload: invalid JSON at offset 6: invalid character 0x01 in string literal`,
		`{"a":"\ud800"}`:        `payload: invalid string at offset 6: \ud800 is a lone UTF-16 surrogate`,
		"{\"a\":\"ok\xff\"}":    `payload: invalid UTF-8 at offset 8: payloads must be UTF-8`,
		// The first problem in document order, a duplicate when its object closes.
		`{"x":{"a":1,"a":2},}`:           `payload: duplicate member name "a"`,
		`{"a":1,"a":2`:                   `payload: invalid JSON at offset 12: unexpected end of input`,
		"{\"a\":\"\xff\",}":              `payload: invalid UTF-8 at offset 6: payloads must be UTF-8`,
		`{"a":["\ud800",{"c":1,"c":2}]}`: `payload: invalid string at offset 7: \ud800 is a lone UTF-16 surrogate`,
	}
	for in, want := range cases {
		_, err := CanonicalJSON([]byte(in))
		require.EqualError(t, err, want, "input %q", in)
	}
}

func TestPayloadLimits(t *testing.T) {
	// {"a":"xxx...x"} of exactly MaxPayloadBytes is fine; one byte more is not.
	body := strings.Repeat("x", MaxPayloadBytes-len(`{"a":""}`))
	full := []byte(`{"a":"` + body + `"}`)
	require.Len(t, full, MaxPayloadBytes)
	canon, err := CanonicalJSON(full)
	require.NoError(t, err)
	require.Equal(t, full, canon)
	_, err = Fingerprint(append(full, ' '))
	require.EqualError(t, err, "payload: 262145 bytes, the limit is 262144")

	// Nesting: the limit is encoding/json's, so both accept the same documents.
	nest := func(depth int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	require.True(t, json.Valid(nest(maxDepth)))
	_, err = CanonicalJSON(nest(maxDepth))
	require.NoError(t, err)
	require.False(t, json.Valid(nest(maxDepth+1)))
	_, err = CanonicalJSON(nest(maxDepth + 1))
	require.ErrorContains(t, err, "nested deeper than 10000 levels")
}

// Many members, in order, reversed and shuffled, against the reference.
func TestCanonicalJSONManyMembers(t *testing.T) {
	var names []string
	for i := range 3000 {
		names = append(names, fmt.Sprintf("m%d-\u00e9\U0001F600%c", i, rune(0xE000+i)))
	}
	build := func(names []string) []byte {
		var b bytes.Buffer
		b.WriteString("{")
		for i, n := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			q, err := json.Marshal(n)
			require.NoError(t, err)
			fmt.Fprintf(&b, "%s: {%s: %d, \"a\": [%d]}", q, q, i, i)
		}
		b.WriteString("}")
		return b.Bytes()
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	shuffled := slices.Clone(names)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	for _, in := range [][]byte{build(names), build(reversed), build(shuffled)} {
		got, err := CanonicalJSON(in)
		require.NoError(t, err)
		want, err := referenceCanonicalJSON(in)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
	_, err := CanonicalJSON(build(append(shuffled, names[1234])))
	require.ErrorContains(t, err, "payload: duplicate member name ")
}

// Random documents, nested and spaced at random, against the reference.
func TestCanonicalJSONRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// JSON string bodies, escapes included.
	names := []string{"a", "b", "", "é", `\u00e9x`, "😀", `\ud83d\ude01`, "｡", `\u0000`, `a\"`, "A", "~", "abcdefgh", "abcdefghi", `\n`}
	ws := []string{"", "", "", " ", "\n  ", "\t", "\r\n"}
	sp := func() string { return ws[rng.IntN(len(ws))] }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(8); {
		case k < 2 && depth < 8:
			var parts []string
			used := map[string]bool{}
			for range rng.IntN(6) {
				name := names[rng.IntN(len(names))]
				var decoded string
				require.NoError(t, json.Unmarshal([]byte(`"`+name+`"`), &decoded))
				if used[decoded] {
					continue
				}
				used[decoded] = true
				parts = append(parts, sp()+`"`+name+`"`+sp()+":"+sp()+value(depth+1)+sp())
			}
			return "{" + strings.Join(parts, ",") + sp() + "}"
		case k < 4 && depth < 8:
			var parts []string
			for range rng.IntN(5) {
				parts = append(parts, sp()+value(depth+1)+sp())
			}
			return "[" + strings.Join(parts, ",") + sp() + "]"
		case k == 4:
			return []string{"0", "-1.50", "1e+9", "12345678901234567890"}[rng.IntN(4)]
		case k == 5:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		default:
			return `"` + names[rng.IntN(len(names))] + `"`
		}
	}
	for range 3000 {
		doc := value(0)
		if doc[0] != '{' {
			continue
		}
		got, err := CanonicalJSON([]byte(doc))
		require.NoError(t, err, doc)
		want, err := referenceCanonicalJSON([]byte(doc))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), doc)
	}

	// Deep nesting, every level out of order: each byte still moves once.
	var deep strings.Builder
	for range 2000 {
		deep.WriteString(`{"b":[0,{"d":1,"c":2}],"a":`)
	}
	deep.WriteString("1" + strings.Repeat("}", 2000))
	got, err := CanonicalJSON([]byte(deep.String()))
	require.NoError(t, err)
	want, err := referenceCanonicalJSON([]byte(deep.String()))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func BenchmarkKeyAndFingerprint1KiB(b *testing.B) {
	var payload []byte
	for _, v := range loadKeyVectors(b).Vectors {
		if v.Name == "realistic-ticket-1kib" {
			payload = []byte(v.Payload)
		}
	}
	require.InDelta(b, 1024, len(payload), 64)
	op := Operation{Tenant: "acme", Destination: "helpdesk", Operation: "create-ticket", BusinessID: "example-001"}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Key(op)
		if _, err := Fingerprint(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	kv := loadKeyVectors(f)
	for _, v := range kv.Vectors {
		f.Add([]byte(v.Payload))
	}
	for _, v := range kv.InvalidPayloads {
		p, _ := hex.DecodeString(v.PayloadHex)
		f.Add(append([]byte(v.Payload), p...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		valid := json.Valid(in)
		if err == nil {
			require.True(t, valid, "accepted invalid JSON")
			require.True(t, json.Valid(out), "output is not JSON: %q", out)
			again, err := CanonicalJSON(out)
			require.NoError(t, err)
			require.Equal(t, out, again, "not a fixed point")
			want, err := referenceCanonicalJSON(in)
			require.NoError(t, err)
			require.Equal(t, string(want), string(out))
			return
		}
		if !valid || !bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n"), []byte("{")) {
			return
		}
		// Valid JSON objects are rejected only by the I-JSON rules.
		msg := err.Error()
		switch {
		case strings.Contains(msg, "duplicate member name"):
			_, err := referenceCanonicalJSON(in)
			require.ErrorContains(t, err, "duplicate member name")
		case strings.Contains(msg, "invalid UTF-8"):
			require.False(t, utf8.Valid(in))
		case strings.Contains(msg, "lone UTF-16 surrogate"):
			require.True(t, hasLoneSurrogate(in))
		case strings.Contains(msg, "the limit is"):
			require.Greater(t, len(in), MaxPayloadBytes)
		default:
			t.Fatalf("rejected valid JSON %q: %v", in, err)
		}
	})
}

// hasLoneSurrogate reports whether a valid JSON text has a \u escape of a
// surrogate that is not the first or second half of an escaped pair.
func hasLoneSurrogate(in []byte) bool {
	inString := false
	for i := 0; i < len(in); i++ {
		switch {
		case in[i] == '"':
			inString = !inString
		case inString && in[i] == '\\':
			if in[i+1] != 'u' {
				i++
				continue
			}
			r, _ := strconv.ParseUint(string(in[i+2:i+6]), 16, 16)
			i += 5
			if !utf16.IsSurrogate(rune(r)) {
				continue
			}
			if r >= 0xDC00 || i+6 >= len(in) || in[i+1] != '\\' || in[i+2] != 'u' {
				return true
			}
			lo, _ := strconv.ParseUint(string(in[i+3:i+7]), 16, 16)
			if lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// referenceCanonicalJSON is the first, simple implementation over
// encoding/json's tokenizer, kept as an oracle for the hand-written one. It
// differs only where encoding/json replaces invalid UTF-8 and lone
// surrogates with U+FFFD, inputs CanonicalJSON rejects.
func referenceCanonicalJSON(p []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var out bytes.Buffer
	if err := refValue(dec, &out); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data")
	}
	return out.Bytes(), nil
}

func refValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := refValue(dec, out); err != nil {
					return err
				}
			}
			out.WriteByte(']')
			_, err := dec.Token()
			return err
		}
		type member struct {
			name  string
			value []byte
		}
		var members []member
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			var v bytes.Buffer
			if err := refValue(dec, &v); err != nil {
				return err
			}
			members = append(members, member{tok.(string), v.Bytes()})
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		slices.SortFunc(members, func(a, b member) int {
			return slices.Compare(utf16.Encode([]rune(a.name)), utf16.Encode([]rune(b.name)))
		})
		out.WriteByte('{')
		for i, m := range members {
			if i > 0 {
				if members[i-1].name == m.name {
					return fmt.Errorf("duplicate member name %q", m.name)
				}
				out.WriteByte(',')
			}
			refString(out, m.name)
			out.WriteByte(':')
			out.Write(m.value)
		}
		out.WriteByte('}')
	case string:
		refString(out, t)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		out.WriteString(strconv.FormatBool(t))
	case nil:
		out.WriteString("null")
	}
	return nil
}

func refString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			out.WriteByte('\\')
			out.WriteRune(r)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(out, `\u%04x`, r)
			} else {
				out.WriteRune(r)
			}
		}
	}
	out.WriteByte('"')
}
