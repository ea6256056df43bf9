//! The rows a native ledger's statements read and write, counted as D1
//! bills them (`meta.rows_read`, `meta.rows_written`), so the tests, the
//! simulation and the bench see the figures the Worker's jobs record.
//!
//! D1 counts in SQLite's virtual machine (a patch that workerd and libSQL
//! share): a row written for every table row inserted, updated or deleted
//! and for every index entry inserted (entries removed are not counted),
//! a trigger's included; one for every row a statement hands to a virtual
//! table (FTS5), none for the virtual table's own writes to its shadow
//! tables, which it makes in statements of its own; a row read for every
//! row a statement's loops visit. Here:
//!
//! - writes: SQLite's pre-update hook sees every table row changed, with
//!   its old and new values; each counts 1, plus, for an insert, one per
//!   index of its table, and for an update, one per index whose columns
//!   changed (as SQLite rewrites only those). A row handed to an FTS5
//!   table is seen as the row FTS5 writes into its `_docsize` table (one
//!   per row inserted or deleted); its other shadow tables are not
//!   counted. A partial index counts only for a row that meets its
//!   condition (on an update, when its columns or the condition's
//!   changed): the condition is evaluated on the row's new values by a
//!   statement of its own, on a separate in-memory database.
//! - reads: SQLite's scan status (`SQLITE_ENABLE_STMT_SCANSTATUS`, set in
//!   `.cargo/config.toml`) counts the rows each loop of a statement
//!   visited, read when the statement finishes; FTS5's own statements are
//!   left out. A trigger's loops are not in its statement's scan status,
//!   so a trigger's reads are missed (D1 counts them), and so is a bare
//!   `count(*)` of a table, which SQLite answers in one step that D1
//!   bills as every row counted.
//!
//! `tests/e2e/d1-rows.test.mjs` compares these figures with what the
//! local runtime (workerd, D1's counting) reports for the same work.

use rusqlite::ffi;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::rc::Rc;

/// How each table's changes count: its indexes (by the table columns they
/// hold), and whether it is a shadow table of FTS5.
#[derive(Clone, Debug, Default)]
struct TableCost {
    indexes: Vec<IndexCost>,
    /// `Some(true)`: an FTS5 table's `_docsize` (one row per row handed
    /// to FTS5); `Some(false)`: another shadow table (not counted).
    shadow: Option<bool>,
}

/// One index: the table columns it holds, and a partial index's
/// condition.
#[derive(Clone, Debug, Default)]
struct IndexCost {
    columns: Vec<i32>,
    condition: Option<Condition>,
}

/// A partial index's `WHERE`, as a statement of its own that evaluates it
/// for one row: `SELECT (<where>) FROM (SELECT ?1 AS "<column 0>", …)`,
/// each table column bound to the row's value; and the columns it names
/// (an update that changes one of them rewrites the index's entry).
#[derive(Clone, Debug, Default)]
struct Condition {
    sql: String,
    columns: Vec<i32>,
    width: i32,
}

/// `where_clause` of a partial index on a table of `columns` (name, cid).
fn condition(where_clause: &str, columns: &[(String, i32)]) -> Option<Condition> {
    let aliases: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, _))| format!("?{} AS \"{name}\"", i + 1))
        .collect();
    let sql = format!(
        "SELECT ({}) FROM (SELECT {})",
        where_clause.trim_end_matches(';'),
        aliases.join(", ")
    );
    let words: Vec<String> = where_clause
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_ascii_lowercase)
        .collect();
    let named = columns
        .iter()
        .filter(|(name, _)| words.contains(&name.to_ascii_lowercase()))
        .map(|(_, cid)| *cid)
        .collect();
    Some(Condition {
        sql,
        columns: named,
        width: columns.len() as i32,
    })
}

thread_local! {
    /// An empty in-memory database that evaluates partial indexes'
    /// conditions ([`Condition`]): the pre-update callback may not run
    /// statements on the connection it reports.
    static EVAL: rusqlite::Connection =
        rusqlite::Connection::open_in_memory().expect("an in-memory database opens");
}

/// A value the pre-update callback shows, as rusqlite holds one.
///
/// # Safety
/// `v` is a valid `sqlite3_value`.
unsafe fn owned(v: *mut ffi::sqlite3_value) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    // SAFETY: the caller's contract; the bytes are copied before return.
    unsafe {
        let bytes = |p: *const c_void| {
            let n = ffi::sqlite3_value_bytes(v).max(0) as usize;
            if p.is_null() || n == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), n).to_vec()
            }
        };
        match ffi::sqlite3_value_type(v) {
            ffi::SQLITE_INTEGER => Value::Integer(ffi::sqlite3_value_int64(v)),
            ffi::SQLITE_FLOAT => Value::Real(ffi::sqlite3_value_double(v)),
            ffi::SQLITE_TEXT => Value::Text(
                String::from_utf8_lossy(&bytes(ffi::sqlite3_value_text(v).cast())).into_owned(),
            ),
            ffi::SQLITE_BLOB => Value::Blob(bytes(ffi::sqlite3_value_blob(v))),
            _ => Value::Null,
        }
    }
}

thread_local! {
    /// [`schema_costs`] by schema text: the simulation opens a ledger per
    /// run, and reading every index's columns again each time was a tenth
    /// of its time.
    static COSTS: std::cell::RefCell<HashMap<String, Rc<HashMap<String, TableCost>>>> =
        std::cell::RefCell::new(HashMap::new());
}

/// The schema's tables and how their changes count, read once per thread
/// and schema.
fn schema_costs(conn: &rusqlite::Connection) -> Rc<HashMap<String, TableCost>> {
    let schema: String = conn
        .query_row(
            "SELECT coalesce(group_concat(type || name || coalesce(sql, ''), char(10)), '') FROM sqlite_schema",
            [],
            |r| r.get(0),
        )
        .expect("the schema reads");
    COSTS.with(|c| {
        Rc::clone(
            c.borrow_mut()
                .entry(schema)
                .or_insert_with(|| Rc::new(read_schema_costs(conn))),
        )
    })
}

fn read_schema_costs(conn: &rusqlite::Connection) -> HashMap<String, TableCost> {
    let names: Vec<(String, String)> = conn
        .prepare("SELECT name, coalesce(sql, '') FROM sqlite_schema WHERE type = 'table'")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .expect("the schema reads");
    let virtual_tables: Vec<String> = names
        .iter()
        .filter(|(_, sql)| sql.to_ascii_uppercase().starts_with("CREATE VIRTUAL TABLE"))
        .map(|(n, _)| n.clone())
        .collect();
    let mut out = HashMap::new();
    for (name, sql) in &names {
        let shadow = virtual_tables
            .iter()
            .find(|v| name.starts_with(&format!("{v}_")))
            .map(|v| *name == format!("{v}_docsize"));
        let without_rowid = sql.to_ascii_uppercase().contains("WITHOUT ROWID");
        let indexes = index_columns(conn, name, without_rowid);
        out.insert(name.clone(), TableCost { indexes, shadow });
    }
    out
}

/// The table columns of each index of `table` (a WITHOUT ROWID table's
/// primary key is the table itself, not an index), and a partial index's
/// condition.
fn index_columns(conn: &rusqlite::Connection, table: &str, without_rowid: bool) -> Vec<IndexCost> {
    let list: Vec<(String, String, Option<String>)> = conn
        .prepare(
            "SELECT l.name, l.origin, s.sql FROM pragma_index_list(?1) l
             LEFT JOIN sqlite_schema s ON s.type = 'index' AND s.name = l.name AND l.partial = 1",
        )
        .and_then(|mut s| {
            s.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<_, _>>()
        })
        .expect("the indexes read");
    let table_columns: Vec<(String, i32)> = conn
        .prepare("SELECT name, cid FROM pragma_table_xinfo(?1)")
        .and_then(|mut s| {
            s.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .expect("the columns read");
    list.into_iter()
        .filter(|(_, origin, _)| !(without_rowid && origin == "pk"))
        .map(|(index, _, sql)| {
            let columns = conn
                .prepare("SELECT cid FROM pragma_index_info(?1)")
                .and_then(|mut s| s.query_map([index], |r| r.get(0))?.collect())
                .expect("the index's columns read");
            let condition = sql.as_deref().and_then(|sql| {
                let at = sql.to_ascii_uppercase().rfind(" WHERE ")?;
                sql.get(at + 7..).map(str::to_string)
            });
            let condition = condition.and_then(|c| self::condition(&c, &table_columns));
            IndexCost { columns, condition }
        })
        .collect()
}

/// Whether the row being inserted or updated gets an entry in `index`:
/// it meets the index's condition, if any (D1 counts entries inserted).
///
/// # Safety
/// Only inside a pre-update callback of an insert or update on `db`.
unsafe fn in_index(db: *mut ffi::sqlite3, index: &IndexCost) -> bool {
    let Some(cond) = &index.condition else {
        return true;
    };
    // SAFETY: the caller's contract; each value is copied before return.
    let row: Vec<rusqlite::types::Value> = (0..cond.width)
        .map(|cid| unsafe {
            let mut value = std::ptr::null_mut();
            if ffi::sqlite3_preupdate_new(db, cid, &mut value) == 0 && !value.is_null() {
                owned(value)
            } else {
                rusqlite::types::Value::Null
            }
        })
        .collect();
    EVAL.with(|conn| {
        conn.prepare_cached(&cond.sql)
            .and_then(|mut q| {
                q.query_row(rusqlite::params_from_iter(row), |r| {
                    r.get::<_, Option<i64>>(0)
                })
            })
            .expect("a partial index's condition evaluates")
            .is_some_and(|met| met != 0)
    })
}

/// Whether column `cid` differs between the old and new row of the
/// update being reported (a column the hook cannot show, such as a virtual
/// generated one, counts as unchanged: ours derive from columns an update
/// never changes).
///
/// # Safety
/// Only inside a pre-update callback of an update on `db`.
unsafe fn changed(db: *mut ffi::sqlite3, cid: i32) -> bool {
    let (mut old, mut new) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the caller's contract; the values live until the callback returns.
    unsafe {
        if ffi::sqlite3_preupdate_old(db, cid, &mut old) != 0
            || ffi::sqlite3_preupdate_new(db, cid, &mut new) != 0
        {
            return false;
        }
        !same(old, new)
    }
}

/// Whether two values are equal as SQLite stores them.
///
/// # Safety
/// Both valid `sqlite3_value`s.
unsafe fn same(a: *mut ffi::sqlite3_value, b: *mut ffi::sqlite3_value) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let (ta, tb) = (ffi::sqlite3_value_type(a), ffi::sqlite3_value_type(b));
        let numeric = |t| t == ffi::SQLITE_INTEGER || t == ffi::SQLITE_FLOAT;
        if numeric(ta) && numeric(tb) {
            return ffi::sqlite3_value_double(a) == ffi::sqlite3_value_double(b);
        }
        if ta != tb {
            return false;
        }
        if ta == ffi::SQLITE_NULL {
            return true;
        }
        let (pa, pb) = (ffi::sqlite3_value_blob(a), ffi::sqlite3_value_blob(b));
        let (na, nb) = (ffi::sqlite3_value_bytes(a), ffi::sqlite3_value_bytes(b));
        if na != nb {
            return false;
        }
        if na == 0 {
            return true;
        }
        std::slice::from_raw_parts(pa.cast::<u8>(), na as usize)
            == std::slice::from_raw_parts(pb.cast::<u8>(), nb as usize)
    }
}

/// What the pre-update callback is given: the schema's costs and the count.
struct Hook {
    costs: Rc<HashMap<String, TableCost>>,
    written: Cell<u64>,
}

/// SQLite's pre-update callback: adds the rows the change writes, as D1
/// counts them, to [`Hook::written`].
unsafe extern "C" fn on_change(
    ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    op: c_int,
    _schema: *const c_char,
    table: *const c_char,
    _key1: i64,
    _key2: i64,
) {
    // SAFETY: `ctx` is the `Hook` the counter owns (it outlives the
    // connection's use); SQLite passes a valid table name.
    unsafe {
        let hook = &*ctx.cast::<Hook>();
        let name = CStr::from_ptr(table).to_string_lossy();
        let n = match hook.costs.get(name.as_ref()) {
            None => 1,
            Some(cost) => match cost.shadow {
                Some(true) if op != ffi::SQLITE_UPDATE => 1,
                Some(_) => 0,
                None if op == ffi::SQLITE_INSERT => {
                    1 + cost.indexes.iter().filter(|i| in_index(db, i)).count() as u64
                }
                None if op == ffi::SQLITE_UPDATE => {
                    1 + cost
                        .indexes
                        .iter()
                        .filter(|i| {
                            let moved = i.columns.iter().any(|&c| c >= 0 && changed(db, c))
                                || i.condition
                                    .as_ref()
                                    .is_some_and(|w| w.columns.iter().any(|&c| changed(db, c)));
                            moved && in_index(db, i)
                        })
                        .count() as u64
                }
                None => 1,
            },
        };
        hook.written.set(hook.written.get() + n);
    }
}

thread_local! {
    /// Rows read by the statements finished on this thread (the trace
    /// callback has no state of its own; a ledger is used by one thread).
    static READ: Cell<u64> = const { Cell::new(0) };
}

/// Whether a statement is one of FTS5's own (on its shadow tables), whose
/// rows D1 does not count.
fn is_internal(sql: &[u8]) -> bool {
    // FTS5 names its tables `'main'.'<table>_data'`; no statement of the
    // ledger quotes a schema name.
    sql.windows(3).any(|w| w == b"'.'") || sql.starts_with(b"PRAGMA")
}

/// SQLite's trace callback: at the end of each statement, adds the rows
/// its loops visited to [`READ`], and resets its counts.
unsafe extern "C" fn on_statement_end(
    kind: c_uint,
    _ctx: *mut c_void,
    p: *mut c_void,
    _x: *mut c_void,
) -> c_int {
    if kind != ffi::SQLITE_TRACE_PROFILE {
        return 0;
    }
    let stmt = p.cast::<ffi::sqlite3_stmt>();
    // SAFETY: SQLite passes the statement that finished, valid for the
    // duration of the callback; the calls only read and reset its counters.
    unsafe {
        let text = ffi::sqlite3_sql(stmt);
        let internal = text.is_null() || is_internal(CStr::from_ptr(text).to_bytes());
        if !internal {
            let mut total: u64 = 0;
            for idx in 0.. {
                let mut visits: i64 = 0;
                let rc = ffi::sqlite3_stmt_scanstatus_v2(
                    stmt,
                    idx,
                    ffi::SQLITE_SCANSTAT_NVISIT,
                    ffi::SQLITE_SCANSTAT_COMPLEX,
                    (&mut visits as *mut i64).cast::<c_void>(),
                );
                if rc != 0 {
                    break;
                }
                total += visits.max(0) as u64;
            }
            READ.with(|r| r.set(r.get() + total));
        }
        ffi::sqlite3_stmt_scanstatus_reset(stmt);
    }
    0
}

/// Counts a connection's rows read and written from now on.
pub struct RowCounter {
    hook: Box<Hook>,
}

impl RowCounter {
    /// Installs the counting callbacks on `conn` (its schema as it is now:
    /// a migration applied later is not seen). The counter must outlive
    /// the connection's use ([`super::SqliteDb`] drops it after).
    pub fn install(conn: &rusqlite::Connection) -> RowCounter {
        let hook = Box::new(Hook {
            costs: schema_costs(conn),
            written: Cell::new(0),
        });
        // SAFETY: the callbacks get a pointer to the boxed `Hook`, which
        // does not move and lives as long as the counter; the trace
        // callback has no context.
        unsafe {
            let db = conn.handle();
            ffi::sqlite3_preupdate_hook(
                db,
                Some(on_change),
                (&*hook as *const Hook).cast_mut().cast::<c_void>(),
            );
            let rc = ffi::sqlite3_trace_v2(
                db,
                ffi::SQLITE_TRACE_PROFILE,
                Some(on_statement_end),
                std::ptr::null_mut(),
            );
            assert_eq!(rc, 0, "the statement-end trace installs");
        }
        RowCounter { hook }
    }

    /// Removes the callbacks [`RowCounter::install`] set on `conn`, whose
    /// context dies with the counter: for a connection that outlives it.
    pub fn detach(conn: &rusqlite::Connection) {
        // SAFETY: clearing both callbacks leaves SQLite with no pointer.
        unsafe {
            let db = conn.handle();
            ffi::sqlite3_preupdate_hook(db, None, std::ptr::null_mut());
            ffi::sqlite3_trace_v2(db, 0, None, std::ptr::null_mut());
        }
    }

    /// Rows read and written so far (on this thread, for reads).
    pub fn now(&self) -> crate::ports::Rows {
        crate::ports::Rows {
            read: READ.with(Cell::get),
            written: self.hook.written.get(),
        }
    }
}

/// What happened between two readings of a counter.
pub fn between(before: crate::ports::Rows, after: crate::ports::Rows) -> crate::ports::Rows {
    crate::ports::Rows {
        read: after.read.saturating_sub(before.read),
        written: after.written.saturating_sub(before.written),
    }
}
