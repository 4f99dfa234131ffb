package destinations

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Placeholders a URL template may use, each filled in from the delivery's
// operation and escaped for where it stands (path or query).
var Placeholders = []string{"{key}", "{business_id}", "{tenant}", "{operation}"}

// URLValues fill a URL template's placeholders.
type URLValues struct{ Key, BusinessID, Tenant, Operation string }

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// ExpandURL fills a URL template's placeholders, path-escaped in the path
// and query-escaped in the query. It fails when a placeholder is unknown, a
// value in the path is empty (an empty segment would name another
// resource), or the values make a whole path segment . or .. (servers and
// proxies resolve dot-segments away, so the request would reach another
// resource; escaping cannot help, %2E is decoded first).
func ExpandURL(tmpl string, v URLValues) (string, error) {
	values := map[string]string{"{key}": v.Key, "{business_id}": v.BusinessID, "{tenant}": v.Tenant, "{operation}": v.Operation}
	var errs []error
	fill := func(part string, inPath bool) string {
		return placeholder.ReplaceAllStringFunc(part, func(ph string) string {
			val, ok := values[ph]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("unknown placeholder %s; use %s", ph, strings.Join(Placeholders, ", ")))
			case val == "" && inPath:
				errs = append(errs, fmt.Errorf("placeholder %s: the delivery has no %s", ph, strings.Trim(ph, "{}")))
			case inPath && leavesSegment(val):
				errs = append(errs, fmt.Errorf("placeholder %s: %q holds a / or \\ or decodes to . or ..: "+
					"a proxy that decodes it before resolving the path sends the request to another resource; "+
					"use another value, or put the placeholder in the query", ph, val))
			}
			if inPath {
				return url.PathEscape(val)
			}
			return url.QueryEscape(val)
		})
	}
	path, query, hasQuery := strings.Cut(tmpl, "?")
	out := fill(path, true)
	// A value never adds a segment (PathEscape escapes /), so the template's
	// segments and the URL's pair up.
	if segs, filled := strings.Split(path, "/"), strings.Split(out, "/"); len(segs) == len(filled) {
		for i, seg := range segs {
			if (filled[i] == "." || filled[i] == "..") && placeholder.MatchString(seg) {
				what := "path segment " + seg
				if placeholder.FindString(seg) == seg {
					what = "placeholder " + seg
				}
				errs = append(errs, fmt.Errorf("%s: %q: a path segment of . or .. names another resource; "+
					"use another value, or put the placeholder in the query", what, filled[i]))
			}
		}
	}
	if hasQuery {
		out += "?" + fill(query, false)
	}
	return out, errors.Join(errs...)
}

// leavesSegment says whether a value could leave its path segment once
// escaped: it holds a separator (escaped to %2F or %5C, which some proxies
// decode before they resolve dot-segments), or it decodes to . or ...
func leavesSegment(val string) bool {
	if val == "." || val == ".." {
		return false // the dot-segment check below names it
	}
	if strings.ContainsAny(val, `/\`) {
		return true
	}
	decoded := val
	for range 3 { // as often as a chain of proxies might decode it
		d, err := url.PathUnescape(decoded)
		if err != nil || d == decoded {
			break
		}
		decoded = d
		if strings.ContainsAny(decoded, `/\`) {
			return true
		}
	}
	return decoded == "." || decoded == ".."
}

// CheckURL reports what is wrong with a URL template.
func CheckURL(tmpl string) error {
	u, err := ExpandURL(tmpl, URLValues{Key: "k", BusinessID: "b", Tenant: "t", Operation: "o"})
	if err != nil {
		return err
	}
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", tmpl)
	}
	if _, rest, _ := strings.Cut(tmpl, "://"); placeholder.MatchString(strings.SplitN(rest, "/", 2)[0]) {
		return errors.New("placeholders go in the path or query, not the host")
	}
	return nil
}
