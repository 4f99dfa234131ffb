package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/abde64c9/courier/internal/sqlitedsn"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"
)

const (
	driverSQLite   = "sqlite"
	driverPostgres = "pgx"
)

// target is a parsed ledger URL: what to hand the driver and what to show.
type target struct {
	driver string
	dsn    string // holds credentials: never printed
	where  string // Where(): no credentials
	scrub  scrubber
}

func parse(raw string) (target, error) {
	switch {
	case strings.HasPrefix(raw, "sqlite:"):
		return parseSQLite(strings.TrimPrefix(raw, "sqlite:"))
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		return parsePostgres(raw)
	case raw == "":
		return target{}, errors.New("ledger: no URL given: " + acceptedForms)
	default:
		// Only the scheme is shown: whatever follows could hold a password.
		scheme, _, found := strings.Cut(raw, ":")
		if !found || strings.ContainsAny(scheme, "/@") {
			return target{}, errors.New("ledger: unsupported ledger URL: " + acceptedForms)
		}
		return target{}, fmt.Errorf("ledger: unsupported ledger URL (scheme %q): %s", scheme, acceptedForms)
	}
}

func parseSQLite(rest string) (target, error) {
	path, _, _ := strings.Cut(rest, "?")
	if path == "" {
		return target{}, errors.New("ledger: sqlite: no file path: " + acceptedForms)
	}
	where := "sqlite " + path
	// SQLite would create the file but not its folder, and fail with
	// "out of memory" or "unable to open"; say what is wrong instead.
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return target{}, fmt.Errorf("ledger: %s: folder %s does not exist: create it first", where, dir)
		}
		return target{}, fmt.Errorf("ledger: %s: %w", where, err)
	} else if !fi.IsDir() {
		return target{}, fmt.Errorf("ledger: %s: %s is not a folder", where, dir)
	}
	return target{driver: driverSQLite, dsn: sqlitedsn.Shared(rest), where: where}, nil
}

func parsePostgres(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: keep its reason only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return target{}, fmt.Errorf("ledger: postgres URL does not parse: %v", err)
	}
	return target{driver: driverPostgres, dsn: raw, where: describePostgres(u), scrub: newScrubber(raw, u)}, nil
}

// newScrubber hides the URL's passwords (user info, password and
// sslpassword parameters) as they are, decoded, and in the escapings a
// driver could print them with.
func newScrubber(raw string, u *url.URL) scrubber {
	var secrets []string
	if pw, ok := u.User.Password(); ok {
		secrets = append(secrets, pw)
	}
	// The password as the URL spells it, which re-encoding need not give back.
	authority := raw[strings.Index(raw, "://")+3:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		if _, pw, ok := strings.Cut(authority[:i], ":"); ok {
			secrets = append(secrets, pw)
		}
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k, err := url.QueryUnescape(k); err == nil && (k == "password" || k == "sslpassword") {
			secrets = append(secrets, v)
			if v, err := url.QueryUnescape(v); err == nil {
				secrets = append(secrets, v)
			}
		}
	}
	var forms []string
	for _, s := range secrets {
		if s != "" {
			forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("", s).String()[1:])
		}
	}
	if len(forms) == 0 {
		return scrubber{}
	}
	// The longest first: strings.Replacer tries its pairs in order at each
	// position, and an escaped form must win over a prefix of it.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, "xxxxx")
	}
	return scrubber{r: strings.NewReplacer(pairs...)}
}

// describePostgres is host:port/database: enough to tell ledgers apart,
// without the user, password or other parameters.
func describePostgres(u *url.URL) string {
	host := u.Host
	if host == "" {
		host = u.Query().Get("host")
	}
	if host == "" {
		host = "(default host)"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = u.Query().Get("dbname")
	}
	w := "postgres " + host
	if db != "" {
		w += "/" + db
	}
	return w + " (schema " + pgSchema + ")"
}

func (t target) connect() (*sqlStore, error) {
	db, err := sql.Open(t.driver, t.dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", t.where, t.scrub.wrap(err))
	}
	return newSQLStore(db, t), nil
}
