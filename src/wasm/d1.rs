//! [`Database`] on Cloudflare D1.

use crate::core::failure::FailureBucket;
use crate::ports::{Database, PortError, Rows, SqlValue, Stmt};
use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, D1Result};

pub struct D1Db(pub D1Database);

/// Classifies a D1 failure by its kind only; the text is matched, never
/// logged or returned (it can quote SQL values, i.e. user content).
fn classify(e: &worker::Error) -> PortError {
    let text = format!("{e} {e:?}").to_ascii_lowercase();
    if text.contains("constraint") {
        PortError::new(FailureBucket::DbRejected, "db_constraint")
    } else if text.contains("busy")
        || text.contains("locked")
        || text.contains("overloaded")
        || text.contains("too many")
    {
        PortError::new(FailureBucket::DbBusy, "db_busy")
    } else if text.contains("no such table")
        || text.contains("no such column")
        || text.contains("syntax error")
    {
        PortError::new(FailureBucket::DbRejected, "db_schema")
    } else {
        PortError::new(FailureBucket::DbUnavailable, "db_error")
    }
}

fn js(v: &SqlValue) -> JsValue {
    match v {
        SqlValue::Null => JsValue::NULL,
        SqlValue::Int(i) => JsValue::from_f64(*i as f64),
        SqlValue::Real(f) => JsValue::from_f64(*f),
        SqlValue::Text(s) => JsValue::from_str(s),
    }
}

impl D1Db {
    fn prepare(&self, stmt: &Stmt) -> Result<D1PreparedStatement, PortError> {
        let params: Vec<JsValue> = stmt.params.iter().map(js).collect();
        self.0
            .prepare(stmt.sql)
            .bind(&params)
            .map_err(|e| classify(&e))
    }
}

fn changes(r: &D1Result) -> u64 {
    r.meta().ok().flatten().and_then(|m| m.changes).unwrap_or(0) as u64
}

/// What D1 says it billed for one statement's result.
fn billed(r: &D1Result) -> Rows {
    let meta = r.meta().ok().flatten();
    Rows {
        read: meta.as_ref().and_then(|m| m.rows_read).unwrap_or(0) as u64,
        written: meta.as_ref().and_then(|m| m.rows_written).unwrap_or(0) as u64,
    }
}

impl Database for D1Db {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        let result = self.prepare(&stmt)?.all().await.map_err(|e| classify(&e))?;
        let rows = result
            .results::<T>()
            .map_err(|_| PortError::new(FailureBucket::Internal, "row_shape"))?;
        Ok((rows, billed(&result)))
    }

    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        let result = self.prepare(&stmt)?.run().await.map_err(|e| classify(&e))?;
        Ok((changes(&result), billed(&result)))
    }

    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        let prepared = stmts
            .iter()
            .map(|s| self.prepare(s))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self.0.batch(prepared).await.map_err(|e| classify(&e))?;
        let rows = results.iter().map(billed).fold(Rows::default(), Rows::plus);
        Ok((results.iter().map(changes).collect(), rows))
    }

    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        let result = self
            .prepare(&probe)?
            .all()
            .await
            .map_err(|e| classify(&e))?;
        result
            .meta()
            .ok()
            .flatten()
            .and_then(|m| m.size_after)
            .map(|n| n as u64)
            .ok_or(PortError::new(
                FailureBucket::DbUnavailable,
                "d1_size_missing",
            ))
    }
}
