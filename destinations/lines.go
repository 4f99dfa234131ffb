package destinations

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// ruleLines finds the line of each rule of destination name in file b, so
// that a rule's error names its own line; 0 where it cannot be found.
func ruleLines(b []byte, name string) func(int) int {
	var lines []int
	if start := keyOffset(b, name); start >= 0 {
		dec := json.NewDecoder(bytes.NewReader(b[start:]))
		var obj json.RawMessage
		if dec.Decode(&obj) == nil {
			region := b[start : start+int(dec.InputOffset())]
			if i := bytes.Index(region, []byte(`"rules"`)); i >= 0 {
				if j := bytes.IndexByte(region[i:], '['); j >= 0 {
					at := start + i + j
					ad := json.NewDecoder(bytes.NewReader(b[at:]))
					if _, err := ad.Token(); err == nil {
						for ad.More() {
							off := at + int(ad.InputOffset())
							for off < len(b) && bytes.IndexByte([]byte(" \t\r\n,"), b[off]) >= 0 {
								off++
							}
							lines = append(lines, bytes.Count(b[:off], []byte("\n"))+1)
							var raw json.RawMessage
							if ad.Decode(&raw) != nil {
								break
							}
						}
					}
				}
			}
		}
	}
	return func(i int) int {
		if i < len(lines) {
			return lines[i]
		}
		return 0
	}
}

// keyOffset is the offset of destination name's value in b, or -1.
func keyOffset(b []byte, name string) int {
	quoted, _ := json.Marshal(name)
	for from := 0; ; {
		i := bytes.Index(b[from:], quoted)
		if i < 0 {
			return -1
		}
		i += from + len(quoted)
		rest := bytes.TrimLeft(b[i:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return len(b) - len(rest) + 1
		}
		from = i
	}
}

// lineAt finds the line of a decode error: syntax and type errors carry an
// offset; for others the decoder's position is close enough.
func lineAt(b []byte, offset int64, err error) int {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	default:
		// An unknown field is reported after its object is read: point at
		// the field's name instead, its last occurrence before that point.
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if i := bytes.LastIndex(b[:min(offset, int64(len(b)))], []byte(name)); i >= 0 {
				offset = int64(i)
			}
		}
	}
	offset = min(offset, int64(len(b)))
	return bytes.Count(b[:offset], []byte("\n")) + 1
}

func lineOfKey(b []byte, name string) int {
	quoted, _ := json.Marshal(name)
	i := bytes.Index(b, append(quoted, ':'))
	if i < 0 {
		i = bytes.Index(b, quoted)
	}
	if i < 0 {
		return 0
	}
	return bytes.Count(b[:i], []byte("\n")) + 1
}
