package sqlstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Probe pairs: how a collation compares each pair tells its properties.
// 'a' < 'B' is false in code-point order and true in every linguistic
// one; among case-insensitive collations 'a' < '_' holds where letters
// are ordered by the code points of their upper-case forms (MySQL's
// general_ci, 'A' = 0x41 < '_' = 0x5F) and not where punctuation sorts
// before letters (the Unicode Collation Algorithm, locales).
var collationProbes = []any{
	"a", "A", // case
	"e", "é", // accent
	"a ", "a", // trailing space
	"a", "B", // code point or linguistic, when case-sensitive
	"a", "_", // code point or linguistic, when case-insensitive
}

// collationFrom derives the declared properties from the probe results.
func collationFrom(name string, caseEq, accentEq, padEq, aLessB, aLessUnderscore bool) dao.Collation {
	c := dao.Collation{Name: name, CaseInsensitive: caseEq, AccentInsensitive: accentEq, PadSpace: padEq}
	if caseEq {
		c.Linguistic = !aLessUnderscore
	} else {
		c.Linguistic = aLessB
	}
	return c
}

// identifier matches the collation and character set names MySQL and
// MariaDB report, which are the only text put into a probe statement.
var identifier = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// readCollation returns how the database compares the strings of table,
// asking the server once:
//
//   - PostgreSQL, CockroachDB, YugabyteDB: the database's default collation (pg_database.datcollate),
//     which the columns Migrate creates use; its properties are probed by
//     comparing text parameters under it. Manual: Collation Support.
//   - MySQL, MariaDB: the table's collation when it exists
//     (information_schema.TABLES), otherwise the database's
//     (@@collation_database), probed by comparing parameters converted to
//     its character set under it (CONVERT … USING, COLLATE). Manual:
//     Character Sets and Collations; MariaDB Knowledge Base: Setting
//     Character Sets and Collations.
//   - SQLite: BINARY, the default collating sequence of columns that
//     declare none (Datatypes In SQLite, Collating Sequences); no I/O.
//   - SQL Server: the server's default collation
//     SQL_Latin1_General_CP1_CI_AS is assumed (case-insensitive,
//     accent-sensitive, trailing spaces ignored as in every SQL Server
//     comparison); no I/O, so that New sends nothing on SQL Server.
func readCollation(ctx context.Context, pool gorm.ConnPool, name dialects.Name, table string) (dao.Collation, error) {
	var (
		coll                            string
		caseEq, accentEq, padEq, aB, aU bool
	)
	switch dialects.Family(name) {
	case dialects.SQLite:
		return dao.Collation{Name: "BINARY"}, nil
	case dialects.SQLServer:
		return dao.Collation{Name: "SQL_Latin1_General_CP1_CI_AS (assumed)", CaseInsensitive: true, PadSpace: true, Linguistic: true}, nil
	case dialects.Postgres:
		row := pool.QueryRowContext(ctx, `SELECT datcollate, $1::text = $2::text, $3::text = $4::text, $5::text = $6::text, $7::text < $8::text, $9::text < $10::text
FROM pg_database WHERE datname = current_database()`, collationProbes...)
		if err := row.Scan(&coll, &caseEq, &accentEq, &padEq, &aB, &aU); err != nil {
			return dao.Collation{}, err
		}
	case dialects.MySQL:
		schemaName, tableName, dotted := strings.Cut(table, ".")
		if !dotted {
			schemaName, tableName = "", table
		}
		var charset string
		row := pool.QueryRowContext(ctx, `SELECT c.COLLATION_NAME, c.CHARACTER_SET_NAME FROM information_schema.COLLATIONS c
WHERE c.COLLATION_NAME = COALESCE(
  (SELECT t.TABLE_COLLATION FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND t.TABLE_NAME = ?),
  @@collation_database)`, schemaName, tableName)
		if err := row.Scan(&coll, &charset); err != nil {
			return dao.Collation{}, err
		}
		if !identifier.MatchString(coll) || !identifier.MatchString(charset) {
			return dao.Collation{}, fmt.Errorf("unexpected collation %q of character set %q", coll, charset)
		}
		cmp := func(op string) string {
			return fmt.Sprintf("CONVERT(? USING %s) COLLATE %s %s CONVERT(? USING %s)", charset, coll, op, charset)
		}
		q := "SELECT " + strings.Join([]string{cmp("="), cmp("="), cmp("="), cmp("<"), cmp("<")}, ", ")
		if err := pool.QueryRowContext(ctx, q, collationProbes...).Scan(&caseEq, &accentEq, &padEq, &aB, &aU); err != nil {
			return dao.Collation{}, err
		}
	default:
		return dao.Collation{}, fmt.Errorf("%w: no collation known for dialect %q", dao.ErrInvalidArgument, name)
	}
	return collationFrom(coll, caseEq, accentEq, padEq, aB, aU), nil
}
